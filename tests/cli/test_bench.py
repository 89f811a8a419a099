"""cli/bench.py: tilegraph against its peers on one workload, same inputs, alternating rounds."""

import pytest

from tilegraph import workloads
from tilegraph.cli.bench import bench_workload
from tilegraph.tune.database import MemoryDatabase

pytestmark = pytest.mark.needs_cc


def test_a_row_with_the_default_schedule_and_numpy(monkeypatch, tmp_path):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path))
    row = bench_workload(workloads.from_spec("matmul:16,8,12"), MemoryDatabase(), ["numpy"], seconds=0.05,
                         num_threads=1)
    assert row["schedule"] == "default" and row["latency_s"] > 0 and row["gflops"] > 0
    assert row["numpy_latency_s"] > 0 and row["ratio_numpy"] == pytest.approx(row["numpy_latency_s"] / row["latency_s"])
