import time

import numpy as np
import pytest

import tilegraph as tg
import tilegraph.loop.interpret as interp_mod
from tilegraph import dtype as dt
from tilegraph import te
from tilegraph.loop.from_te import workload_to_func
from tilegraph.loop.interpret import interpret, run_func
from tilegraph.loop.ir import Allocate, Barrier, Block, BlockVar, Buffer, BufferStore, For, Func, IfThenElse, Seq, seq
from tilegraph.te.expr import BufferLoad, Const, Ramp, Var, call

# ----------------------------------------------------------------------------- workloads


def _matmul(m=64, n=48, k=37):
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, n), name="B")
    r = te.reduce_axis(k, "k")
    c = te.compute((m, n), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tg.Workload([a, b], [c]), c


def _rowmax(m=13, n=29):
    a = te.placeholder((m, n), name="A")
    r = te.reduce_axis(n, "r")
    c = te.compute((m,), lambda i: te.max(a[i, r], axis=r), name="M")
    return tg.Workload([a], [c]), c


def _elementwise(m=9, n=17):
    a = te.placeholder((m, n), name="A")
    c = te.compute((m, n), lambda i, j: te.select(a[i, j].gt(0.0), te.exp(a[i, j]), a[i, j] * 0.5), name="E")
    return tg.Workload([a], [c]), c


def _softmax(m=7, n=33):
    a = te.placeholder((m, n), name="A")
    r = te.reduce_axis(n, "r")
    mx = te.compute((m,), lambda i: te.max(a[i, r], axis=r), name="mx")
    r2 = te.reduce_axis(n, "r2")
    den = te.compute((m,), lambda i: te.sum(te.exp(a[i, r2] - mx[i]), axis=r2), name="den")
    out = te.compute((m, n), lambda i, j: te.exp(a[i, j] - mx[i]) / den[i], name="S")
    return tg.Workload([a], [out]), (mx, den, out)


def _inputs(wl, rng):
    return [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]


def _softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _same(got, want):
    """Bit-identical results, and not vacuously: NaN (an unwritten element) would compare equal."""
    assert not np.isnan(want).any()
    np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------- unscheduled


def test_matmul_odd_sizes_matches_numpy(rng):
    wl, _ = _matmul()
    a, b = _inputs(wl, rng)
    out = interpret(wl, a, b)
    assert out.dtype == np.float32 and out.shape == (64, 48)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_max_reduction_matches_numpy(rng):
    wl, _ = _rowmax()
    (a,) = _inputs(wl, rng)
    np.testing.assert_array_equal(interpret(wl, a), a.max(axis=1))


def test_elementwise_select_exp_matches_numpy(rng):
    wl, _ = _elementwise()
    (a,) = _inputs(wl, rng)
    x = a.astype(np.float64)
    np.testing.assert_allclose(interpret(wl, a), np.where(x > 0, np.exp(x), x * 0.5), rtol=1e-5)


def test_softmax_with_intermediates_matches_numpy(rng):
    wl, _ = _softmax()
    (a,) = _inputs(wl, rng)
    np.testing.assert_allclose(interpret(wl, a), _softmax_ref(a), rtol=1e-4, atol=1e-6)


def test_accepts_schedule_func_and_workload(rng):
    wl, _ = _matmul(5, 4, 3)
    a, b = _inputs(wl, rng)
    want = interpret(wl, a, b)
    _same(interpret(tg.Schedule(wl), a, b), want)
    _same(interpret(workload_to_func(wl), a, b), want)
    _same(tg.interpret(wl, a, b), want)


def test_float32_arithmetic_stays_float32():
    a = te.placeholder((1,), name="A")
    c = te.compute((1,), lambda i: a[i] + 1e-8, name="C")
    out = interpret(tg.Workload([a], [c]), np.ones(1, np.float32))
    assert out[0] == np.float32(1.0)  # 1 + 1e-8 rounds to 1 in float32, not in float64


# ----------------------------------------------------------------------------- schedules


def _schedules_of_matmul():
    def split_reorder(sch, c):
        i, j, k = sch.loops(c)
        io, ii = sch.split(i, 8)
        jo, ji = sch.split(j, 5)
        ko, ki = sch.split(k, 4)
        sch.reorder(io, jo, ko, ii, ki, ji)
        sch.parallel(io)
        sch.unroll(ki)
        sch.vectorize(ji)

    def fuse_split(sch, c):
        i, j, k = sch.loops(c)
        f = sch.fuse(i, j)
        fo, fi = sch.split(f, 16)
        ko, ki = sch.split(k, 5)
        sch.reorder(fo, ko, ki, fi)
        sch.parallel(fo)
        sch.vectorize(fi)

    def reduction_outermost(sch, c):
        i, j, k = sch.loops(c)
        sch.reorder(k, i, j)
        sch.unroll(j)

    def three_way_split(sch, c):
        i, j, k = sch.loops(c)
        i0, i1, i2 = sch.split(i, [None, 3, 5])
        sch.reorder(j, i0, k, i1, i2)

    return [split_reorder, fuse_split, reduction_outermost, three_way_split]


@pytest.mark.parametrize("schedule", _schedules_of_matmul(), ids=lambda f: f.__name__)
def test_scheduled_matmul_is_identical(schedule, rng):
    wl, c = _matmul()
    a, b = _inputs(wl, rng)
    want = interpret(wl, a, b)
    sch = tg.Schedule(wl)
    schedule(sch, c)
    start = time.perf_counter()
    got = interpret(sch, a, b)
    assert time.perf_counter() - start < 10.0  # vectorised: well under a second; a per-point walk takes minutes
    _same(got, want)


def test_scheduled_softmax_is_identical(rng):
    wl, (mx, den, out) = _softmax()
    (a,) = _inputs(wl, rng)
    want = interpret(wl, a)
    sch = tg.Schedule(wl)
    i, j = sch.loops(out)
    jo, ji = sch.split(j, 8)
    sch.vectorize(ji)
    sch.parallel(sch.loops(mx)[0])
    io, ii = sch.split(sch.loops(den)[0], 2)
    sch.reorder(sch.loops(den)[2], io, ii)
    _same(interpret(sch, a), want)


def test_lanes_match_scalar_execution_bit_for_bit(rng, monkeypatch):
    wl, c = _softmax()
    (a,) = _inputs(wl, rng)
    lanes = interpret(wl, a)
    monkeypatch.setattr(interp_mod, "MAX_LANE_WORK", 0)  # every loop iterates in Python
    _same(interpret(wl, a), lanes)


def test_unwritten_outputs_stay_nan(rng):
    wl, c = _matmul(4, 4, 2)
    func = workload_to_func(wl)
    outer = func.body
    assert isinstance(outer, For)
    half = Func(func.name, func.params, For(outer.var, 2, "serial", outer.body))
    out = interpret(half, *_inputs(wl, rng))
    assert not np.isnan(out[:2]).any() and np.isnan(out[2:]).all()


# ----------------------------------------------------------------------------- errors


def _copy_func(load_offset: int) -> Func:
    a = Buffer("A", (8,), dt.float32)
    b = Buffer("B", (8,), dt.float32)
    i = Var("i")
    body = For(i, 8, "serial", BufferStore(b, (i,), BufferLoad(a, (i + load_offset,))))
    return Func("copy", (a, b), body)


@pytest.mark.parametrize("offset", [1, -1])
def test_out_of_bounds_load_raises_index_error(offset):
    with pytest.raises(IndexError, match="load from A"):
        interpret(_copy_func(offset), np.zeros(8, np.float32))


def test_guarded_out_of_bounds_load_is_fine():
    a = Buffer("A", (8,), dt.float32)
    b = Buffer("B", (8,), dt.float32)
    i = Var("i")
    load = BufferLoad(a, (i - 1,))
    store = BufferStore(b, (i,), te.select(i.ge(1), load, Const(0.0, dt.float32)))
    out = interpret(Func("shift", (a, b), For(i, 8, "parallel", store)), np.arange(8, dtype=np.float32))
    np.testing.assert_array_equal(out, [0, 0, 1, 2, 3, 4, 5, 6])


def test_input_checks_name_the_argument():
    wl, _ = _matmul(4, 3, 2)
    ok = np.zeros((4, 2), np.float32), np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="2 input array"):
        interpret(wl, ok[0])
    with pytest.raises(ValueError, match="input B: expected shape"):
        interpret(wl, ok[0], np.zeros((3, 2), np.float32))
    with pytest.raises(TypeError, match="input A: expected dtype float32"):
        interpret(wl, ok[0].astype(np.float64), ok[1])
    with pytest.raises(ValueError, match="thread_order"):
        interpret(wl, *ok, thread_order="sideways")


