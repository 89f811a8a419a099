"""RayBuilder's dispatch on a simulated cluster (a fake `ray` with a clock, no processes): a build
goes to a node only when one of its CPUs is free, so a slow build does not hold back the builds
queued behind it, and a build lost with its node is built again elsewhere."""

from types import SimpleNamespace

import pytest

pytest.importorskip("ray.util.scheduling_strategies")

from tilegraph.tune.cluster.builder import RayBuilder  # noqa: E402
from tilegraph.tune.measure import MeasureInput  # noqa: E402
from tilegraph.tune.result import BuildResult  # noqa: E402

A, B = "0a" * 28, "0b" * 28  # node ids (Ray checks their form)


class FakeRay:
    """Tasks start when submitted and take `durations[trace]` ticks; a node in `dead` loses its tasks
    (the cluster still lists it alive: its death is not yet known)."""

    def __init__(self, cpus: dict[str, int], durations: dict[str, float], dead: frozenset[str] = frozenset()):
        self.cpus, self.durations, self.dead = cpus, durations, set(dead)
        self.clock = 0.0
        self.started: list[tuple[float, str, str]] = []  # (time, node, trace)
        self.running: dict[int, tuple[float, str, str]] = {}  # ref -> (finish, node, trace)
        self._refs = 0

    def nodes(self):
        return [{"NodeID": n, "Alive": True, "Resources": {"CPU": c}} for n, c in self.cpus.items()]

    def remote(self, **_options):
        return lambda function: SimpleNamespace(options=lambda scheduling_strategy: SimpleNamespace(
            remote=lambda *args: self._start(scheduling_strategy.node_id, args)))

    def _start(self, node: str, args: tuple) -> int:
        self._refs += 1
        if args:  # a build (the warm-up task has no arguments and is never waited on)
            trace = args[1]
            self.started.append((self.clock, node, trace))
            self.running[self._refs] = (self.clock + self.durations[trace], node, trace)
        return self._refs

    def wait(self, refs, num_returns, timeout):
        busy = [per for per in refs if per in self.running]
        self.clock = max(self.clock, min(self.running[r][0] for r in busy))
        ready = [r for r in busy if self.running[r][0] <= self.clock][:num_returns]
        return ready, [r for r in refs if r not in ready]

    def get(self, ref):
        _finish, node, trace = self.running.pop(ref)
        if node in self.dead:
            raise RuntimeError(f"node {node} died")
        return BuildResult(True, message=f"{trace} on {node}")

    def cancel(self, ref, force):
        self.running.pop(ref, None)


def _builder(ray: FakeRay, nodes: list[str]) -> RayBuilder:
    return RayBuilder(SimpleNamespace(ray=ray), "cpu", timeout_s=1e9, nodes=lambda: nodes)


def test_a_slow_build_does_not_hold_back_the_others():
    # a takes 10 ticks; with a queue fixed up front, a's node would also build c after it (11 ticks)
    ray = FakeRay({A: 1, B: 1}, {"a": 10, "b": 1, "c": 1, "d": 1})
    out = _builder(ray, [A, B]).build([MeasureInput(None, t) for t in "abcd"])
    assert [r.message.split()[0] for r in out] == list("abcd")
    node_of = {trace: node for _t, node, trace in ray.started}
    assert node_of["a"] != node_of["b"] == node_of["c"] == node_of["d"]
    assert ray.clock == 10


def test_builds_never_exceed_a_nodes_cpus():
    ray = FakeRay({A: 2, B: 1}, dict.fromkeys("abcdef", 1))
    _builder(ray, [A, B]).build([MeasureInput(None, t) for t in "abcdef"])
    at_zero = [node for t, node, _ in ray.started if t == 0]
    assert sorted(at_zero) == [A, A, B]
    assert ray.clock == 2


def test_a_node_without_cpus_builds_nothing():
    ray = FakeRay({A: 0, B: 1}, dict.fromkeys("abc", 1))
    _builder(ray, [A, B]).build([MeasureInput(None, t) for t in "abc"])
    assert {node for _t, node, _ in ray.started} == {B}


def test_a_build_lost_with_its_node_is_built_elsewhere():
    ray = FakeRay({A: 1, B: 1}, dict.fromkeys("ab", 1), dead=frozenset({A}))
    out = _builder(ray, [A, B]).build([MeasureInput(None, t) for t in "ab"])  # a fails on A, then goes to B
    assert all(r.ok for r in out)
    assert [m.message for m in out] == [f"a on {B}", f"b on {B}"]
