"""The benchmark harness on fake systems (protocol, correctness flags, report files) and a --short smoke run."""

from __future__ import annotations

import csv
import importlib
import math
import os
import platform

import numpy as np
import pytest

from benchmarks import protocol, report, suites
from benchmarks.peers import PeerSkip, Prepared
from benchmarks.peers.tvm_ms import parse_reply, trials_for_budget
from benchmarks.race import RaceConfig, race_case
from benchmarks.run import parse_args


class FakeClock:
    """A clock that advances only when fake systems 'run', so timings are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_interleaved_order_and_per_call_time():
    clock = FakeClock()
    order: list[str] = []

    def system(name: str, cost: float) -> protocol.System:
        def call() -> None:
            order.append(name)
            clock.now += cost
        return protocol.System(name, call)

    timings = protocol.measure_interleaved([system("a", 0.001), system("b", 0.004)], rounds=4, min_sample_s=0.01,
                                           settle_s=0.0, clock=clock)
    assert timings["a"].median_s == pytest.approx(0.001)
    assert timings["b"].median_s == pytest.approx(0.004)
    assert timings["a"].inner * 0.001 >= 0.01 and timings["b"].inner * 0.004 >= 0.01
    assert len(timings["a"].samples) == 4 and timings["a"].iqr_pct == pytest.approx(0.0)
    # after calibration the rounds alternate a-block, b-block, a-block, ...
    tail = order[-(4 * (timings["a"].inner + timings["b"].inner)):]
    blocks = [tail[0]] + [y for x, y in zip(tail, tail[1:]) if x != y]
    assert blocks == ["a", "b"] * 4


def test_failing_system_is_reported_not_fatal():
    clock = FakeClock()
    calls = {"n": 0}

    def flaky() -> None:
        calls["n"] += 1
        clock.now += 0.01
        if calls["n"] > 3:
            raise RuntimeError("boom")

    def steady() -> None:
        clock.now += 0.01

    timings = protocol.measure_interleaved([protocol.System("flaky", flaky), protocol.System("ok", steady)],
                                           rounds=3, min_sample_s=0.01, settle_s=0.0, clock=clock)
    assert timings["flaky"].error == "RuntimeError: boom"
    assert timings["ok"].ok and len(timings["ok"].samples) == 3


def test_spread_statistics():
    t = protocol.Timing("x", samples=[1.0, 2.0, 3.0, 4.0, 10.0])
    assert t.median_s == 3.0
    assert t.minmax_pct == pytest.approx(300.0)
    assert t.iqr_pct == pytest.approx(100.0 * (4.0 - 2.0) / 3.0)


@pytest.mark.parametrize("rounds, min_sample", [(0, 0.1), (3, 0.0)])
def test_protocol_rejects_bad_arguments(rounds, min_sample):
    with pytest.raises(ValueError, match="argument"):
        protocol.measure_interleaved([protocol.System("a", lambda: None)], rounds=rounds, min_sample_s=min_sample)


@pytest.mark.parametrize("op, params", [
    ("conv2d_nhwc", suites.conv2d(1, 9, 8, 4, 6, 3, 2, 1)),
    ("conv2d_nhwc", suites.conv2d(2, 7, 7, 4, 8, 3, 1, 2, dilation=2, groups=2)),
    ("depthwise_conv2d_nhwc", {"N": 1, "H": 6, "W": 5, "C": 3, "K": 3, "stride": 2, "pad": 1}),
])
def test_conv_reference_matches_direct_loops(op, params):
    case = suites.BenchCase("t", "c", op, params)
    inputs = suites.canonical_inputs(case, seed=1)
    got = suites.reference(case, inputs)[0]
    x, w = (a.astype(np.float64) for a in inputs)
    if op == "depthwise_conv2d_nhwc":
        c = params["C"]
        w = w.reshape(params["K"], params["K"], 1, c)
        s, pad, dil, groups = params["stride"], params["pad"], 1, c
    else:
        s, pad, dil, groups = params["stride"], params["pad"], params["dilation"], params["groups"]
    n, h, wd, ci = x.shape
    kh, kw, cig, co = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    want = np.full(got.shape, np.nan)
    cog = co // groups
    for b in range(n):
        for y in range(got.shape[1]):
            for z in range(got.shape[2]):
                for f in range(co):
                    g = f // cog
                    patch = xp[b, y * s: y * s + dil * (kh - 1) + 1: dil, z * s: z * s + dil * (kw - 1) + 1: dil,
                               g * cig:(g + 1) * cig]
                    want[b, y, z, f] = np.sum(patch * w[:, :, :, f])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_relative_error_flags_nan_and_shape():
    ref = [np.ones((2, 3))]
    assert suites.relative_error([np.ones((2, 3), np.float32)], ref) == 0.0
    assert math.isnan(suites.relative_error([np.full((2, 3), np.nan)], ref))
    assert suites.relative_error([np.ones(5)], ref) == math.inf
    assert suites.relative_error([np.ones((3, 2))], ref) == 0.0  # same elements, another shape: reshaped


def test_suites_list_the_requested_shapes():
    gemm = {c.name: c for c in suites.transformer_gemm()}
    assert gemm["gpt2-qkv-s512"].params == {"M": 512, "K": 768, "N": 2304}
    assert gemm["mlp-down-s128"].params == {"M": 128, "K": 3072, "N": 768}
    assert gemm["attn-context-s512"].params == {"B": 12, "M": 512, "K": 512, "N": 64}
    assert len(gemm) == 14
    convs = {c.name: c for c in suites.resnet50_conv()}
    stem = convs["stem-7x7s2-3-64"].params
    assert (stem["KH"], stem["stride"], stem["pad"], stem["CI"], stem["CO"]) == (7, 2, 3, 3, 64)
    assert sum(1 for c in convs.values() if c.params["stride"] == 2) == 7
    assert [c.name for c in suites.transformer_gemm(short=True)] == ["attn-scores-s128"]


def test_canonical_from_description_maps_tilegraph_fields():
    op, p = suites.canonical_from_description(
        {"op": "batch_matmul", "params": {"B": 1, "N": 512, "M": 32, "K": 256}}, 1)
    assert op == "batch_matmul" and p == {"B": 1, "M": 512, "K": 256, "N": 32}
    op, p = suites.canonical_from_description({"op": "softmax", "params": {}}, 1, [(1, 64, 32)])
    assert op == "softmax" and p == {"M": 64, "N": 32}
    assert suites.canonical_from_description({"op": "conv2d_capsule_nhwijc", "params": {}}, 1) == (None, {})


# ------------------------------------------------------------------------------ race on fake peers


class FakePeer:
    """A pure-numpy 'system': correct, wrong (off by a little), or unable to express the op."""

    def __init__(self, name: str, mode: str):
        self.name = name
        self.mode = mode
        self.threads: list[int] = []

    def unavailable(self) -> str | None:
        return None

    def set_threads(self, n: int) -> None:
        self.threads.append(n)

    def prepare(self, case: suites.BenchCase, inputs: list[np.ndarray]) -> Prepared:
        if self.mode == "skip":
            raise PeerSkip("cannot express this op")
        a, b = inputs
        scale = np.float32(1.01 if self.mode == "wrong" else 1.0)
        call = lambda: np.matmul(a, b) * scale  # noqa: E731
        return Prepared(call=call, outputs=lambda: [call()], tuning_time_s=1.5 if self.mode == "ok" else math.nan,
                        measurements=3)


def _fake_rows(tmp_path):
    case = suites.BenchCase("fake-suite", "mm-16", "matmul", {"M": 16, "K": 8, "N": 12})
    peers = [FakePeer("good", "ok"), FakePeer("bad", "wrong"), FakePeer("none", "skip")]
    config = RaceConfig(threads=(1, 2), rounds=3, min_sample_s=0.002, settle_s=0.0, peaks={1: 1e11, 2: 2e11})
    rows = race_case(case, config, peers, tg_systems=[], tvm=None, log=lambda msg: None)
    return rows, peers


def test_race_flags_wrong_peers_and_skips(tmp_path):
    rows, peers = _fake_rows(tmp_path)
    by = {(r.system, r.threads): r for r in rows}
    assert by[("good", 1)].status == "ok" and by[("good", 2)].status == "ok"
    assert by[("bad", 1)].status == "wrong" and "rel. error" in by[("bad", 1)].note
    assert by[("none", 1)].status == "skipped"
    assert peers[0].threads == [1, 2]
    good = by[("good", 1)]
    assert good.gflops == pytest.approx(2 * 16 * 8 * 12 / good.median_s / 1e9)
    assert good.peak_fraction == pytest.approx(good.gflops * 1e9 / 1e11)


def test_report_files_contain_the_rows(tmp_path):
    rows, _ = _fake_rows(tmp_path)
    meta = {"date": "2026-01-01T00:00:00", "fingerprint": "fp-test", "cpu_model": "Fake CPU", "cores": 2,
            "peaks_gflops": {1: 100.0, 2: 200.0}, "suites": ["fake-suite"],
            "runs": [{"date": "d", "suites": ["fake-suite"], "command": "python -m benchmarks.run fake"}]}
    paths = report.write_all(str(tmp_path), rows, meta)
    text = open(paths["report.md"]).read()
    assert "fp-test" in text and "Fake CPU" in text and "python -m benchmarks.run fake" in text
    assert "| mm-16 | good |" in text and "**WRONG**" in text and "cannot express this op" in text
    with open(paths["results.csv"]) as fh:
        recs = list(csv.DictReader(fh))
    assert {(r["system"], r["status"]) for r in recs} >= {("good", "ok"), ("bad", "wrong"), ("none", "skipped")}
    if importlib.util.find_spec("matplotlib"):
        assert os.path.getsize(paths["plot.png"]) > 1000
    # a later run of another suite keeps this one's rows
    other = [report.Row(suite="other", workload="w", system="good", threads=1, median_s=1e-3, gflops=1.0)]
    report.write_all(str(tmp_path), other, {**meta, "suites": ["other"], "runs": []})
    suites_now = {r.suite for r in report.read_csv(paths["results.csv"])}
    assert suites_now == {"fake-suite", "other"}


def test_cli_rejects_unknown_suite_and_peer(capsys):
    with pytest.raises(SystemExit):
        parse_args(["nope"])
    assert "unknown suite 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["transformer-gemm", "--peers", "tf"])
    assert "unknown peer 'tf'" in capsys.readouterr().err
    args = parse_args(["all", "--short"])
    assert args.suites == list(suites.SUITES) and args.budget == 2.0 and args.peers == ["torch", "numpy"]


def test_tvm_reply_parsing_and_budget():
    assert parse_reply('noise\n{"ok": true, "x": 1}\n') == {"ok": True, "x": 1}
    assert parse_reply("no json here") is None
    assert trials_for_budget(1) == 8 and trials_for_budget(600) > 64


def _tilegraph_can_tune() -> bool:
    try:
        tg = importlib.import_module("tilegraph")
        importlib.import_module("tilegraph.workloads")
        importlib.import_module("tilegraph.testing")
        return callable(getattr(tg, "tune", None))
    except ImportError:
        return False


@pytest.mark.slow
@pytest.mark.needs_cc
@pytest.mark.skipif(not _tilegraph_can_tune(), reason="tilegraph tuning / workloads not available yet")
def test_short_run_end_to_end(tmp_path):
    from benchmarks.run import main

    out = tmp_path / "results"
    assert main(["transformer-gemm", "--short", "--budget", "1", "--peers", "numpy", "--strategies", "roller",
                 "--threads", "1", "--rounds", "2", "--min-sample", "0.01", "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "attn-scores-s128" in text and "tilegraph-roller" in text
    recs = list(csv.DictReader(open(out / "results.csv")))
    systems = {r["system"]: r for r in recs}
    assert systems["numpy"]["status"] == "ok"
    assert systems["tilegraph-roller"]["status"] in ("ok", "wrong", "failed", "skipped")


def test_isa_restriction_must_come_before_the_peers_load():
    import pytest as _pytest

    from benchmarks.run import ISA_ENVIRONMENTS, restrict_isa

    assert restrict_isa(None) == {}
    assert ISA_ENVIRONMENTS["avx2"]["ATEN_CPU_CAPABILITY"] == "avx2"
    with _pytest.raises(SystemExit, match="before numpy"):
        restrict_isa("avx2")  # numpy is loaded in this process


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="--isa avx2 needs an x86-64 host")
def test_an_avx2_run_targets_avx2_and_says_so(tmp_path):
    import json
    import subprocess
    import sys

    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "benchmarks.run", "ansor-cpu", "--short", "--isa", "avx2", "--peers", "",
                           "--threads", "1", "--strategies", "gensor", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    meta = json.loads((out / "run.json").read_text())
    assert meta["isa"] == "avx2" and meta["fingerprint"].startswith("cpu-avx2-")
    assert "ISA: avx2 (every system restricted" in (out / "report.md").read_text()
