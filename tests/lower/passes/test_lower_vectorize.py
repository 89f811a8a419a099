import numpy as np

import tilegraph as tg
from tilegraph import te
from tilegraph.loop.ir import BufferStore, For
from tilegraph.loop.visit import walk_stmts
from tilegraph.lower.passes.lower_vectorize import chunk_widths
from tilegraph.lower.pipeline import lower
from tilegraph.te.expr import Broadcast, Ramp

AVX512 = tg.Target.from_string("cpu -isa=avx512")
AVX2 = tg.Target.from_string("cpu -isa=avx2")


def test_chunk_widths():
    assert chunk_widths(16, 16) == [16]
    assert chunk_widths(13, 16) == [8, 4]
    assert chunk_widths(7, 4) == [4]
    assert chunk_widths(64, 16) == [16] * 4
    assert chunk_widths(40, 8) == [8] * 5
    assert chunk_widths(3, 16) == []


def _vectorized(fn, n=13, target=AVX512):
    x = te.placeholder((2, n), name="X")
    y = te.compute((2, n), lambda i, j: fn(x, i, j), name="Y")
    sch = tg.Schedule(te.Workload([x], [y]))
    _, j = sch.loops(y)
    sch.vectorize(j)
    return lower(sch.func, target)


def test_tail_is_a_scalar_loop():
    out = _vectorized(lambda x, i, j: x[i, j] + x[i, 0])
    stores = [s for s in walk_stmts(out.body) if isinstance(s, BufferStore)]
    lanes = [s.indices[0].lanes for s in stores if isinstance(s.indices[0], Ramp)]
    assert lanes == [8, 4]
    vec = stores[0]
    assert isinstance(vec.value.b, Broadcast)  # x[i, 0] is invariant in j
    tails = [s for s in walk_stmts(out.body) if isinstance(s, For) and s.kind == "vectorized"]
    assert [t.extent for t in tails] == []  # a tail of one iteration is unrolled away by simplify
    assert len([s for s in stores if not isinstance(s.indices[0], Ramp)]) == 1


def test_condition_on_the_lane_falls_back_to_a_scalar_loop():
    out = _vectorized(lambda x, i, j: te.select(j.lt(3), x[i, j], 0.0), n=16)
    loops = [s for s in walk_stmts(out.body) if isinstance(s, For) and s.kind == "vectorized"]
    assert [lp.extent for lp in loops] == [16]


def test_strided_load_is_a_gather():
    x = te.placeholder((16, 16), name="X")
    y = te.compute((16, 16), lambda i, j: x[j, i] * 2.0, name="Y")
    sch = tg.Schedule(te.Workload([x], [y]))
    _, j = sch.loops(y)
    sch.vectorize(j)
    out = lower(sch.func, AVX2)
    (store,) = [s for s in walk_stmts(out.body) if isinstance(s, BufferStore)][:1]
    assert store.value.a.indices[0] == Ramp(store.value.a.indices[0].base, 16, 8)


def test_split_tail_guard_becomes_vector_chunk_or_scalar_loop():
    # 67 = 4 * 16 + 3: the guard of the non-dividing split is tested per chunk, not per lane
    x = te.placeholder((67,), name="X")
    y = te.compute((67,), lambda i: x[i] * 2.0, name="Y")
    sch = tg.Schedule(te.Workload([x], [y]))
    _, inner = sch.split(sch.loops(y)[0], 16)
    sch.vectorize(inner)
    out = lower(sch.func, AVX512)
    vector_stores = [s for s in walk_stmts(out.body) if isinstance(s, BufferStore) and isinstance(s.indices[0], Ramp)]
    assert [s.indices[0].lanes for s in vector_stores] == [16]
    assert not any(isinstance(s, For) and s.kind == "vectorized" for s in walk_stmts(out.body))
    a = np.random.default_rng(0).standard_normal(67).astype(np.float32)
    np.testing.assert_allclose(tg.interpret(out, a), a * 2.0, rtol=1e-6)


def _calls(out, name):
    from tilegraph.te.expr import Call
    from tilegraph.te.visit import walk

    stores = [s for s in walk_stmts(out.body) if isinstance(s, BufferStore)]
    return [(c, s) for s in stores for c in walk(s.value) if isinstance(c, Call) and c.name == name]


