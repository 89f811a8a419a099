import pytest

import tilegraph as tg
from tilegraph import dtype as dt
from tilegraph import te
from tilegraph.loop.from_te import workload_to_func
from tilegraph.loop.ir import Allocate, Barrier, Block, BlockVar, Buffer, BufferStore, For, Func, Seq
from tilegraph.loop.verify import VerifyError, verify
from tilegraph.te.expr import BufferLoad, Const, Var

A = Buffer("A", (8,), dt.float32)
B = Buffer("B", (8,), dt.float32)
VI, VJ = Var("i"), Var("j")


def _copy(body_index=VI, extent=8, kind="serial", load_buffer=A, allocs=()):
    store = BufferStore(B, (body_index,), BufferLoad(load_buffer, (body_index,)))
    return Func("f", (A, B), For(VI, extent, kind, store), allocs)


def test_workload_funcs_and_schedules_verify():
    a = te.placeholder((10, 4), name="A")
    b = te.placeholder((4, 3), name="B")
    k = te.reduce_axis(4, "k")
    c = te.compute((10, 3), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    wl = tg.Workload([a, b], [c])
    verify(workload_to_func(wl))
    sch = tg.Schedule(wl)
    i, j, kk = sch.loops(c)
    io, ii = sch.split(i, 4)
    sch.reorder(io, j, kk, ii)
    sch.parallel(io)
    verify(sch.func)


def test_verify_error_is_a_lowering_error():
    assert issubclass(VerifyError, tg.LoweringError)


def test_unbound_variable():
    with pytest.raises(VerifyError, match="variable j is used .* not bound"):
        verify(_copy(body_index=VJ))


def test_duplicate_loop_variable():
    inner = For(VI, 2, "serial", BufferStore(B, (VI,), Const(0.0, dt.float32)))
    with pytest.raises(VerifyError, match="loop variable i is used by two loops"):
        verify(Func("f", (A, B), For(VI, 2, "serial", inner)))


def test_wrong_index_count():
    store = BufferStore(B, (VI, VI), Const(0.0, dt.float32))
    with pytest.raises(VerifyError, match=r"indexes buffer B \(1-d\) with 2 indices"):
        verify(Func("f", (A, B), For(VI, 8, "serial", store)))


def test_unknown_buffer():
    stray = Buffer("S", (8,), dt.float32)
    with pytest.raises(VerifyError, match="buffer S, which is not a param"):
        verify(_copy(load_buffer=stray))
    verify(_copy(load_buffer=stray, allocs=(stray,)))


def test_allocate_scopes_its_buffer():
    tmp = Buffer("T", (8,), dt.float32, scope="local")
    ok = Allocate(tmp, For(VI, 8, "serial", BufferStore(tmp, (VI,), BufferLoad(A, (VI,)))))
    verify(Func("f", (A, B), ok))
    after = BufferStore(B, (Const(0),), BufferLoad(tmp, (Const(0),)))
    with pytest.raises(VerifyError, match="buffer T"):
        verify(Func("f", (A, B), Seq((ok, after))))


def test_block_binding_count():
    vi = Var("v_i")
    block = Block("B", (BlockVar(vi, 8),), (VI, VI), BufferStore(B, (vi,), Const(0.0, dt.float32)))
    with pytest.raises(VerifyError, match="1 iteration variables but 2 bindings"):
        verify(Func("f", (A, B), For(VI, 8, "serial", block)))


def test_non_positive_extent():
    with pytest.raises(VerifyError, match="non-positive extent 0"):
        verify(_copy(extent=0))


def test_vectorized_loop_contains_no_loop():
    inner = For(VJ, 2, "serial", BufferStore(B, (VI,), Const(0.0, dt.float32)))
    with pytest.raises(VerifyError, match="vectorized loop i contains another loop"):
        verify(Func("f", (A, B), For(VI, 4, "vectorized", inner)))


def test_thread_loop_nested_in_same_kind():
    inner = For(VJ, 2, "threadIdx.x", BufferStore(B, (VI,), Const(0.0, dt.float32)))
    with pytest.raises(VerifyError, match="threadIdx.x inside another threadIdx.x"):
        verify(Func("f", (A, B), For(VI, 4, "threadIdx.x", inner)))
    verify(Func("f", (A, B), For(VI, 4, "threadIdx.y", inner)))


def test_barrier_only_in_thread_loops():
    store = BufferStore(B, (VI,), Const(0.0, dt.float32))
    with pytest.raises(VerifyError, match="barrier is outside every GPU thread loop"):
        verify(Func("f", (A, B), For(VI, 8, "blockIdx.x", Seq((Barrier(), store)))))
    verify(Func("f", (A, B), For(VI, 8, "threadIdx.x", Seq((Barrier(), store)))))


def test_unknown_loop_kind():
    with pytest.raises(VerifyError, match="unknown kind 'sideways'"):
        verify(_copy(kind="sideways"))
