"""Korch-style orchestration: candidate kernels (each checked against the float64 reference of
the tensor it writes), the binary linear program on chosen costs (feasible, never above greedy,
identical blocks solved once), and compile_model(orchestration="blp") end to end."""

import numpy as np
import pytest

from tilegraph.errors import GraphError
from tilegraph.graph import GraphBuilder, TensorType, run_reference
from tilegraph.graph.compile import compile_model
from tilegraph.graph.fusion.candidates import candidates
from tilegraph.graph.fusion.compose import group_spec
from tilegraph.graph.fusion.orchestrate import orchestrate, view_roots
from tilegraph.graph.fusion.partition import partition
from tilegraph.graph.ops.registry import op_def
from tilegraph.target import Target

RNG = np.random.default_rng(5)


def _const(b, *shape):
    return b.constant((RNG.standard_normal(shape) * 0.5).astype(np.float32))


def _attention_like():
    """matmul + bias + reshape + transpose + scale feeding a second matmul, and a gelu chain."""
    b = GraphBuilder()
    x = b.input("x", TensorType((7, 12), "float32"))
    h = b.add("add", [b.add("matmul", [x, _const(b, 12, 12)]), _const(b, 12)])
    t = b.add("transpose", [b.add("reshape", [h], {"shape": (7, 3, 4)})], {"perm": (1, 0, 2)})
    s = b.add("mul", [t, b.constant(np.array(0.5, np.float32))])
    y = b.add("matmul", [s, _const(b, 4, 5)])
    z = b.add("gelu", [b.add("relu", [y])])
    return b.build([z]), {"x": RNG.standard_normal((7, 12)).astype(np.float32)}


def _blocks(n):
    """n identical residual blocks: relu(x @ w + b) + x."""
    b = GraphBuilder()
    x = b.input("x", TensorType((5, 8), "float32"))
    for _ in range(n):
        h = b.add("relu", [b.add("add", [b.add("matmul", [x, _const(b, 8, 8)]), _const(b, 8)])])
        x = b.add("add", [h, x])
    return b.build([x]), {"x": RNG.standard_normal((5, 8)).astype(np.float32)}


def _feasible(graph, chosen):
    """Every tensor a chosen kernel reads is written by an earlier one (or free); outputs written."""
    roots = view_roots(graph)
    free = set(graph.inputs) | set(graph.constants)
    written = set()
    for c in chosen:
        for t in c.needs:
            assert roots[t] in free or roots[t] in written, (c.group.nodes, t)
        written.update(roots[t] for t in c.produces)
    assert all(roots[t] in written or roots[t] in free for t in graph.outputs)


def test_candidates_include_greedy_singletons_and_splits():
    graph, _ = _attention_like()
    groups = partition(graph)
    cands = candidates(graph, groups)
    sets = {(c.group.nodes, c.group.output) for c in cands}
    assert all((g.nodes, g.output) in sets for g in groups)
    assert {c.group.nodes for c in cands if c.greedy} == {g.nodes for g in groups}
    for node in graph.nodes:
        if not op_def(node.op).view:
            assert any(c.group.nodes == (node.name,) for c in cands), node.name
    ops = {n.name: n.op for n in graph.nodes}
    shapes = {tuple(ops[m] for m in c.group.nodes) for c in cands}
    assert ("matmul", "add") in shapes  # the bias fused, the transpose left out
    assert ("matmul",) in shapes and ("relu", "gelu") in shapes
    assert len(cands) == len(sets)  # no duplicates


def _quantize_chain():
    """matmul -> * scale -> / step -> round -> clip -> cast uint8 -> cast float -> relu: the float32
    tensors between the product and the uint8 are wider than it."""
    b = GraphBuilder()
    x = b.input("x", TensorType((6, 8), "float32"))
    y = b.add("mul", [b.add("matmul", [x, _const(b, 8, 8)]), b.constant(np.array(0.7, np.float32))])
    y = b.add("round", [b.add("div", [y, b.constant(np.array(0.05, np.float32))])])
    q = b.add("cast", [b.add("clip", [y], {"min": 0.0, "max": 255.0})], {"to": "uint8"})
    z = b.add("relu", [b.add("cast", [q], {"to": "float32"})])
    return b.build([z])


