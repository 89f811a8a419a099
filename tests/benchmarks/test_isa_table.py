"""benchmarks/isa_table.py: ratios per workload, ISA and thread count from results.csv files."""

import csv

import pytest

from benchmarks.isa_table import main, table

FIELDS = ["workload", "system", "threads", "status", "median_s"]


def _run(path, rows):
    path.mkdir()
    with (path / "results.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, FIELDS)
        writer.writeheader()
        for workload, system, threads, status, median in rows:
            writer.writerow(dict(zip(FIELDS, (workload, system, threads, status, median))))
    return path


def test_columns_per_isa_and_threads_with_geomeans_and_the_floor(tmp_path):
    a = _run(tmp_path / "a", [("W1", "tilegraph-gensor", 1, "ok", 1.0), ("W1", "torch", 1, "ok", 2.0),
                              ("W2", "tilegraph-gensor", 1, "ok", 2.0), ("W2", "torch", 1, "ok", 1.0),
                              ("W3", "tilegraph-gensor", 1, "wrong", ""), ("W3", "torch", 1, "ok", 1.0)])
    b = _run(tmp_path / "b", [("W1", "tilegraph-gensor", 2, "ok", 1.0), ("W1", "torch", 2, "ok", 0.7)])
    text = table([("avx512", a), ("avx2", b)])
    assert "| workload | avx512 1T | avx2 2T |" in text
    assert "| W1 | 2.00 | **0.70** |" in text and "| W2 | **0.50** | - |" in text
    assert "| geometric mean | **1.00** | **0.70** |" in text  # sqrt(2 x 0.5); a wrong kernel is no ratio
    assert "| slowest | W2 0.50 | W1 0.70 |" in text and "| below 0.8 | 1 | 1 |" in text


def test_a_directory_without_results_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main([f"x={tmp_path}"])
    assert exc.value.code == 2 and "DIR/results.csv" in capsys.readouterr().err
