import pickle

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.errors import WorkloadError
from tilegraph.testing import random_inputs, reference_outputs

FAMILIES = ["C1D", "C2D", "C3D", "GMM", "GRP", "DIL", "DEP", "T2D", "CAP", "NRM", "SFM", "CBR", "TBG"]


def test_list_has_every_family_and_shape():
    ids = workloads.list()
    assert len(ids) == 52 == len(set(ids))
    assert ids[:4] == ["C1D-1", "C1D-2", "C1D-3", "C1D-4"]
    assert {i.split("-")[0] for i in ids} == set(FAMILIES)


def test_gmm_4_shapes_and_batch():
    wl = workloads.get("GMM-4")
    assert isinstance(wl, tg.Workload)
    assert wl.shapes == {"a": (1, 1024, 1024), "b": (1, 1024, 1024), "batch_matmul": (1, 1024, 1024)}
    assert workloads.get("GMM-2", batch=3).shapes == {"a": (3, 512, 512), "b": (3, 512, 32), "batch_matmul": (3, 512, 32)}
    assert wl.reference_spec == {"op": "batch_matmul", "params": {"B": 1, "N": 1024, "M": 1024, "K": 1024}}
    assert wl.suite_id == "GMM-4"


@pytest.mark.parametrize("wid,expected", [
    ("C1D-1", {"x": (1, 256, 64), "w": (3, 64, 128), "conv1d_nlc": (1, 128, 128)}),
    ("C2D-1", {"x": (1, 224, 224, 3), "w": (7, 7, 3, 64), "conv2d_nhwc": (1, 112, 112, 64)}),
    ("C3D-2", {"x": (1, 16, 56, 56, 64), "w": (1, 1, 1, 64, 64), "conv3d_ndhwc": (1, 16, 56, 56, 64)}),
    ("GRP-1", {"x": (1, 56, 56, 64), "w": (3, 3, 16, 128), "conv2d_nhwc": (1, 28, 28, 128)}),
    ("DIL-1", {"x": (1, 224, 224, 3), "w": (7, 7, 3, 64), "conv2d_nhwc": (1, 109, 109, 64)}),
    ("DEP-2", {"x": (1, 112, 112, 64), "w": (3, 3, 64, 1), "depthwise_conv2d_nhwc": (1, 56, 56, 64)}),
    ("T2D-1", {"x": (1, 4, 4, 512), "w": (4, 4, 512, 256), "conv2d_transpose_nhwc": (1, 8, 8, 256)}),
    ("CAP-1", {"x": (1, 16, 16, 4, 4, 32), "w": (3, 3, 4, 4, 32, 32), "conv2d_capsule_nhwijc": (1, 8, 8, 4, 4, 32)}),
    ("NRM-4", {"x": (1, 4096, 1024), "norm_bmn": (1,)}),
    ("SFM-4", {"x": (1, 4096, 1024), "softmax": (1, 4096, 1024)}),
    ("TBG-3", {"query": (1, 64, 12, 128), "value": (1, 64, 12, 128), "transpose_batch_matmul": (1, 12, 64, 64)}),
])
def test_suite_shapes_follow_te_workload(wid, expected):
    assert workloads.get(wid).shapes == expected


def test_cbr_inputs_and_describe():
    wl = workloads.get("CBR-2", batch=2)
    assert [t.name for t in wl.inputs] == ["x", "w", "bias", "bn_scale", "bn_offset"]
    assert wl.outputs[0].shape == (2, 28, 28, 128)
    assert workloads.describe("GRP-3") == {"op": "conv2d_nhwc", "params": {
        "N": 1, "H": 14, "W": 14, "CI": 256, "CO": 256, "k": 3, "stride": 1, "pad": 1, "dilation": 1, "groups": 4}}


def test_same_id_gives_the_same_key_and_names():
    a, b = workloads.get("C2D-3"), workloads.get("c2d-3")
    assert a.key == b.key and [t.name for t in a.tensors] == [t.name for t in b.tensors]
    assert workloads.get("C2D-3", batch=2).key != a.key


@pytest.mark.parametrize("bad", ["GMM-5", "GMM-0", "XYZ-1", "GMM", "", "GMM-1-2"])
def test_unknown_ids(bad):
    with pytest.raises(WorkloadError, match="valid ids are C1D-1"):
        workloads.get(bad)


@pytest.mark.parametrize("batch", [0, -1, 1.5, True])
def test_bad_batch(batch):
    with pytest.raises(WorkloadError, match="batch"):
        workloads.get("GMM-1", batch=batch)


def test_reduced_keeps_the_op_and_kernel_and_shrinks_extents():
    full, small = workloads.describe("C2D-1"), workloads.describe("C2D-1", reduced=True)
    assert small["op"] == full["op"]
    assert small["params"] == {"N": 1, "H": 8, "W": 8, "CI": 3, "CO": 8, "k": 7, "stride": 2, "pad": 3}
    assert workloads.get("TBG-1", batch=2, reduced=True).shapes["query"] == (2, 16, 2, 16)
    assert workloads.get("GRP-1", reduced=True).inputs[1].shape == (3, 3, 2, 8)