def test_cuts_inside_a_chain_stop_only_at_its_narrowest_tensor():
    graph = _quantize_chain()
    cands = candidates(graph, partition(graph))
    types = {t: graph.type_of(t) for n in graph.nodes for t in n.outputs}
    written = {t for c in cands if not c.greedy for t in c.produces}
    read = {t for c in cands for t in c.needs}
    uint8 = next(t for t, ty in types.items() if ty.dtype == "uint8")
    assert uint8 in written and uint8 in read  # the product with its quantization, then the rest
    inner = {t for t, ty in types.items() if ty.dtype == "float32" and t not in graph.outputs}
    product = next(n.outputs[0] for n in graph.nodes if n.op == "matmul")
    assert not (written | read) & (inner - {product}), "a float32 cut inside the quantization"
    # a float32 chain has no narrower tensor: every cut stays
    plain, _ = _attention_like()
    plain_cands = candidates(plain, partition(plain))
    assert len(plain_cands) == len({(c.group.nodes, c.group.output) for c in plain_cands})
    ops = {n.name: n.op for n in plain.nodes}
    assert ("matmul", "add") in {tuple(ops[m] for m in c.group.nodes) for c in plain_cands}


@pytest.mark.needs_cc
def test_every_candidate_computes_its_tensor():
    graph, inputs = _attention_like()
    everything = graph.replace(outputs=tuple(t for n in graph.nodes for t in n.outputs))
    values = run_reference(everything, inputs)
    values.update(inputs)
    for c in candidates(graph, partition(graph)):
        spec = group_spec(graph, c.group)
        kernel, _ = spec.build(Target())
        args = [np.asarray(values.get(name, graph.constants.get(name)), dtype=np.float32) for name in spec.arguments]
        outs = [np.full(b.shape, np.nan, np.float32) for b in kernel.outputs]
        kernel(*[a.reshape(b.shape) for a, b in zip(args, kernel.inputs)], out=outs)
        for out, name in zip(outs, spec.outputs):
            np.testing.assert_allclose(out, values[name].reshape(out.shape), rtol=2e-5, atol=2e-5,
                                       err_msg=str(c.group.nodes))


def _keys(graph, cands):
    # structural stand-in for workload keys: the ops of the candidate and its output's shape
    ops = {n.name: n.op for n in graph.nodes}
    return [f"{[ops[m] for m in c.group.nodes]}{graph.type_of(c.group.output).shape}" for c in cands]


def test_blp_takes_a_cheaper_split_and_stays_feasible():
    graph, _ = _attention_like()
    groups = partition(graph)
    cands = candidates(graph, groups)
    cost = [10.0 if c.greedy and len(c.group.nodes) > 1 else float(len(c.group.nodes)) for c in cands]
    result = orchestrate(graph, groups, cands, _keys(graph, cands), cost)
    _feasible(graph, result.chosen)
    assert not any(c.greedy and len(c.group.nodes) > 1 for c in result.chosen)
    assert result.objective_s < result.greedy_s


def test_blp_keeps_greedy_when_greedy_is_cheapest():
    graph, _ = _attention_like()
    groups = partition(graph)
    cands = candidates(graph, groups)
    cost = [1.0 if c.greedy else 5.0 for c in cands]
    result = orchestrate(graph, groups, cands, _keys(graph, cands), cost)
    assert {c.group.nodes for c in result.chosen} == {g.nodes for g in groups}
    assert result.objective_s == pytest.approx(result.greedy_s)


def test_unbuilt_candidates_are_left_out():
    graph, _ = _attention_like()
    groups = partition(graph)
    cands = candidates(graph, groups)
    cost = [None if c.greedy and len(c.group.nodes) > 1 else 1.0 for c in cands]
    result = orchestrate(graph, groups, cands, _keys(graph, cands), cost)
    _feasible(graph, result.chosen)
    assert all(cost[cands.index(c)] is not None for c in result.chosen)


def test_identical_blocks_are_solved_once():
    graph, _ = _blocks(4)
    groups = partition(graph)
    cands = candidates(graph, groups)
    cost = [1.0 + 0.1 * len(c.group.nodes) for c in cands]
    result = orchestrate(graph, groups, cands, _keys(graph, cands), cost)
    _feasible(graph, result.chosen)
    assert result.segments >= 4
    assert result.distinct_segments < result.segments


@pytest.mark.needs_cc
@pytest.mark.parametrize("make", [_attention_like, lambda: _blocks(3)], ids=["attention_like", "blocks"])
def test_compile_blp_matches_reference(make, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path))  # costs are records of the default database
    graph, inputs = make()
    expected = run_reference(graph, inputs)
    model = compile_model(graph, orchestration="blp", optimize_graph=False)
    model._base[:] = 0xFF  # NaN everywhere: every value read must have been written
    got = model.run(inputs)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], expected[name], rtol=2e-5, atol=2e-5)
    report = model.orchestration
    assert report.result.objective_s <= report.result.greedy_s * (1 + 1e-9)
    assert report.measured > 0 and "BLP:" in report.summary()
    again = compile_model(graph, orchestration="blp", optimize_graph=False)
    assert again.orchestration.measured == 0  # every cost was a record of the database
    assert [s.nodes for s in again.steps] == [s.nodes for s in model.steps]


