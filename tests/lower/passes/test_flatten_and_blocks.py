import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph import te
from tilegraph.loop.ir import Buffer, IfThenElse
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes import flatten_buffers, lower_blocks, simplify
from tilegraph.lower.passes.common import prove
from tilegraph.te.expr import Const, Var


def test_flat_index_honours_padding():
    b = Buffer("C", (10, 3), dt.float32, padding=(0, 1))
    i, j = Var("i"), Var("j")
    assert flatten_buffers.flat_buffer(b).shape == (40,)
    idx = flatten_buffers.flat_index(b, (i, j))
    assert idx == (i * 4) + j


def test_guard_kept_only_when_not_provable():
    x = te.placeholder((10,), name="X")
    y = te.compute((10,), lambda i: x[i] + 1.0, name="Y")
    sch = tg.Schedule(te.Workload([x], [y]))
    (i,) = sch.loops(y)
    sch.split(i, 4)
    out = simplify.run(lower_blocks.run(sch.func, None), None)
    assert sum(isinstance(s, IfThenElse) for s in walk_stmts(out.body)) == 1
    sch2 = tg.Schedule(te.Workload([x], [y]))
    sch2.split(sch2.loops(y)[0], 5)
    out2 = lower_blocks.run(sch2.func, None)
    assert not any(isinstance(s, IfThenElse) for s in walk_stmts(out2.body))


def test_prove_uses_loop_ranges():
    i = Var("i")
    assert prove((i * 4 + 3).lt(16), {"i": (0, 3)}) is True
    assert prove((i * 4 + 3).lt(16), {"i": (0, 4)}) is None
    assert prove(i.lt(0), {"i": (0, 4)}) is False
    assert prove(Const(True, dt.bool_), {}) is True


def test_canonical_index_cancels_terms():
    from tilegraph.lower.passes.common import canonical_index

    i, j = Var("i"), Var("j")
    assert canonical_index((j * 32 + 5) - j * 32) == Const(5)
    assert canonical_index((i * 4 + 1) * 7 + j) == (i * 28 + j) + 7
    assert canonical_index(i - i * 2) == Const(0) - i
