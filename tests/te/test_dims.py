"""Run-time dims in te: ranges, storage shapes, the workload's dims input and key, refusals."""

import pytest

from tilegraph import ops, te
from tilegraph.errors import WorkloadError
from tilegraph.te.dims import DIMS_INPUT, check_values, dim, dims_array, upper_bound, value_of


def test_a_dim_is_an_int32_variable_with_a_range():
    n = dim("seq", 128, lower=4)
    assert (n.name, n.lower, n.upper, str(n.dtype)) == ("seq", 4, 128, "int32")
    assert dim("seq", 128, lower=4) == n
    assert dim("seq", 64) != n


@pytest.mark.parametrize("args, error", [(("2x", 8), ValueError), (("n", 0), ValueError), (("n", 4, 5), ValueError),
                                         (("n", 2**31), ValueError), (("n", 2.5), TypeError)])
def test_bad_ranges_are_refused(args, error):
    with pytest.raises(error):
        dim(*args)


def test_extents_of_dims_are_stored_at_their_upper_bounds():
    n, p = dim("n", 16), dim("past", 8)
    x = te.placeholder((n + p, 3), name="x")
    assert x.shape == (24, 3)
    assert x.bounds[1] is None and str(x.bounds[0]) == str(n + p)
    y = te.compute((n * 2, 3), lambda i, j: x[i % 5, j], name="y")
    assert y.shape == (32, 3) and y.op.axes[0].bound is not None and y.op.axes[1].bound is None
    assert upper_bound(n * 2 + 1) == 33 and value_of(n * 2 + p, {"n": 5, "past": 3}) == 13
    k = te.reduce_axis(n, "k")
    assert (k.extent, k.bound) == (16, n)


@pytest.mark.parametrize("extent", ["n - 1", "n // 2", "n * -1"])
def test_extents_that_do_not_grow_with_their_dims_are_refused(extent):
    n = dim("n", 16)  # noqa: F841 (named in the expressions)
    with pytest.raises(ValueError, match="run-time extent"):
        te.placeholder((eval(extent),), name="x")


def test_a_workload_with_dims_gets_their_input_last():
    m, k_dim = dim("m", 8), dim("k", 4)
    a = te.placeholder((m, k_dim), name="a")
    b = te.placeholder((k_dim, 5), name="b")
    r = te.reduce_axis(k_dim, "r")
    c = te.compute((m, 5), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="c")
    wl = te.Workload([a, b], [c])
    assert [d.name for d in wl.dims] == ["k", "m"]  # sorted by name: the order of the dims array
    assert [t.name for t in wl.inputs] == ["a", "b", DIMS_INPUT]
    assert wl.dims_input.shape == (2,) and str(wl.dims_input.dtype) == "int32"
    assert te.Workload(wl.inputs, wl.outputs).key == wl.key  # given back its own inputs, not added twice
    assert list(dims_array(wl.dims, {"m": 3, "k": 2})) == [2, 3]
    assert list(dims_array(wl.dims)) == [4, 8]


def _scale(extent, name="x", dim_name="n"):
    ext = dim(dim_name, extent) if isinstance(extent, int) else extent
    x = te.placeholder((ext,), name=name)
    return te.Workload([x], [te.compute((ext,), lambda i: x[i] * 2, name="y")])


def test_the_key_counts_dims_not_their_names():
    assert _scale(16).key == _scale(16, name="z", dim_name="seq").key
    assert _scale(16).key != _scale(32).key
    static = te.placeholder((16,), name="x")
    assert _scale(16).key != te.Workload([static], [te.compute((16,), lambda i: static[i] * 2, name="y")]).key


def test_one_name_with_two_ranges_is_refused():
    x = te.placeholder((dim("n", 8),), name="x")
    y = te.compute((dim("n", 16),), lambda i: x[i % 8], name="y")
    with pytest.raises(WorkloadError, match="declared twice"):
        te.Workload([x], [y])


def test_the_dims_input_name_is_reserved():
    x = te.placeholder((dim("n", 8),), name=DIMS_INPUT)
    with pytest.raises(WorkloadError):
        te.Workload([x], [te.compute((dim("n", 8),), lambda i: x[i], name="y")])


@pytest.mark.parametrize("values, match", [({"n": 0}, "outside"), ({"n": 9}, "outside"), ({}, "no value"),
                                           ({"n": 2, "m": 1}, "unknown")])
def test_dim_values_are_checked(values, match):
    with pytest.raises(ValueError, match=match):
        check_values((dim("n", 8),), values)


def test_ops_not_taught_dims_refuse_them_rather_than_reduce_past_them():
    with pytest.raises(ValueError, match="op max_pool2d"):
        ops.max_pool2d(te.placeholder((1, 3, dim("h", 8), 8), name="img"), 2)
    with pytest.raises(ValueError, match="op conv2d_nchw"):
        ops.conv2d_nchw(te.placeholder((1, 3, dim("h", 8), 8), name="img"), te.placeholder((4, 3, 3, 3), name="w"))


def test_a_range_is_cut_into_buckets():
    from tilegraph.te.dims import buckets

    assert buckets(dim("s", 512)) == ((1, 16), (17, 32), (33, 64), (65, 128), (129, 256), (257, 512))
    assert buckets(dim("s", 512), [1, 64]) == ((1, 1), (2, 64), (65, 512))
    assert buckets(dim("s", 10, lower=3)) == ((3, 10),)
    assert buckets(dim("s", 100, lower=20)) == ((20, 32), (33, 64), (65, 100))
    for bad in ([64, 1], [0], [600], [8, 8]):
        with pytest.raises(ValueError, match="ascend strictly"):
            buckets(dim("s", 512), bad)