@pytest.mark.needs_cc
def test_a_departure_from_greedy_is_timed_again_before_it_is_taken(tmp_path, monkeypatch):
    """Costs recorded while the machine was busy (every fused kernel's record made 10 s) pull the
    program away from the greedy fusion; those kernels and the ones replacing them are timed again
    (their records replaced by the faster measurement, marked confirmed) before the choice stands,
    and a third compile finds every departure confirmed and measures nothing."""
    from dataclasses import replace

    from tilegraph.graph.fusion.measure import CONFIRMED
    from tilegraph.tune.database import open_database

    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("TILEGRAPH_BLP_COSTS", raising=False)  # the recorded costs themselves decide here
    graph, inputs = _blocks(2)
    compile_model(graph, orchestration="blp", optimize_graph=False)
    db = open_database(None)
    busy = 10.0
    for r in db.records():
        if r.meta.get("source") == "orchestration" and len(r.meta["nodes"]) > 1:
            db.replace_record(replace(r, latency_s=busy, latency_min_s=busy, meta={**r.meta, CONFIRMED: False}))
    again = compile_model(graph, orchestration="blp", optimize_graph=False)
    assert again.orchestration.retimed > 0 and again.orchestration.measured == 0  # all recorded, some doubted
    assert again.orchestration.result.objective_s < busy  # no kernel of the choice kept a busy record
    confirmed = [r for r in db.records() if r.meta.get(CONFIRMED)]
    assert confirmed and all(r.latency_min_s < busy for r in confirmed)
    assert any(len(r.meta["nodes"]) > 1 for r in confirmed)  # the greedy kernels the busy records drove out
    got = again.run(inputs)
    expected = run_reference(graph, inputs)
    np.testing.assert_allclose(got[graph.outputs[0]], expected[graph.outputs[0]], rtol=2e-5, atol=2e-5)
    third = compile_model(graph, orchestration="blp", optimize_graph=False)
    assert third.orchestration.measured == 0
    assert [s.nodes for s in third.steps] == [s.nodes for s in again.steps]


def test_a_cost_far_above_its_roofline_is_timed_again_once(tmp_path, monkeypatch):
    """A cost recorded while the machine was busy on a candidate the choice leaves out is never a
    departure, so only its roofline can doubt it: records of single-node kernels made 10 s are timed
    again (confirmed, the faster measurement kept) before the program reads them, and once
    confirmed they are read as they are."""
    from dataclasses import replace

    from tilegraph.graph.fusion.measure import CONFIRMED
    from tilegraph.tune.database import open_database

    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("TILEGRAPH_BLP_COSTS", raising=False)
    graph, _ = _blocks(2)
    compile_model(graph, orchestration="blp", optimize_graph=False)
    db = open_database(None)
    busy = 10.0
    inflated = 0
    for r in db.records():
        if r.meta.get("source") == "orchestration" and len(r.meta["nodes"]) == 1:
            db.replace_record(replace(r, latency_s=busy, latency_min_s=busy, meta={**r.meta, CONFIRMED: False}))
            inflated += 1
    assert inflated
    again = compile_model(graph, orchestration="blp", optimize_graph=False)
    assert again.orchestration.retimed >= inflated and again.orchestration.measured == 0
    singles = [r for r in db.records() if r.meta.get("source") == "orchestration" and len(r.meta["nodes"]) == 1]
    assert all(r.meta.get(CONFIRMED) and r.latency_min_s < busy for r in singles)
    third = compile_model(graph, orchestration="blp", optimize_graph=False)
    assert third.orchestration.retimed == 0 and third.orchestration.measured == 0


@pytest.mark.needs_cc
def test_a_constant_read_twice_is_checked_with_its_value(tmp_path, monkeypatch):
    """A size-1 constant is a literal of the add and an argument of the where: the candidates'
    check must give the argument the constant's value (random data there made every kernel of
    QDQ BERT's softmax and its quantization fail its check)."""
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path))
    b = GraphBuilder()
    x = b.input("x", TensorType((4, 9), "float32"))
    zero = b.constant(np.array([0.25], np.float32))
    y = b.add("add", [b.add("matmul", [x, _const(b, 9, 9)]), zero])
    z = b.add("where", [b.add("isnan", [y]), zero, y])
    graph = b.build([b.add("relu", [z])])
    model = compile_model(graph, orchestration="blp", optimize_graph=False)
    assert model.orchestration.failed == 0, model.orchestration.failures
    inputs = {"x": RNG.standard_normal((4, 9)).astype(np.float32)}
    np.testing.assert_allclose(model.run(inputs)[graph.outputs[0]], run_reference(graph, inputs)[graph.outputs[0]],
                               rtol=2e-5, atol=2e-5)


