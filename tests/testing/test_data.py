import numpy as np

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.testing import random_inputs


def test_random_inputs_are_deterministic_float32_and_positive_where_needed():
    x = te.placeholder((2, 3), name="x")
    stats = [te.placeholder((3,), name=n) for n in ("mean", "var", "gamma", "beta")]
    d = te.placeholder((2, 3), name="d")
    wl = tg.Workload([x, *stats, d], [ops.batch_norm(x, *stats, axis=1), ops.div(x, d)])
    first, second = random_inputs(wl, seed=7), random_inputs(wl, seed=7)
    for a, b, t in zip(first, second, wl.inputs):
        assert a.dtype == np.float32 and a.flags.c_contiguous and a.shape == t.shape
        np.testing.assert_array_equal(a, b)
    assert (first[2] >= 0.5).all() and (first[5] >= 0.5).all()  # var and the divisor
    assert (first[0] < 0).any()
    assert not np.array_equal(random_inputs(wl, seed=8)[0], first[0])


def test_integer_inputs_are_small_integers():
    x = te.placeholder((50,), "int32", name="x")
    wl = tg.Workload([x], [ops.add(x, x)])
    (a,) = random_inputs(wl)
    assert a.dtype == np.int32 and a.min() >= -4 and a.max() <= 4