def test_math_calls_become_vector_calls():
    out = _vectorized(lambda x, i, j: te.exp(x[i, j]) + te.erf(x[i, 0]), n=16)
    assert not any(isinstance(s, For) and s.kind == "vectorized" for s in walk_stmts(out.body))
    exp_calls = _calls(out, "exp")
    assert exp_calls and all(isinstance(c.args[0].indices[0], Ramp) for c, _ in exp_calls)
    (erf_call, _), *_ = _calls(out, "erf")
    assert not isinstance(erf_call.args[0].indices[0], Ramp)  # invariant in j: one scalar call, broadcast


def test_select_on_loaded_values_becomes_a_lane_mask():
    from tilegraph.te.expr import Cmp, Select

    out = _vectorized(lambda x, i, j: te.select(x[i, j].gt(0.0), x[i, j], te.exp(x[i, j]) - 1.0), n=16)
    (store,) = [s for s in walk_stmts(out.body) if isinstance(s, BufferStore)]
    assert isinstance(store.value, Select) and isinstance(store.value.cond, Cmp)
    assert isinstance(store.value.cond.b, Broadcast)
    a = np.random.default_rng(0).standard_normal((2, 16)).astype(np.float32)
    got = np.asarray(tg.interpret(out, a)).reshape(2, 16)
    np.testing.assert_allclose(got, np.where(a > 0, a, np.expm1(a.astype(np.float64))), rtol=1e-6)


def test_load_under_a_lane_select_is_blended_when_provably_in_bounds():
    # X[i, j + 1] reaches flat index 33 of 34: every lane may read it, so the select is a blend
    x = te.placeholder((2, 17), name="X")
    y = te.compute((2, 16), lambda i, j: te.select(x[i, j].gt(0.0), x[i, j + 1], 0.0), name="Y")
    sch = tg.Schedule(te.Workload([x], [y]))
    sch.vectorize(sch.loops(y)[1])
    out = lower(sch.func, AVX512)
    assert not any(isinstance(s, For) and s.kind == "vectorized" for s in walk_stmts(out.body))
    a = np.random.default_rng(0).standard_normal((2, 17)).astype(np.float32)
    got = np.asarray(tg.interpret(out, a)).reshape(2, 16)
    np.testing.assert_array_equal(got, np.where(a[:, :16] > 0, a[:, 1:], 0.0))


def test_load_that_may_leave_its_buffer_keeps_the_scalar_loop():
    # X[i, j - 1] is flat index -1 at i = j = 0: a blend would read it on every lane
    x = te.placeholder((2, 16), name="X")
    y = te.compute((2, 16), lambda i, j: te.select(x[i, j].gt(0.0), x[i, j - 1], 0.0), name="Y")
    sch = tg.Schedule(te.Workload([x], [y]))
    sch.vectorize(sch.loops(y)[1])
    loops = [s for s in walk_stmts(lower(sch.func, AVX512).body) if isinstance(s, For) and s.kind == "vectorized"]
    assert [lp.extent for lp in loops] == [16]


def test_casts_between_float_and_int_are_vector_conversions():
    from tilegraph.te.expr import Cast

    out = _vectorized(lambda x, i, j: (x[i, j] * 10.0).astype("int32").astype("float32"), n=8, target=AVX2)
    (store,) = [s for s in walk_stmts(out.body) if isinstance(s, BufferStore)]
    assert isinstance(store.value, Cast) and isinstance(store.value.value, Cast)
    a = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(tg.interpret(out, a)).reshape(2, 8), np.trunc(a * np.float32(10)))


def test_a_grouped_convolutions_input_is_broadcast_per_8_lane_vector():
    """GRP-2 as Gensor tiles it for AVX2: 8-lane vectors inside 16-channel groups. Every input load
    is one scalar broadcast (the group index folds out of the lane variable), never a gather."""
    import tilegraph as tg
    from tilegraph import workloads
    from tilegraph.codegen.c import codegen_c
    from tilegraph.lower.pipeline import lower
    from tilegraph.tune.strategy.base import TuneContext
    from tilegraph.tune.strategy.gensor import GensorStrategy

    wl = workloads.get("GRP-2")
    target = tg.Target("cpu", isa="avx2", num_cores=2)
    cand = GensorStrategy(top_k=1, measure_hardware=False).propose(TuneContext(wl, target, seed=0, db=None), 1)[0]
    code = codegen_c(lower(tg.Schedule.replay(wl, cand.trace_json).func, target)).code
    loads = code.count("b_x[")
    assert loads > 0 and code.count("tgh_splat_v8sf(b_x[") == loads
