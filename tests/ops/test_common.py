"""The records ops leave on their outputs, and what reference_outputs does with them."""

import pickle

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import ops, te
from tilegraph.testing import random_inputs, reference_outputs


def test_output_records_op_params_and_argument_positions():
    x, w = te.placeholder((1, 5, 5, 2), name="x"), te.placeholder((3, 3, 2, 4), name="w")
    out = ops.conv2d_nhwc(x, w, stride=(2, 2), padding=[1, 1])
    attrs = dict(out.op.attrs)
    assert attrs["ref_op"] == "conv2d_nhwc"
    assert dict(attrs["ref_params"]) == {"stride": (2, 2), "padding": (1, 1), "dilation": 1, "groups": 1,
                                         "padding_after": None, "accumulate": None, "pad_value": 0.0}
    assert dict(attrs["ref_args"]) == {"x": 0, "w": 1}
    assert dict(out.inputs[0].op.attrs) == {"stage_of": "conv2d_nhwc"}


def test_keys_do_not_depend_on_names():
    def build(prefix):
        a, b = te.placeholder((4, 3), name=prefix + "a"), te.placeholder((3, 2), name=prefix + "b")
        return tg.Workload([a, b], [ops.relu(ops.matmul(a, b, name=prefix + "mm"), name=prefix + "r")])

    assert build("p_").key == build("q_").key


def test_composed_ops_and_repeated_arguments_have_references():
    a, b = te.placeholder((4, 3), name="a"), te.placeholder((3, 2), name="b")
    out = ops.add(ops.relu(ops.matmul(a, b)), ops.mul(2.0, ops.matmul(a, b, name="mm2")))
    sq = ops.mul(out, out, name="square")
    wl = tg.Workload([a, b], [sq])
    arrays = random_inputs(wl, seed=3)
    mm = arrays[0].astype(np.float64) @ arrays[1]
    expected = (np.maximum(mm, 0) + 2 * mm) ** 2
    np.testing.assert_allclose(reference_outputs(wl, arrays)[0], expected)


def test_workload_survives_pickle_with_its_reference():
    x = te.placeholder((3, 4), name="x")
    wl = tg.Workload([x], [ops.softmax(x)])
    arrays = random_inputs(wl)
    again = pickle.loads(pickle.dumps(wl))
    assert again.key == wl.key
    np.testing.assert_allclose(reference_outputs(again, arrays)[0], reference_outputs(wl, arrays)[0])


def test_unknown_tensors_raise_lookup_error():
    x = te.placeholder((3,), name="x")
    y = te.compute((3,), lambda i: x[i] * 2.0, name="y")
    wl = tg.Workload([x], [ops.relu(y)])
    with pytest.raises(LookupError, match="tensor y"):
        reference_outputs(wl, random_inputs(wl))


def test_reference_outputs_checks_its_inputs():
    x = te.placeholder((3,), name="x")
    wl = tg.Workload([x], [ops.exp(x)])
    with pytest.raises(ValueError, match="inputs"):
        reference_outputs(wl, [])
    with pytest.raises(ValueError, match="shape"):
        reference_outputs(wl, [np.zeros(4, np.float32)])
