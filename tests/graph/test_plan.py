import numpy as np

from tilegraph.graph import GraphBuilder, TensorType
from tilegraph.graph.plan import plan_memory


def test_plan_reuses_dead_storage_and_never_overlaps_live_tensors():
    b = GraphBuilder()
    x = b.input("x", TensorType((64, 64), "float32"))
    chain = [x]
    for _ in range(6):
        chain.append(b.add("relu", [chain[-1]]))
    r = b.add("reshape", [chain[-1]], {"shape": (4096,)})
    g = b.build([r])
    steps = [(n.inputs, n.outputs) for n in g.nodes if n.op != "reshape"]
    plan = plan_memory(steps, g, {r: chain[-1]})
    size = 64 * 64 * 4
    assert plan.arena_bytes == 2 * size == plan.lower_bound_bytes  # ping-pong between two buffers
    assert plan.offsets[r] == plan.offsets[chain[-1]]  # the view shares its source's storage
    for (reads, writes) in steps:
        for i in reads:
            for o in writes:
                a, c = plan.offsets[i], plan.offsets[o]
                assert a + size <= c or c + size <= a


def test_graph_outputs_and_inputs_are_kept_alive():
    b = GraphBuilder()
    x = b.input("x", TensorType((8,), "float32"))
    y = b.add("exp", [x])
    z = b.add("relu", [y])
    w = b.add("neg", [z])
    g = b.build([y, w])
    steps = [(n.inputs, n.outputs) for n in g.nodes]
    plan = plan_memory(steps, g, {})
    live = {plan.offsets[y], plan.offsets[w]}
    assert len(live) == 2 and plan.offsets[x] not in live
    assert np.all(np.array(list(plan.offsets.values())) % 64 == 0)
