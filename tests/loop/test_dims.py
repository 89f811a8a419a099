"""Run-time dims through the loop IR: the interpreter's meaning, at extents 1, odd ones and a range's
upper bound, with every element past the extents poisoned (NaN, or garbage indices) to show it is
never read where it would change a result. The C kernels are checked against the same cases in
tests/runtime/test_dims_kernels.py."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import te
from tilegraph.loop.from_te import workload_to_func
from tilegraph.te.dims import dim, dims_array

UPPER = 24


def matmul_m_k():
    """C[m, 5] = A[m, k] @ B[k, 5], m and k both run-time."""
    m, k = dim("m", UPPER), dim("k", 12)
    a = te.placeholder((m, k), name="A")
    b = te.placeholder((k, 5), name="B")
    r = te.reduce_axis(k, "r")
    c = te.compute((m, 5), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return te.Workload([a, b], [c])


def attention():
    """softmax(Q K^T) V over n keys and n queries, n run-time: reductions over a run-time axis."""
    n = dim("n", UPPER)
    q, k, v = (te.placeholder((n, 8), name=x) for x in "QKV")
    d = te.reduce_axis(8, "d")
    s = te.compute((n, n), lambda i, j: te.sum(q[i, d] * k[j, d], axis=d), name="S")
    j1 = te.reduce_axis(n, "j1")
    mx = te.compute((n,), lambda i: te.max(s[i, j1], axis=j1), name="M")
    e = te.compute((n, n), lambda i, j: te.exp(s[i, j] - mx[i]), name="E")
    j2 = te.reduce_axis(n, "j2")
    z = te.compute((n,), lambda i: te.sum(e[i, j2], axis=j2), name="Z")
    p = te.compute((n, n), lambda i, j: e[i, j] / z[i], name="P")
    j3 = te.reduce_axis(n, "j3")
    o = te.compute((n, 8), lambda i, c: te.sum(p[i, j3] * v[j3, c], axis=j3), name="O")
    return te.Workload([q, k, v], [o])


def gather_and_flip():
    """Y[i, j] = T[ids[i], j] + X[n - 1 - i, j]: an index from data and one from a dim, so
    instances past n keep their guard (ids past n hold garbage)."""
    n = dim("n", UPPER)
    table = te.placeholder((10, 6), name="T")
    ids = te.placeholder((n,), "int32", name="ids")
    x = te.placeholder((n, 6), name="X")
    y = te.compute((n, 6), lambda i, j: table[ids[i], j] + x[n - 1 - i, j], name="Y")
    return te.Workload([table, ids, x], [y])


def _poisoned(shape, valid, rng):
    """Random float32 values inside `valid` (extent per dimension), NaN past it."""
    out = np.full(shape, np.nan, np.float32)
    out[tuple(slice(0, v) for v in valid)] = rng.standard_normal(valid)
    return out


def cases(name, values):
    """(inputs including the dims array, float64 reference of the valid region, its extents)."""
    rng = np.random.default_rng(sum(values.values()))
    if name == "matmul":
        m, k = values["m"], values["k"]
        a, b = _poisoned((UPPER, 12), (m, k), rng), _poisoned((12, 5), (k, 5), rng)
        ref = a[:m, :k].astype(np.float64) @ b[:k].astype(np.float64)
        return (a, b), ref, (m, 5)
    if name == "attention":
        n = values["n"]
        q, k, v = (_poisoned((UPPER, 8), (n, 8), rng) for _ in range(3))
        s = q[:n].astype(np.float64) @ k[:n].astype(np.float64).T
        e = np.exp(s - s.max(1, keepdims=True))
        return (q, k, v), (e / e.sum(1, keepdims=True)) @ v[:n], (n, 8)
    n = values["n"]
    table = rng.standard_normal((10, 6)).astype(np.float32)
    ids = np.full(UPPER, 10**6, np.int32)  # garbage past n: read there, it would index far outside T
    ids[:n] = rng.integers(0, 10, n)
    x = _poisoned((UPPER, 6), (n, 6), rng)
    return (table, ids, x), table[ids[:n]].astype(np.float64) + x[:n][::-1], (n, 6)


WORKLOADS = {"matmul": matmul_m_k, "attention": attention, "gather": gather_and_flip}
EXTENTS = {"matmul": [{"m": 1, "k": 1}, {"m": 7, "k": 3}, {"m": 13, "k": 12}, {"m": UPPER, "k": 12}],
           "attention": [{"n": 1}, {"n": 2}, {"n": 11}, {"n": UPPER}],
           "gather": [{"n": 1}, {"n": 9}, {"n": UPPER}]}
PARAMS = [(name, values) for name in WORKLOADS for values in EXTENTS[name]]


@pytest.mark.parametrize("name, values", PARAMS, ids=[f"{n}-{v}" for n, v in PARAMS])
def test_the_interpreter_computes_the_valid_region_and_reads_nothing_past_it(name, values):
    wl = WORKLOADS[name]()
    inputs, ref, valid = cases(name, values)
    out = tg.interpret(wl, *inputs, dims_array(wl.dims, values))
    region = out[tuple(slice(0, v) for v in valid)]
    assert np.isfinite(region).all()
    np.testing.assert_allclose(region, ref, rtol=1e-5, atol=1e-5)


def _lowered_guards(wl):
    """Block predicates after the two lowering passes of run-time dims, and the conditions
    skip_past_dims put around loop bodies (the default schedule)."""
    from tilegraph.loop.ir import Block, For, IfThenElse
    from tilegraph.loop.visit import walk_stmts
    from tilegraph.lower.passes import relax_dims_guards, skip_past_dims
    from tilegraph.te.printer import expr_str

    func = relax_dims_guards.run(skip_past_dims.run(workload_to_func(wl), None), None)
    blocks = {s.name: expr_str(s.predicate) for s in walk_stmts(func.body) if isinstance(s, Block)}
    lifted = [expr_str(s.body.cond) for s in walk_stmts(func.body)
              if isinstance(s, For) and isinstance(s.body, IfThenElse)]
    return blocks, lifted


def test_every_instance_is_guarded_before_lowering():
    from tilegraph.loop.ir import Block
    from tilegraph.loop.visit import walk_stmts
    from tilegraph.te.printer import expr_str

    preds = {s.name: expr_str(s.predicate) for s in walk_stmts(workload_to_func(matmul_m_k()).body)
             if isinstance(s, Block)}
    assert "i <" in preds["C"] and "r <" in preds["C"]  # the interpreter runs exactly [0, m) x [0, k)


def test_lowering_keeps_the_guards_a_kernel_needs_and_skips_whole_iterations():
    blocks, lifted = _lowered_guards(matmul_m_k())
    assert "r <" in blocks["C"] and "i <" not in blocks["C"]  # the sum's bound stays; rows past m are unspecified
    assert any(c.startswith("(i <") for c in lifted) and any(c.startswith("(r <") for c in lifted)
    blocks, _ = _lowered_guards(attention())
    assert blocks["S"] == "True" and blocks["E"] == "True" and "j1 <" in blocks["M"] and "i <" not in blocks["M"]
    blocks, _ = _lowered_guards(gather_and_flip())
    assert "i <" in blocks["Y"]  # a data index and a dim index keep the row guard


def test_dims_out_of_range_are_clamped_inside_the_kernel():
    wl = gather_and_flip()
    inputs, _, _ = cases("gather", {"n": UPPER})
    for raw in (0, -5, 10**6):
        out = tg.interpret(wl, *inputs, np.array([raw], np.int32))  # no IndexError: n is clamped
        assert out.shape == (UPPER, 6)
