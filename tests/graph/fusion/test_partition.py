"""partition: which nodes join an anchor's kernel (the rules of graph/fusion/partition.py)."""

import numpy as np
import pytest

from tilegraph.graph import GraphBuilder, TensorType
from tilegraph.graph.fusion.partition import partition
from tilegraph.graph.ops.registry import op_def

RNG = np.random.default_rng(5)


def _const(b, *shape):
    return b.constant(RNG.standard_normal(shape).astype(np.float32))


def _groups(graph):
    groups = partition(graph)
    check_partition(graph, groups)
    return {g.anchor or g.nodes[-1]: g for g in groups}


def check_partition(graph, groups):
    """Every non-view node in exactly one group; each group reads only tensors produced earlier."""
    seen = [n for g in groups for n in g.nodes]
    assert len(seen) == len(set(seen))
    views = {n.name for n in graph.nodes if op_def(n.op).view}
    assert {n.name for n in graph.nodes} - views <= set(seen)
    producers, consumers = graph.producers(), graph.consumers()
    ready = set(graph.inputs) | set(graph.constants)
    view_of = {n.outputs[0]: n.inputs[0] for n in graph.nodes if n.name in views - set(seen)}
    for g in groups:
        for t in g.inputs:
            root = t
            while root in view_of:
                root = view_of[root]
            assert root in ready, f"{g.nodes} reads {t} before it is produced"
        ready.add(g.output)
        for t in list(view_of):
            if view_of[t] in ready:
                ready.add(t)
        inside = set(g.nodes)
        internal = [t for t, node in producers.items() if node.name in inside and t != g.output]
        for t in internal:  # read only inside the group
            assert all(c.name in inside for c in consumers.get(t, ())) and t not in graph.outputs


def test_conv_residual_add_relu_is_one_kernel():
    b = GraphBuilder()
    x = b.input("x", TensorType((1, 6, 6, 4), "float32"))
    c1 = b.add("conv2d", [x, _const(b, 3, 3, 4, 4), _const(b, 4)], {"pads": (1, 1, 1, 1), "layout": "NHWC"}, name="c1")
    r1 = b.add("relu", [c1], name="r1")
    c2 = b.add("conv2d", [r1, _const(b, 3, 3, 4, 4)], {"pads": (1, 1, 1, 1), "layout": "NHWC"}, name="c2")
    s = b.add("add", [c2, x], name="s")
    y = b.add("relu", [s], name="y")
    groups = _groups(b.build([y]))
    assert groups["c1"].nodes == ("c1", "r1")
    assert groups["c2"].nodes == ("c2", "s", "y") and groups["c2"].output == y and groups["c2"].epilogue_path == ()


def test_an_epilogue_operand_is_dequantized_inside_the_kernel():
    """A residual read as uint8 and dequantized (a QDQ model's block input) joins the consuming
    kernel: it reads bytes, not the float32 tensor a kernel of its own would write. A broadcast
    operand's producers (read many times per element) stay out."""
    b = GraphBuilder()
    x = b.input("x", TensorType((6, 8), "float32"))
    r8 = b.input("r8", TensorType((6, 8), "uint8"))
    h = b.add("matmul", [x, _const(b, 8, 8)], name="m")
    wide = b.add("cast", [r8], {"to": "float32"}, name="wide")
    centred = b.add("sub", [wide, b.constant(np.array(128, np.float32))], name="centred")
    real = b.add("mul", [centred, b.constant(np.array(0.05, np.float32))], name="real")
    bias = b.add("exp", [_const(b, 8)], name="bias")
    s = b.add("add", [h, real], name="residual")
    y = b.add("add", [s, bias], name="biased")
    groups = _groups(b.build([y]))
    assert groups["m"].nodes == ("m", "wide", "centred", "real", "residual", "biased")
    assert r8 in groups["m"].inputs and "real" not in groups["m"].inputs
    assert groups["bias"].nodes == ("bias",)


def test_epilogue_stops_where_a_value_is_needed_outside():
    b = GraphBuilder()
    x = b.input("x", TensorType((5, 8), "float32"))
    h = b.add("matmul", [x, _const(b, 8, 8)], name="m1")
    biased = b.add("add", [h, _const(b, 8)], name="bias")
    y1 = b.add("matmul", [biased, _const(b, 8, 3)], name="m2")
    y2 = b.add("matmul", [biased, _const(b, 8, 3)], name="m3")
    groups = _groups(b.build([y1, y2]))
    assert groups["m1"].nodes == ("m1", "bias") and groups["m1"].output == biased


def test_an_anchor_output_read_twice_outside_takes_no_epilogue():
    b = GraphBuilder()
    x = b.input("x", TensorType((5, 8), "float32"))
    h = b.add("matmul", [x, _const(b, 8, 8)], name="m1")
    r = b.add("relu", [h], name="r")
    y = b.add("matmul", [h, _const(b, 8, 8)], name="m2")
    out = b.add("add", [r, y], name="out")
    groups = _groups(b.build([out]))
    assert groups["m1"].nodes == ("m1",)
    # relu reads m1 (outside m2's group) and feeds m2's epilogue: it joins as its own kernel
    assert "out" in groups["m2"].nodes


