"""RayRunner's dispatch without a cluster: a stand-in for Ray's object store and actors shows which
runner measured each candidate."""

from types import SimpleNamespace

from tilegraph.tune.cluster.runner import RayRunner
from tilegraph.tune.measure import MeasurePolicy
from tilegraph.tune.result import BuildResult, RunResult


class _Ref:
    def __init__(self, value: RunResult):
        self.value = value


class _Ray:
    """put/wait/get/kill over values computed at once: every call answers immediately."""

    def put(self, value):
        return value

    def wait(self, refs, num_returns=1, timeout=None):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        return ref.value

    def kill(self, actor):
        pass


def _actor(name: str, log: list[str]):
    def remote(build, inputs, references, timeout_s, best_s):
        log.append(name)
        return _Ref(RunResult("ok", "", samples=(1e-3,)))

    return SimpleNamespace(measure_candidate=SimpleNamespace(remote=remote))


def _runner(names: list[str], log: list[str]) -> RayRunner:
    runner = object.__new__(RayRunner)  # no cluster: only what run_batch reads
    runner.ray, runner.policy = _Ray(), MeasurePolicy().resolved()
    runner.actors = [_actor(n, log) for n in names]
    runner.requeued, runner._turn = 0, 0
    return runner


def _item():
    return (BuildResult(ok=True), [], [], None, None)


def test_candidates_handed_over_one_at_a_time_go_to_every_runner_in_turn():
    log: list[str] = []
    runner = _runner(["a", "b", "c"], log)
    for _ in range(7):
        assert [r.kind for r in runner.run_batch([_item()])] == ["ok"]
    assert log == ["a", "b", "c", "a", "b", "c", "a"]


def test_a_batch_starts_with_the_runner_after_the_last_batchs_last():
    log: list[str] = []
    runner = _runner(["a", "b"], log)
    runner.run_batch([_item()])
    runner.run_batch([_item(), _item(), _item()])
    assert log == ["a", "b", "a", "b"]
