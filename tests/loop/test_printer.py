"""loop/printer.py: the canonical text of a Func (logs, golden files, IR dumps)."""

import tilegraph as tg
from tilegraph import te
from tilegraph.loop.printer import func_str, stmt_str


def test_func_text_shows_params_allocs_loops_and_blocks():
    a = te.placeholder((4,), name="A")
    b = te.compute((4,), lambda i: a[i] * 2.0, name="B")
    sch = tg.Schedule(tg.Workload([a], [te.compute((4,), lambda i: b[i] + 1.0, name="C")]))
    sch.parallel(sch.loops("C")[0])
    text = func_str(sch.func)
    assert text.splitlines()[0] == "func tg_C(A: float32[4], C: float32[4]):"
    assert "  alloc B: float32[4] scope=global" in text
    assert "for i_1 in range(4) parallel:" in text and "block C(v_i=i_1):" in text
    assert stmt_str(sch.func.body) in text.replace("\n  ", "\n")
