import tilegraph as tg
from tilegraph import te
from tilegraph.loop.ir import Block, For
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.pipeline import PASSES, lower

TARGET = tg.Target.from_string("cpu -isa=avx512")


def _workload():
    x = te.placeholder((4, 8), name="X")
    y = te.compute((4, 8), lambda i, j: x[i, j] * 3.0, name="Y")
    return te.Workload([x], [y]), y


def test_pass_order():
    names = [n for n, _ in PASSES]
    assert names == ["compact_buffers", "stack_small_buffers", "hoist_reduction_init", "skip_past_dims",
                     "relax_dims_guards", "lower_blocks", "simplify",
                     "flatten_buffers", "use_matrix_tiles",
                     "lower_vectorize", "expand_unroll", "hoist_invariant_guards", "final_simplify",
                     "promote_registers", "pair_bf16_products",
                     "group_int8_products", "pin_operand_vectors", "check_printable"]


def test_lowered_func_is_flat_and_blockless():
    wl, _ = _workload()
    out = lower(tg.Schedule(wl).func, TARGET)
    assert all(b.ndim == 1 for b in out.params)
    assert not any(isinstance(s, Block) for s in walk_stmts(out.body))


def test_dump_prints_every_pass(capsys, monkeypatch):
    wl, _ = _workload()
    lower(tg.Schedule(wl).func, TARGET, dump=True)
    text = capsys.readouterr().out
    for name, _ in PASSES:
        assert f"# after {name}" in text
    monkeypatch.setenv("TILEGRAPH_DUMP_IR", "1")
    lower(tg.Schedule(wl).func, TARGET)
    assert "# after lower_blocks" in capsys.readouterr().out
    monkeypatch.setenv("TILEGRAPH_DUMP_IR", "0")
    lower(tg.Schedule(wl).func, TARGET)
    assert capsys.readouterr().out == ""


def test_the_lowered_ir_is_always_verified_and_every_pass_under_tilegraph_verify(monkeypatch):
    import tilegraph.lower.pipeline as pipeline

    checked = []
    monkeypatch.setattr(pipeline, "verify", checked.append)
    wl, _ = _workload()
    monkeypatch.setenv("TILEGRAPH_VERIFY", "0")
    out = lower(tg.Schedule(wl).func, TARGET)
    assert checked == [out], "once, the result"
    checked.clear()
    monkeypatch.setenv("TILEGRAPH_VERIFY", "1")
    out = lower(tg.Schedule(wl).func, TARGET)
    assert len(checked) == len(PASSES) and checked[-1] is out


def test_unit_loops_disappear():
    x = te.placeholder((1, 5), name="X")
    y = te.compute((1, 5), lambda i, j: x[i, j] + 1.0, name="Y")
    out = lower(tg.Schedule(te.Workload([x], [y])).func, TARGET)
    assert [s.extent for s in walk_stmts(out.body) if isinstance(s, For)] == [5]