def test_no_cycle_through_another_kernel():
    b = GraphBuilder()
    x = b.input("x", TensorType((4, 8), "float32"))
    a = b.add("matmul", [x, _const(b, 8, 8)], name="m1")
    m2 = b.add("matmul", [a, _const(b, 8, 8)], name="m2")
    s = b.add("add", [a, m2], name="s")  # reads m1's output and m2's, which depends on m1
    groups = _groups(b.build([s]))
    assert groups["m1"].nodes == ("m1",)
    assert groups["m2"].nodes == ("m2", "s")


def test_layout_epilogue_records_its_index_path_and_leaves_a_trailing_view():
    b = GraphBuilder()
    x = b.input("x", TensorType((6, 8), "float32"))
    h = b.add("matmul", [x, _const(b, 8, 8)], name="m")
    v = b.add("reshape", [h], {"shape": (6, 2, 4)}, name="view")
    t = b.add("transpose", [v], {"perm": (1, 0, 2)}, name="t")
    s = b.add("mul", [t, b.constant(np.array(0.5, np.float32))], name="scale")
    flat = b.add("reshape", [s], {"shape": (12, 4)}, name="flat")
    y = b.add("matmul", [flat, _const(b, 4, 3)], name="m2")
    groups = _groups(b.build([y]))
    assert groups["m"].nodes == ("m", "view", "t", "scale") and groups["m"].epilogue_path == ("view", "t")
    assert groups["m2"].nodes == ("flat", "m2")  # the view of the output is the next anchor's prologue


def test_prologue_rules():
    b = GraphBuilder()
    x = b.input("x", TensorType((8, 5), "float32"))
    t = b.add("transpose", [x], {"perm": (1, 0)}, name="t")
    e = b.add("exp", [t], name="e")
    y1 = b.add("matmul", [e, _const(b, 8, 3)], name="m1")  # exp stays out of a contraction
    shared = b.add("transpose", [x], {"perm": (1, 0)}, name="shared")
    y2 = b.add("matmul", [shared, _const(b, 8, 3)], name="m2")
    y3 = b.add("relu", [shared], name="r")  # shared has a consumer outside m2's group
    groups = _groups(b.build([y1, y2, y3]))
    assert groups["m1"].nodes == ("m1",)
    assert groups["e"].nodes == ("t", "e")  # the leftover chain: one elementwise kernel
    assert groups["m2"].nodes == ("m2",)


def test_a_reduction_anchor_takes_transcendental_prologues():
    b = GraphBuilder()
    x = b.input("x", TensorType((4, 8), "float32"))
    e = b.add("tanh", [x], name="e")
    s = b.add("add", [e, _const(b, 8)], name="a")
    y = b.add("layer_norm", [s, _const(b, 8), _const(b, 8)], {"axis": -1, "epsilon": 1e-5}, name="ln")
    groups = _groups(b.build([y]))
    assert groups["ln"].nodes == ("e", "a", "ln")


def test_prologues_are_bounded_in_nodes_and_in_inlined_reads():
    """A contraction takes at most MAX_CONTRACTION_PROLOGUE producers (it recomputes them at every
    read; Mamba's unrolled scan made a 31-node prologue that took minutes to lower), and no group
    inlines a tensor that is read doubling per level past MAX_INLINED_READS."""
    from tilegraph.graph.fusion.partition import MAX_CONTRACTION_PROLOGUE, MAX_INLINED_READS

    b = GraphBuilder()
    x = b.input("x", TensorType((4, 8), "float32"))
    chain = x
    for i in range(20):
        chain = b.add("add", [chain, _const(b, 8)], name=f"a{i}")
    y = b.add("matmul", [chain, _const(b, 8, 3)], name="m")
    groups = _groups(b.build([y]))
    assert len(groups["m"].nodes) == MAX_CONTRACTION_PROLOGUE + 1
    b = GraphBuilder()
    x = b.input("x", TensorType((4, 8), "float32"))
    doubled = x
    for i in range(12):  # each level reads the one below twice: 2**12 reads if all were inlined
        doubled = b.add("mul", [doubled, doubled], name=f"d{i}")
    y = b.add("softmax", [doubled], {"axis": -1}, name="s")
    group = _groups(b.build([y]))["s"]
    reads, level = 0, 1
    for name in reversed(group.nodes[:-1]):
        reads, level = reads + level, level * 2
        assert name.startswith("d")
    assert reads <= MAX_INLINED_READS and len(group.nodes) > 2


def test_fuse_false_is_one_kernel_per_node():
    b = GraphBuilder()
    x = b.input("x", TensorType((5, 8), "float32"))
    h = b.add("matmul", [x, _const(b, 8, 8)], name="m")
    v = b.add("reshape", [h], {"shape": (40,)}, name="v")
    y = b.add("relu", [v], name="r")
    groups = partition(b.build([y]), fuse=False)
    assert [g.nodes for g in groups] == [("m",), ("r",)]


@pytest.mark.parametrize("name", ["resnet50", "bert"])
def test_reference_models_partition_validly(exported, name):
    from tilegraph.graph.frontends.onnx import from_onnx
    from tilegraph.graph.passes import optimize

    graph, _ = optimize(from_onnx(exported(name)))
    groups = partition(graph)
    check_partition(graph, groups)
    anchors = [n for n in graph.nodes if n.op in ("conv2d", "matmul", "softmax", "layer_norm")]
    assert all(any(g.anchor == a.name for g in groups) for a in anchors)
    if name == "resnet50":  # every ReLU and residual add rides in a conv's kernel
        assert all(any(n.name in g.nodes and g.anchor for g in groups) for n in graph.nodes if n.op in ("relu", "add"))