def test_run_func_in_place():
    func = _copy_func(0)
    b = np.full(8, np.nan, np.float32)
    run_func(func, {"A": np.arange(8, dtype=np.float32), "B": b})
    np.testing.assert_array_equal(b, np.arange(8))


def test_vector_ramp_store_and_load():
    a = Buffer("A", (8,), dt.float32)
    b = Buffer("B", (8,), dt.float32)
    i = Var("i")
    ramp = Ramp(i * 4, 1, 4)
    func = Func("vcopy", (a, b), For(i, 2, "serial", BufferStore(b, (ramp,), BufferLoad(a, (ramp,)) * 2.0)))
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(interpret(func, x), x * 2)


# ----------------------------------------------------------------------------- GPU-style


def _reverse_blocks_func(with_barrier: bool, tiled_loop: bool = False) -> Func:
    """out[bx, t*8 + tx] = in[bx, t*8 + 7 - tx] through a shared tile of 8. With `tiled_loop`, a
    serial loop over two tiles loads, syncs, reads, syncs (the pattern of a tiled GPU matmul);
    `with_barrier=False` drops the barrier that makes the readers wait for the writers."""
    cols = 16 if tiled_loop else 8
    a = Buffer("In", (4, cols), dt.float32)
    b = Buffer("Out", (4, cols), dt.float32)
    tile = Buffer("tile", (8,), dt.float32, scope="shared")
    acc = Buffer("acc", (1,), dt.float32, scope="local")
    bx, tx, ko = Var("bx"), Var("tx"), Var("ko")
    col = ko * 8 + tx if tiled_loop else tx
    load = BufferStore(tile, (tx,), BufferLoad(a, (bx, col)))
    use = BufferStore(acc, (Const(0),), BufferLoad(tile, (7 - tx,)))
    write = BufferStore(b, (bx, col), BufferLoad(acc, (Const(0),)))
    wait = (Barrier(),) if with_barrier else ()
    body = seq(load, *wait, use, write)
    if tiled_loop:
        body = For(ko, 2, "serial", seq(body, Barrier()))
    thread = For(tx, 8, "threadIdx.x", Allocate(acc, body))
    return Func("rev", (a, b), For(bx, 4, "blockIdx.x", Allocate(tile, thread)))


