"""benchmarks.tlm_quality's report: ratios are the other system's latency over tlm's, geometric means."""

import argparse
import json

import pytest

from benchmarks import tlm_quality


def test_summary_ratios(tmp_path):
    rows = []
    for wid, lat in (("A-1", {"tlm": 10.0, "evolutionary": 12.0, "sketch-random": 20.0, "evolutionary-long": 9.0}),
                     ("B-1", {"tlm": 4.0, "evolutionary": 3.0, "sketch-random": 8.0, "evolutionary-long": 2.0})):
        for system, us in lat.items():
            rows.append({"workload": wid, "system": system, "measured": 32, "latency_us": us, "spread": 0.01,
                         "tuning_s": 100.0 if system == "evolutionary-long" else 10.0})
    args = argparse.Namespace(target="cpu", threads=2, trials=32, rounds=5)
    tlm_quality._write(tmp_path, rows, args, {"parameters": 1, "trained": {"command": "x"}})
    summary = json.loads((tmp_path / "tlm_quality.json").read_text())["summary"]
    assert summary["sketch-random/tlm"] == pytest.approx(2.0)
    assert summary["evolutionary/tlm"] == pytest.approx((1.2 * 0.75) ** 0.5, abs=1e-3)
    assert summary["evolutionary-long/tlm latency"] == pytest.approx((0.9 * 0.5) ** 0.5, abs=1e-3)
    assert summary["evolutionary-long/tlm tuning time"] == pytest.approx(10.0)
    assert "| A-1 | tlm | 32 |" in (tmp_path / "tlm_quality.md").read_text()
