import csv

import pytest

from benchmarks import gensor_table

FIELDS = ["workload", "system", "threads", "status", "median_s", "tuning_time_s"]


def _write(path, rows):
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow(dict(zip(FIELDS, r)))


def test_table_ratios_and_geomeans_come_from_the_csv(tmp_path):
    p = tmp_path / "results.csv"
    _write(p, [
        ("A", "tilegraph-gensor", "2", "ok", "0.001", "3.0"),
        ("A", "tilegraph-roller", "2", "ok", "0.004", "2.0"),
        ("A", "tilegraph-random", "2", "failed", "", "5.0"),
        ("A", "torch", "2", "ok", "0.002", ""),
        ("B", "tilegraph-gensor", "2", "ok", "0.002", "4.0"),
        ("B", "tilegraph-roller", "2", "ok", "0.002", "2.0"),
        ("B", "torch", "2", "ok", "0.001", ""),
        ("A", "tilegraph-gensor", "1", "ok", "9", "3.0"),
    ])
    text = gensor_table.table(p, threads=2)
    assert "| A | 1 | 4 | – | 2 | 2 | 4 | 3.0 |" in text
    assert "| B | 2 | 2 | – | 1 | 0.5 | 1 | 4.0 |" in text
    assert "torch / gensor **1.00** (2 workloads" in text  # sqrt(2 * 0.5)
    assert "roller / gensor **2.00**" in text  # sqrt(4 * 1)


def test_missing_csv_is_a_clear_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        gensor_table.main([str(tmp_path / "nope.csv")])
    assert exc.value.code == 2 and "no such file" in capsys.readouterr().err