def _reverse_ref(x):
    return x.reshape(4, -1, 8)[:, :, ::-1].reshape(x.shape)


def test_race_across_loop_iterations_is_caught(rng):
    # Without the barrier that ends each iteration, a fast thread overwrites the tile of the
    # next iteration while slower threads still read the current one.
    func = _reverse_blocks_func(True, tiled_loop=True)
    loop = func.body.body.body.body.body
    assert isinstance(loop, For) and loop.var.name == "ko"
    racy = Func(func.name, func.params, _replace_loop_body(func, loop, loop.body.stmts[:-1]))
    x = rng.standard_normal((4, 16)).astype(np.float32)
    np.testing.assert_array_equal(interpret(func, x, thread_order="serial"), _reverse_ref(x))
    assert not np.array_equal(interpret(racy, x, thread_order="serial"), _reverse_ref(x), equal_nan=True)


def _replace_loop_body(func, loop, stmts):
    from tilegraph.loop.edit import replace_node

    return replace_node(func, loop, For(loop.var, loop.extent, loop.kind, Seq(tuple(stmts)))).body


@pytest.mark.parametrize("order", ["lockstep", "serial", "reversed", "random"])
@pytest.mark.parametrize("tiled_loop", [False, True])
def test_gpu_func_with_barriers_is_correct_in_every_thread_order(order, tiled_loop, rng):
    x = rng.standard_normal((4, 16 if tiled_loop else 8)).astype(np.float32)
    out = interpret(_reverse_blocks_func(True, tiled_loop), x, thread_order=order, seed=3)
    np.testing.assert_array_equal(out, _reverse_ref(x))


