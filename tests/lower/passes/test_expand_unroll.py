from tilegraph import dtype as dt
from tilegraph.loop.ir import Buffer, BufferStore, For, Func, Seq
from tilegraph.loop.verify import verify
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes import expand_unroll
from tilegraph.te.expr import Const, Var


def _func(extent, inner=False):
    out = Buffer("O", (extent * 2,), dt.float32)
    i, j = Var("i"), Var("j")
    one = Const(1.0, dt.float32)
    body = For(j, 2, "serial", BufferStore(out, (i * 2 + j,), one)) if inner else BufferStore(out, (i,), one)
    return Func("f", (out,), For(i, extent, "unrolled", body))


def test_unrolled_loop_becomes_copies():
    out = expand_unroll.run(_func(3), None)
    assert isinstance(out.body, Seq) and len(out.body.stmts) == 3
    assert [s.indices[0] for s in out.body.stmts] == [Const(0), Const(1), Const(2)]


def test_inner_loops_get_fresh_names():
    out = expand_unroll.run(_func(3, inner=True), None)
    verify(out)
    names = [s.var.name for s in walk_stmts(out.body) if isinstance(s, For)]
    assert len(names) == 3 == len(set(names))


def test_long_loops_stay_loops():
    out = expand_unroll.run(_func(600), None)
    assert isinstance(out.body, For) and out.body.kind == "unrolled"