@pytest.mark.needs_cc
def test_a_crashing_candidate_is_a_failed_record_and_the_compile_succeeds(tmp_path, monkeypatch):
    """Every fused candidate's kernel dereferences NULL: each crashes its measurement worker, is
    recorded as a crash, and left out; the program covers the graph with the kernels that passed,
    and the model still computes the reference."""
    import re

    from tilegraph.build.compile import compile_c
    from tilegraph.graph.fusion.compose import FusedSpec
    from tilegraph.runtime.kernel import Kernel
    from tilegraph.tune.database import open_database

    monkeypatch.setenv("TILEGRAPH_DATA_DIR", str(tmp_path))
    build = FusedSpec.build

    def crashing(self, target, schedule=None):
        kernel, tuned = build(self, target, schedule)
        if len(self.group.nodes) == 1:
            return kernel, tuned
        signature = re.search(rf"void {kernel.entry}\([^)]*\) {{", kernel.source)
        source = (kernel.source[:signature.end()] + " *(volatile float*)0 = 1.0f;"
                  + kernel.source[signature.end():])
        return Kernel(compile_c(source, target), kernel.entry, kernel.inputs, kernel.outputs, source, target), tuned

    monkeypatch.setattr(FusedSpec, "build", crashing)
    graph, inputs = _attention_like()
    model = compile_model(graph, orchestration="blp", optimize_graph=False)
    report = model.orchestration
    assert report.failed > 0 and all(len(s.nodes) == 1 for s in model.steps)
    model._base[:] = 0xFF
    got = model.run(inputs)
    expected = run_reference(graph, inputs)
    for name in graph.outputs:
        np.testing.assert_allclose(got[name], expected[name], rtol=2e-5, atol=2e-5)
    crashes = [r for r in open_database(None).records() if r.kind == "crash"]
    assert len(crashes) == report.failed and all(r.meta["source"] == "orchestration" for r in crashes)


def test_unknown_orchestration_is_refused():
    graph, _ = _blocks(1)
    with pytest.raises(GraphError, match="unknown orchestration 'ilp'"):
        compile_model(graph, orchestration="ilp")


@pytest.mark.needs_cc
def test_patch_convolution_as_gemm_compiles_and_matches(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    b = GraphBuilder()
    x = b.input("x", TensorType((1, 9, 10, 3), "float32"))
    y = b.add("conv2d", [x, _const(b, 3, 3, 3, 7), _const(b, 7)], {"layout": "NHWC", "strides": (3, 3),
                                                                   "pads": (0, 0, 0, 0)})
    graph = b.build([b.add("relu", [b.add("add", [y, b.input("skip", TensorType((1, 3, 3, 7), "float32"))])])])
    inputs = {"x": RNG.standard_normal((1, 9, 10, 3)).astype(np.float32),
              "skip": RNG.standard_normal((1, 3, 3, 7)).astype(np.float32)}
    expected = run_reference(graph, inputs)[graph.outputs[0]]
    for orchestration in ("greedy", "blp"):
        model = compile_model(graph, orchestration=orchestration, extra_rewrites=("conv_to_gemm",))
        assert any("conv_to_gemm" in r for r in model.rewrites)
        model._base[:] = 0xFF
        np.testing.assert_allclose(model.run(inputs)[graph.outputs[0]], expected, rtol=2e-5, atol=2e-5)


@pytest.mark.needs_cc
def test_blp_falls_back_to_greedy_for_a_target_this_machine_cannot_run(monkeypatch):
    import tilegraph.graph.compile as compile_module

    monkeypatch.setattr(compile_module, "host_supports", lambda target: False)
    graph, inputs = _blocks(2)
    model = compile_model(graph, optimize_graph=False)  # the default, blp, asked for
    greedy = compile_model(graph, orchestration="greedy", optimize_graph=False)
    assert model.orchestration is None
    assert [s.nodes for s in model.steps] == [s.nodes for s in greedy.steps]


def test_the_cost_perturbation_hook_ci_uses():
    """TILEGRAPH_BLP_COSTS (CI's second pass): split makes fused candidates dearer, reversed turns
    the order round; unset keeps the measured costs."""
    from types import SimpleNamespace

    from tilegraph.errors import GraphError
    from tilegraph.graph.fusion.choose import perturbed_costs

    cands = [SimpleNamespace(group=SimpleNamespace(nodes=nodes)) for nodes in (("a",), ("a", "b"), ("b",))]
    cost = [1.0, 1.5, None]
    assert perturbed_costs(cost, cands, "") == cost
    assert perturbed_costs(cost, cands, "split") == [1.0, 150.0, None]
    assert perturbed_costs(cost, cands, "reversed") == [1.5, 1.0, None]
    with pytest.raises(GraphError, match="expected 'split' or 'reversed'"):
        perturbed_costs(cost, cands, "random")
