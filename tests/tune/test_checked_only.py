"""Short tunings for a target whose kernels run here only under an emulator: the model ranks,
qemu checks, nothing is timed or stored (tune/checked_only.py)."""

import numpy as np
import pytest

import tilegraph as tg
from tilegraph import workloads
from tilegraph.target import host_arch
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.checked_only import tune_checked_only
from tilegraph.tune.database import MemoryDatabase
from tilegraph.tune.options import TuneOptions
from tilegraph.tune.session import TuneSession
from tilegraph.tune.strategy.base import Candidate, SearchStrategy

ARM = tg.Target("cpu", arch="aarch64", num_cores=2)
on_x86 = pytest.mark.skipif(host_arch() != "x86_64", reason="emulates aarch64 from an x86-64 host")


@on_x86
@pytest.mark.extended
@pytest.mark.needs_qemu
@pytest.mark.parametrize("spec", ["matmul:37,29,23", "conv2d_nhwc:1,9,7,3,5,3,2,1", "softmax:5,33"])
def test_short_tunings_for_aarch64_match_numpy_under_qemu(spec, tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    wl = workloads.from_spec(spec)
    db = MemoryDatabase()
    result = tg.tune(wl, ARM, db=db, trials=2, progress=False)
    assert not result.timed and 1 <= result.measured <= 2 and result.failed == 0  # softmax:5,33 has one candidate
    assert result.latency_s > 0 and result.summary()["timed"] is False  # the model's prediction, marked
    assert result.kernel.target == ARM
    inputs = random_inputs(wl, seed=11)
    np.testing.assert_allclose(result.kernel(*inputs), reference_outputs(wl, inputs)[0], rtol=1e-4, atol=1e-4)
    assert db.records(wl.key, ARM.fingerprint) == []  # emulated runs are never stored as tuning results


class _Fixed(SearchStrategy):
    name = "fixed"

    def __init__(self, candidates):
        self.queue = list(candidates)
        self.notified = []

    def propose(self, ctx, n):
        batch, self.queue = self.queue[:n], self.queue[n:]
        return batch

    def notify(self, ctx, candidates, results):
        self.notified += [(c.predicted, r.kind) for c, r in zip(candidates, results)]

    def done(self):
        return not self.queue


def _default_trace(wl):
    return tg.Schedule(wl).trace.to_json()


@pytest.mark.needs_cc
def test_candidates_are_checked_in_the_models_order_and_failures_are_data():
    """Runs on the host target (the same path, no emulator needed): an unbuildable candidate with
    the best prediction is a build error, the next correct one is returned."""
    wl = workloads.from_spec("matmul:5,7,3")
    good = _default_trace(wl)
    strategy = _Fixed([Candidate(good, predicted=2e-6), Candidate('{"not": "a trace"}', predicted=1e-6)])
    with _session(TuneOptions(trials=2, progress=False)) as session:
        result = tune_checked_only(wl, session, strategy)
    assert strategy.notified == [(1e-6, "build_error"), (2e-6, "ok")]
    assert result.latency_s == 2e-6 and result.failures == {"build_error": 1} and not result.timed


@pytest.mark.needs_cc
def test_no_correct_candidate_is_an_error_naming_the_verdicts():
    wl = workloads.from_spec("matmul:5,7,3")

    def wrong(workload, inputs):
        return [np.full(t.shape, 1e6) for t in workload.outputs]

    strategy = _Fixed([Candidate(_default_trace(wl), predicted=1e-6)])
    with pytest.raises(tg.TilegraphError, match="passed its check under the emulator .*wrong_answer: 1"):
        with _session(TuneOptions(trials=3, reference=wrong, progress=False)) as session:
            tune_checked_only(wl, session, strategy)


@pytest.mark.parametrize("error, kind", [("timeout", "timeout"), ("crash", "crash")])
def test_a_candidate_that_hangs_or_dies_under_the_emulator_is_a_verdict(monkeypatch, error, kind):
    """The emulated runner kills a program past its time limit (EmulatorTimeout) and reports one
    that exits badly (TilegraphError); either is data for that candidate, not a failed tuning."""
    import tilegraph.driver
    from tilegraph.runtime.emulated import EmulatorTimeout
    from tilegraph.tune.checked_only import check_candidate

    wl = workloads.from_spec("matmul:5,7,3")

    class Failing:
        outputs = wl.outputs

        def __call__(self, *args, **kwargs):
            if error == "timeout":
                raise EmulatorTimeout("tg_matmul ran longer than 300 s under qemu-aarch64")
            raise tg.TilegraphError("tg_matmul failed under qemu-aarch64 (signal 11)")

    monkeypatch.setattr(tilegraph.driver, "build", lambda sch, target=None: Failing())
    with _session(TuneOptions(progress=False)) as session:
        kernel, verdict = check_candidate(wl, session, Candidate(_default_trace(wl)), seed=1)
    assert kernel is None and verdict.kind == kind and "qemu-aarch64" in verdict.message


def _session(options: TuneOptions) -> TuneSession:
    """A session for this host's CPU (checked the same way as an emulated one) and a memory database."""
    return TuneSession(tg.Target("cpu"), MemoryDatabase(), options)
