import datetime as dt

import pytest

from benchmarks import gpu_bench
from benchmarks.gpu_bench import CASES, Row, append_report, format_table, resolve


def test_cases_resolve_to_workloads():
    ops = {resolve(spec).reference_spec["op"] for spec in CASES.values()}
    assert ops == {"batch_matmul", "conv2d_nhwc", "matmul", "softmax", "layer_norm"}


def test_table_shows_speedup_and_missing_values():
    rows = [Row("GMM-4", "GMM-4", 2.0, 1.0, 1e-5, 3, 4, 12.5, 0.8, 0.02, 0.011), Row("conv", "c", None, 1.5, None, 0, 4)]
    table = format_table(rows, "H100")
    assert "| GMM-4 | `GMM-4` | 2.0000 (2%) | 1.0000 (1%) | 0.50 |" in table and "| 3/4 | 12.5 | 0.80 |" in table
    assert "| conv | `c` | - | 1.5000 | - | - | 0/4 | - | - |" in table


def test_spearman_needs_three_kernels():
    assert gpu_bench._spearman([(1.0, 2.0), (2.0, 3.0)]) is None
    assert gpu_bench._spearman([(1.0, 2.0), (2.0, 3.0), (3.0, 5.0)]) == pytest.approx(1.0)


def test_append_report_creates_then_appends(tmp_path):
    path = tmp_path / "docs" / "performance.md"
    when = dt.datetime(2025, 1, 2, 3, 4)
    append_report("T1\n", path, when)
    append_report("T2\n", path, when)
    text = path.read_text()
    assert text.startswith("# Performance") and text.count("## GPU benchmark, 2025-01-02 03:04 UTC") == 2
    assert text.index("T1") < text.index("T2")


def test_unknown_case_is_a_usage_error():
    with pytest.raises(SystemExit) as info:
        gpu_bench.main(["--cases", "nope"])
    assert info.value.code == 2
