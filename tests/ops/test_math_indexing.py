"""The graph level's extra ops: interpreted and compiled (gcc) against their numpy references,
with bool and int64 tensors, negative indices, strides and crops."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.testing.reference import reference_outputs


def _compare(inputs, out, arrays, compiled):
    wl = tg.Workload(inputs, [out])
    expected = reference_outputs(wl, arrays)[0]
    got = tg.build(wl)(*arrays) if compiled else tg.interpret(wl, *arrays)
    assert got.shape == expected.shape and got.dtype == np.dtype(out.dtype.name)
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=2e-6, atol=1e-6)


RNG = np.random.default_rng(5)
X = RNG.standard_normal((3, 5)).astype(np.float32)
POS = (np.abs(X) + 0.1).astype(np.float32)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.needs_cc)])
@pytest.mark.parametrize("op,array,kwargs", [
    ("sqrt", POS, {}), ("erf", X, {}), ("log", POS, {}), ("neg", X, {}), ("abs", X, {}), ("reciprocal", POS, {}),
    ("gelu_tanh", X, {}), ("hard_sigmoid", X * 4, {"alpha": 0.3, "beta": 0.4}), ("hard_swish", X * 4, {}),
    ("clip", X, {"lo": -0.5, "hi": 0.5}), ("clip", X, {"lo": 0.0}), ("cast", X * 3, {"dtype": "int64"}),
])
def test_unary(op, array, kwargs, compiled):
    x = te.placeholder(array.shape, str(array.dtype), name="x")
    _compare([x], getattr(ops, op)(x, **kwargs), [array], compiled)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.needs_cc)])
def test_predicates_and_where(compiled):
    a = te.placeholder((3, 5), name="a")
    b = te.placeholder((5,), name="b")
    cond = te.placeholder((3, 1), "bool", name="cond")
    nan = X.copy()
    nan[1, 2] = np.nan
    _compare([a], ops.isnan(a), [nan], compiled)
    _compare([a, b], ops.equal(a, b), [X, X[0]], compiled)
    _compare([a, b], ops.less(a, b), [X, X[1]], compiled)
    _compare([a, b], ops.power(a, b), [POS, X[2]], compiled)
    _compare([a, b], ops.less_equal(a, b), [X, X[1]], compiled)
    _compare([a, b], ops.greater_equal(a, b), [X, X[1]], compiled)
    m = te.placeholder((3, 5), "bool", name="m")
    masks = [RNG.random((3, 5)) < 0.5, np.array([[True], [False], [True]])]
    _compare([m, cond], ops.logical_and(m, cond), masks, compiled)
    _compare([m, cond], ops.logical_or(m, cond), masks, compiled)
    _compare([cond, a, b], ops.where(cond, a, b), [np.array([[True], [False], [True]]), X, X[0]], compiled)
    _compare([cond], ops.cast(ops.logical_not(cond), "float32"), [np.array([[True], [False], [True]])], compiled)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.needs_cc)])
def test_data_movement(compiled):
    x = te.placeholder((4, 6), name="x")
    y = te.placeholder((4, 1), name="y")
    data = RNG.standard_normal((4, 6)).astype(np.float32)
    _compare([x, y], ops.concat([x, y, x], axis=1), [data, data[:, :1].copy()], compiled)
    _compare([x], ops.strided_slice(x, (1, 5), (4, -7), (2, -2)), [data], compiled)
    _compare([y], ops.broadcast_to(y, (2, 4, 3)), [data[:, :1].copy()], compiled)
    _compare([x], ops.pad_constant(x, (1, -2), (0, 3), 7.0), [data], compiled)
    table = te.placeholder((10, 3), name="table")
    ids = te.placeholder((2, 2), "int64", name="ids")
    _compare([table, ids], ops.take(table, ids, axis=0), [RNG.standard_normal((10, 3)).astype(np.float32),
                                                         np.array([[0, 9], [-1, 4]])], compiled)
    idx = te.placeholder((4, 2), "int64", name="idx")
    _compare([x, idx], ops.gather_elements(x, idx, axis=1), [data, np.array([[0, 5], [1, -1], [2, 2], [3, 0]])], compiled)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.needs_cc)])
def test_out_of_range_indices_clamp_instead_of_reading_outside(compiled):
    table = te.placeholder((10, 3), name="table")
    data = RNG.standard_normal((10, 3)).astype(np.float32)
    for dtype in ("int64", "int32"):
        ids = te.placeholder((5,), dtype, name="ids")
        wl = tg.Workload([table, ids], [ops.take(table, ids, axis=0)])
        bad = np.array([10, 30000, -11, -2**31 if dtype == "int32" else -2**40, 3], dtype=dtype)
        got = tg.build(wl)(data, bad) if compiled else tg.interpret(wl, data, bad)
        np.testing.assert_array_equal(got, data[[9, 9, 0, 0, 3]])


def test_bad_arguments_are_named():
    x = te.placeholder((2, 3), name="x")
    with pytest.raises(TypeError, match="indices must be int32 or int64"):
        ops.take(x, x)
    with pytest.raises(ValueError, match="strides may not hold 0"):
        ops.strided_slice(x, (0, 0), (2, 3), (1, 0))
    with pytest.raises(ValueError, match="does not broadcast"):
        ops.broadcast_to(x, (3, 3))
    with pytest.raises(TypeError, match="cond must be bool"):
        ops.where(x, x, x)


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.needs_cc)])
@pytest.mark.parametrize("shapes", [((2, 3, 5, 4), (4, 6)), ((3, 5, 4), (3, 4, 2)), ((1, 5, 4), (2, 3, 4, 2)), ((5, 4), (4, 3))])
def test_matmul_nd_broadcasts_batches(shapes, compiled):
    a, b = te.placeholder(shapes[0], name="a"), te.placeholder(shapes[1], name="b")
    arrays = [RNG.standard_normal(s).astype(np.float32) for s in shapes]
    _compare([a, b], ops.matmul_nd(a, b), arrays, compiled)