@pytest.mark.parametrize("order", ["serial", "reversed"])
@pytest.mark.parametrize("tiled_loop", [False, True])
def test_missing_barrier_is_caught(order, tiled_loop, rng):
    x = rng.standard_normal((4, 16 if tiled_loop else 8)).astype(np.float32)
    out = interpret(_reverse_blocks_func(False, tiled_loop), x, thread_order=order)
    assert not np.array_equal(out, _reverse_ref(x), equal_nan=True)


def test_missing_barrier_is_invisible_in_lockstep(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    out = interpret(_reverse_blocks_func(False), x)
    np.testing.assert_array_equal(out, _reverse_ref(x))


def test_gpu_block_with_predicate_and_if(rng):
    # blocks of 8 threads cover 20 elements; the tail is guarded by an if.
    a = Buffer("A", (20,), dt.float32)
    b = Buffer("B", (20,), dt.float32)
    bx, tx = Var("bx"), Var("tx")
    idx = bx * 8 + tx
    store = IfThenElse(idx.lt(20), BufferStore(b, (idx,), BufferLoad(a, (idx,)) + 1.0))
    func = Func("inc", (a, b), For(bx, 3, "blockIdx.x", For(tx, 8, "threadIdx.x", store)))
    x = rng.standard_normal(20).astype(np.float32)
    for order in ("lockstep", "serial"):
        np.testing.assert_array_equal(interpret(func, x, thread_order=order), x + np.float32(1))


def test_block_init_runs_once_per_output_element():
    a = Buffer("A", (3, 4), dt.float32)
    c = Buffer("C", (3,), dt.float32)
    i, k = Var("i"), Var("k")
    vi, vk = Var("v_i"), Var("v_k")
    block = Block("C", (BlockVar(vi, 3), BlockVar(vk, 4, "reduce")), (i, k),
                  BufferStore(c, (vi,), BufferLoad(c, (vi,)) + BufferLoad(a, (vi, vk))),
                  init=BufferStore(c, (vi,), Const(10.0, dt.float32)))
    func = Func("rowsum", (a, c), For(k, 4, "serial", For(i, 3, "parallel", block)))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(interpret(func, x), 10 + x.sum(axis=1))


# ----------------------------------------------------------------------------- buffers in loops


def _local_accumulator_matmul(m=6, n=5, k=7) -> Func:
    """for i, j: acc = 0; for k: acc += A[i,k]*B[k,j]; C[i,j] = acc   (acc: a local alloc)."""
    a = Buffer("A", (m, k), dt.float32)
    b = Buffer("B", (k, n), dt.float32)
    c = Buffer("C", (m, n), dt.float32)
    acc = Buffer("acc", (1,), dt.float32, scope="local")
    i, j, r = Var("i"), Var("j"), Var("k")
    zero = Const(0)
    update = BufferStore(acc, (zero,), BufferLoad(acc, (zero,)) + BufferLoad(a, (i, r)) * BufferLoad(b, (r, j)))
    inner = seq(BufferStore(acc, (zero,), Const(0.0, dt.float32)), For(r, k, "serial", update),
                BufferStore(c, (i, j), BufferLoad(acc, (zero,))))
    return Func("acc_mm", (a, b, c), For(i, m, "parallel", For(j, n, "serial", inner)), allocs=(acc,))


def test_local_buffer_is_private_per_lane(rng, monkeypatch):
    func = _local_accumulator_matmul()
    a = rng.standard_normal((6, 7)).astype(np.float32)
    b = rng.standard_normal((7, 5)).astype(np.float32)
    lanes = interpret(func, a, b)
    np.testing.assert_allclose(lanes, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(interp_mod, "MAX_LANE_WORK", 0)
    _same(interpret(func, a, b), lanes)


def test_overlapping_writes_to_intermediate(rng):
    # A compute_at-style producer recomputes a halo: tiles of T overlap, so the tile loop runs
    # serially when T is observable and with one T per lane otherwise; both exact.
    a = Buffer("A", (18,), dt.float32)
    out = Buffer("B", (16,), dt.float32)
    t = Buffer("T", (18,), dt.float32)
    io, r, ii = Var("io"), Var("r"), Var("ii")
    produce = For(r, 6, "serial", BufferStore(t, (io * 4 + r,), BufferLoad(a, (io * 4 + r,)) * 2.0))
    x = io * 4 + ii
    consume = For(ii, 4, "serial", BufferStore(out, (x,), BufferLoad(t, (x,)) + BufferLoad(t, (x + 2,))))
    func = Func("halo", (a, out), For(io, 4, "serial", seq(produce, consume)), allocs=(t,))
    plan = interp_mod._plan(func, True, {"A", "B", "T"})  # T supplied by a caller: not private
    assert not plan[id(func.body)].lane
    plan = interp_mod._plan(func, True, {"A", "B"})
    assert plan[id(func.body)].lane and plan[id(func.body)].private == ("T",)
    v = rng.standard_normal(18).astype(np.float32)
    np.testing.assert_array_equal(interpret(func, v), v[:16] * 2 + v[2:] * 2)
    b, tbuf = np.full(16, np.nan, np.float32), np.full(18, np.nan, np.float32)
    run_func(func, {"A": v, "B": b, "T": tbuf})
    np.testing.assert_array_equal(b, v[:16] * 2 + v[2:] * 2)
    np.testing.assert_array_equal(tbuf, v * 2)


_I0, _I1, _F0, _F1 = Var("i0"), Var("i1"), Var("f0"), Var("f1")


@pytest.mark.parametrize(("indices", "var", "expected"), [
    ((_I0 * 4 + _I1,), "i0", True),
    ((_I0 * 4 + _I1,), "i1", True),
    ((_I0 * 3 + _I1,), "i0", False),    # i1 spans 4 values: tiles overlap
    (((_F0 * 16 + _F1) // 48, (_F0 * 16 + _F1) % 48), "f0", True),
    (((_F0 * 16 + _F1) // 48,), "f0", False),
    ((_I0 + _I1,), "i0", False),
    ((_I0 + _I1,), "i1", True),         # i0 is an outer loop: fixed
    ((_I1 * 2, _F1), "i0", False),      # i0 not used: every iteration writes the same place
])
def test_injectivity_analysis(indices, var, expected):
    extents = {"i0": 8, "i1": 4, "f0": 192, "f1": 16}
    inner = {var, "i1", "f1"}
    assert interp_mod._determines(indices, var, inner, extents) is expected


def test_out_of_bounds_store_raises_index_error():
    a = Buffer("A", (8,), dt.float32)
    b = Buffer("B", (8,), dt.float32)
    i = Var("i")
    func = Func("f", (a, b), For(i, 8, "parallel", BufferStore(b, (i * 2,), BufferLoad(a, (i,)))))
    with pytest.raises(IndexError, match="store to B: index 8 is out of bounds"):
        interpret(func, np.zeros(8, np.float32))


def test_padded_buffer_indexes_within_shape_only():
    a = Buffer("A", (3, 4), dt.float32)
    b = Buffer("B", (3, 4), dt.float32, padding=(0, 4))
    i, j = Var("i"), Var("j")
    good = For(i, 3, "serial", For(j, 4, "serial", BufferStore(b, (i, j), BufferLoad(a, (i, j)))))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(interpret(Func("f", (a, b), good), x), x)
    bad = For(i, 3, "serial", For(j, 5, "serial", BufferStore(b, (i, j), Const(0.0, dt.float32))))
    with pytest.raises(IndexError, match="store to B"):
        interpret(Func("f", (a, b), bad), x)


def test_integer_workload_and_sentinel_poison():
    a = te.placeholder((5,), "int32", name="A")
    c = te.compute((5,), lambda i: (a[i] * 3) // 2 - a[i] % 4, name="C")
    x = np.array([-7, -1, 0, 5, 11], np.int32)
    np.testing.assert_array_equal(interpret(tg.Workload([a], [c]), x), (x * 3) // 2 - x % 4)
    buf = Buffer("C", (2,), dt.int32)
    func = Func("f", (buf,), For(Var("i"), 1, "serial", BufferStore(buf, (Const(0),), Const(1, dt.int32))))
    out = interpret(func)
    assert out[0] == 1 and out[1] == np.iinfo(np.int32).min


def test_outputs_argument_selects_params(rng):
    func = _copy_func(0)
    x = rng.standard_normal(8).astype(np.float32)
    np.testing.assert_array_equal(interpret(func, x, outputs=["B"]), x)
    np.testing.assert_array_equal(interpret(func, x, outputs=1), x)
    with pytest.raises(ValueError, match="outputs"):
        interpret(func, x, outputs=["Z"])


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "abs", "floor", "ceil"])
def test_intrinsics_match_float64(name, rng):
    import scipy.special

    refs = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v), "tanh": np.tanh,
            "erf": scipy.special.erf, "sigmoid": lambda v: 1 / (1 + np.exp(-v)), "abs": np.abs, "floor": np.floor,
            "ceil": np.ceil}
    a = te.placeholder((16,), name="A")
    c = te.compute((16,), lambda i: call(name, a[i]), name="C")
    x = rng.uniform(0.1, 3.0, 16).astype(np.float32)
    if name in ("abs", "floor", "ceil", "tanh", "erf"):
        x = x - 1.5
    out = interpret(tg.Workload([a], [c]), x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, refs[name](x.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_gpu_bound_schedule_runs_in_every_order(rng):
    wl, c = _matmul(16, 12, 9)
    a, b = _inputs(wl, rng)
    want = interpret(wl, a, b)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops(c)
    io, ii = sch.split(i, 4)
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.y")
    sch.bind(j, "threadIdx.x")
    for order in ("lockstep", "serial", "random"):
        _same(interpret(sch, a, b, thread_order=order), want)


def test_loop_carried_read_runs_serially():
    # B[i] = B[i-1] + A[i]: writes are injective in i, but iteration i reads iteration i-1's write.
    a = Buffer("A", (6,), dt.float32)
    b = Buffer("B", (6,), dt.float32)
    i = Var("i")
    prev = te.select(i.ge(1), BufferLoad(b, (i - 1,)), Const(0.0, dt.float32))
    func = Func("scan", (a, b), For(i, 6, "serial", BufferStore(b, (i,), prev + BufferLoad(a, (i,)))))
    x = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(interpret(func, x), np.cumsum(x))


def test_cache_write_compute_at_gpu_schedule(rng):
    wl, c = _matmul()
    a, b = _inputs(wl, rng)
    want = interpret(wl, a, b)
    sch = tg.Schedule(wl)
    i, j, k = sch.loops(c)
    io, ii = sch.split(i, 8)
    jo, ji = sch.split(j, 8)
    ko, ki = sch.split(k, 8)
    sch.reorder(io, jo, ii, ji, ko, ki)
    shared = sch.cache_read(c, "A", "shared")
    sch.cache_write(c, "local")
    sch.compute_at(shared, ji)
    sch.bind(io, "blockIdx.y")
    sch.bind(jo, "blockIdx.x")
    sch.bind(ii, "threadIdx.y")
    sch.bind(ji, "threadIdx.x")
    for order in ("lockstep", "serial"):
        start = time.perf_counter()
        _same(interpret(sch, a, b, thread_order=order), want)
        assert time.perf_counter() - start < 20.0  # vectorised: a second or two; a per-point walk takes minutes


def test_conv_with_compute_at_padding_is_exact_and_fast(rng):
    from tilegraph import ops

    x = te.placeholder((1, 14, 14, 16), name="X")
    w = te.placeholder((3, 3, 16, 16), name="W")
    y = ops.conv2d_nhwc(x, w, padding=1)
    wl = tg.Workload([x, w], [y])
    xs, ws = _inputs(wl, rng)
    want = interpret(wl, xs, ws)
    padded = np.pad(xs.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    ref = sum(np.einsum("nhwc,cf->nhwf", padded[:, dh:dh + 14, dw:dw + 14], ws[dh, dw].astype(np.float64))
              for dh in range(3) for dw in range(3))
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4)
    sch = tg.Schedule(wl)
    n, h, ww, f, rh, rw, rc = sch.loops(y)
    ho, hi = sch.split(h, 2)
    fo, fi = sch.split(f, 8)
    sch.reorder(n, ho, ww, fo, rh, rw, rc, hi, fi)
    sch.compute_at(sch.block_names()[0], ww)
    sch.cache_write(y, "local")
    sch.vectorize(fi)
    start = time.perf_counter()
    _same(interpret(sch, xs, ws), want)
    assert time.perf_counter() - start < 10.0  # vectorised: well under a second; a per-point walk takes minutes
