"""merge_thread_loops: sibling thread loops of one axis and extent become one; per-thread buffers move in."""

from tilegraph import dtype as dt
from tilegraph.loop.ir import Allocate, Barrier, Buffer, BufferStore, For, Func, Seq
from tilegraph.lower.gpu import merge_thread_loops
from tilegraph.te.expr import BufferLoad, Const, Var

F32 = dt.float32


def _stage(name, var, src, dst, extent=32):
    v = Var(var)
    return For(v, extent, "threadIdx.x", BufferStore(dst, (v,), BufferLoad(src, (v,)) + Const(1.0, F32)))


def test_siblings_merge_and_local_allocations_move_inside():
    a, b, out = Buffer("a", (32,), F32), Buffer("m", (32,), F32, "local"), Buffer("out", (32,), F32)
    body = For(Var("ty"), 2, "threadIdx.y", Allocate(b, Seq((_stage("tx", "tx", a, b), _stage("tx_1", "tx_1", b, out)))))
    func = Func("f", (a, out), For(Var("bx"), 1, "blockIdx.x", body))
    merged = merge_thread_loops.run(func)
    ty = merged.body.body
    assert isinstance(ty.body, For) and ty.body.kind == "threadIdx.x"
    assert isinstance(ty.body.body, Allocate) and ty.body.body.buffer.name == "m"
    stores = ty.body.body.body.stmts
    assert [s.indices[0].name for s in stores] == ["tx", "tx"]


def test_other_extents_stay_apart_and_shared_parts_get_a_barrier():
    a, s, out = Buffer("a", (32,), F32), Buffer("s", (32,), F32, "shared"), Buffer("out", (32,), F32)
    short = merge_thread_loops.run(Func("f", (a, out), Seq((_stage("t0", "t0", a, out), _stage("t1", "t1", a, out, 16)))))
    assert len(short.body.stmts) == 2
    merged = merge_thread_loops.run(Func("f", (a, out), Seq((_stage("t0", "t0", a, s), _stage("t1", "t1", s, out)))))
    assert isinstance(merged.body, For) and any(isinstance(x, Barrier) for x in merged.body.body.stmts)


def test_a_global_buffer_passed_between_the_parts_keeps_a_barrier_and_private_parts_need_none():
    a, t, out = Buffer("a", (32,), F32), Buffer("t", (32,), F32), Buffer("out", (32,), F32)
    merged = merge_thread_loops.run(Func("f", (a, t, out), Seq((_stage("t0", "t0", a, t), _stage("t1", "t1", t, out)))))
    assert any(isinstance(x, Barrier) for x in merged.body.body.stmts)
    apart = merge_thread_loops.run(Func("f", (a, t, out), Seq((_stage("t0", "t0", a, t), _stage("t1", "t1", a, out)))))
    assert not any(isinstance(x, Barrier) for x in apart.body.body.stmts)