@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize("wid", workloads.list())
def test_every_reduced_suite_entry_interprets_to_its_reference(wid, batch):
    wl = workloads.get(wid, batch=batch, reduced=True)
    arrays = random_inputs(wl, seed=1)
    expected = reference_outputs(wl, arrays)[0]
    got = tg.interpret(wl, *arrays)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("spec,shapes", [
    ("matmul:512,256,384", {"a": (512, 256), "b": (256, 384), "matmul": (512, 384)}),
    ("dense:4,8,16", {"x": (4, 8), "w": (16, 8), "dense": (4, 16)}),
    ("conv2d_nhwc:1,56,56,64,64,3,1,1", {"x": (1, 56, 56, 64), "w": (3, 3, 64, 64), "conv2d_nhwc": (1, 56, 56, 64)}),
    ("conv2d_nhwc:1,8,8,8,8,3,1,2,2,4", {"x": (1, 8, 8, 8), "w": (3, 3, 2, 8), "conv2d_nhwc": (1, 8, 8, 8)}),
    ("batch_matmul:2,3,4,5", {"a": (2, 3, 5), "b": (2, 5, 4), "batch_matmul": (2, 3, 4)}),
    ("softmax:7,9", {"x": (7, 9), "softmax": (7, 9)}),
    ("layer_norm:7,9", {"x": (7, 9), "gamma": (9,), "beta": (9,), "layer_norm": (7, 9)}),
    ("depthwise_conv2d_nhwc:1,9,9,4,3,2,1", {"x": (1, 9, 9, 4), "w": (3, 3, 4, 1), "depthwise_conv2d_nhwc": (1, 5, 5, 4)}),
    ("conv2d_nchw:1,3,9,9,8,3,1,1", {"x": (1, 3, 9, 9), "w": (8, 3, 3, 3), "conv2d_nchw": (1, 8, 9, 9)}),
    ("relu:2,3,4", {"x": (2, 3, 4), "relu": (2, 3, 4)}),
    ("add:5", {"a": (5,), "b": (5,), "add": (5,)}),
    ("max_pool2d:1,9,9,4,3,2,1", {"x": (1, 9, 9, 4), "max_pool2d": (1, 5, 5, 4)}),
    ("avg_pool2d:1,9,9,4,3,2,1", {"x": (1, 9, 9, 4), "avg_pool2d": (1, 5, 5, 4)}),
    ("sum:3,4", {"x": (3, 4), "sum": (3,)}),
    (" GMM-1 ", {"a": (1, 128, 128), "b": (1, 128, 128), "batch_matmul": (1, 128, 128)}),
])
def test_from_spec(spec, shapes):
    assert workloads.from_spec(spec).shapes == shapes


@pytest.mark.parametrize("spec", ["matmul:5,7,3", "conv2d_bn_relu:1,7,7,3,4,3,2,1", "batch_norm:2,3,4,5",
                                  "global_avg_pool2d:2,3,3,4", "transpose:2,3,4", "mean:3,5", "gelu:7",
                                  "conv2d_transpose_nhwc:1,3,3,4,2,4,2,1", "div:3,4"])
def test_from_spec_workloads_interpret_to_reference(spec):
    wl = workloads.from_spec(spec)
    arrays = random_inputs(wl)
    np.testing.assert_allclose(tg.interpret(wl, *arrays), reference_outputs(wl, arrays)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("spec,message", [
    ("matmul", "expected 'op:ints'"),
    ("matmull:1,2,3", "unknown op 'matmull'"),
    ("matmul:1,x,3", "must list integers"),
    ("matmul:1,2", "needs 3 to 3 integers"),
    ("conv2d_nhwc:1,2,3", "needs 8 to 10 integers"),
    ("matmul:1,-2,3", "negative"),
    ("matmul:0,2,3", "not a valid matmul"),
    ("conv2d_nhwc:1,8,8,6,8,3,1,1,1,4", "not a valid conv2d_nhwc"),
    ("relu:", "must list integers"),
])
def test_from_spec_errors_are_one_line(spec, message):
    with pytest.raises(WorkloadError, match=message) as info:
        workloads.from_spec(spec)
    assert "\n" not in str(info.value)


def test_suite_workloads_pickle_with_their_spec():
    wl = workloads.get("CBR-1", reduced=True)
    again = pickle.loads(pickle.dumps(wl))
    assert again.key == wl.key and again.reference_spec == wl.reference_spec
    arrays = random_inputs(again)
    np.testing.assert_allclose(reference_outputs(again, arrays)[0], reference_outputs(wl, arrays)[0])


def test_workload_reference_callable():
    wl = workloads.from_spec("matmul:3,4,5")
    a, b = random_inputs(wl)
    (out,) = workloads.workload_reference(wl)(a, b)
    np.testing.assert_allclose(out, a.astype(np.float64) @ b)


@pytest.mark.needs_cc
@pytest.mark.parametrize("spec", ["C2D-1", "T2D-1", "SFM-1", "avg_pool2d:1,9,9,4,3,2,1", "max_pool2d:1,9,9,4,3,2,1"])
def test_built_kernels_match_the_reference(spec):
    wl = workloads.get(spec, reduced=True) if "-" in spec else workloads.from_spec(spec)
    arrays = random_inputs(wl, seed=2)
    got = tg.build(wl)(*arrays)
    np.testing.assert_allclose(got, reference_outputs(wl, arrays)[0], rtol=1e-4, atol=1e-4)
