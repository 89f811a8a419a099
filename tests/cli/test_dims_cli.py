"""`tilegraph tune` with run-time dims: an extent LO..HI in a spec, --buckets, and the one-line
errors (exit code 2)."""

import json

import pytest

from tests.cli.test_main import dirs  # noqa: F401 (the fixture)
from tilegraph.cli.main import main
from tilegraph.workloads import from_spec


def test_a_spec_extent_can_be_a_range():
    wl = from_spec("matmul:1..40,16,8")
    assert [(d.name, d.lower, d.upper) for d in wl.dims] == [("M", 1, 40)]
    assert [t.shape for t in wl.inputs][:2] == [(40, 16), (16, 8)]
    assert [(d.name, d.lower, d.upper) for d in from_spec("softmax:3,2..9").dims] == [("d1", 2, 9)]


@pytest.mark.needs_cc
def test_tune_one_kernel_per_bucket(dirs, capsys):  # noqa: F811 (the fixture)
    db = str(dirs / "t.db")
    assert main(["tune", "matmul:1..40,16,8", "--buckets", "1,8", "--strategy", "gensor", "--trials", "6",
                 "--db", db, "--json"]) == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [b["bucket"] for b in row["buckets"]] == ["[1, 1]", "[2, 8]", "[9, 40]"]
    assert all(b["measured"] > 0 for b in row["buckets"]) and len({b["workload_key"] for b in row["buckets"]}) == 3


@pytest.mark.parametrize("argv, fragment", [
    (["tune", "matmul:0..40,16,8"], "1 <= lower <= upper"),
    (["tune", "matmul:a..40,16,8"], "neither an integer nor a range"),
    (["tune", "conv2d_nhwc:1,1..9,9,4,4,3,1,1"], "does not take run-time dims"),
    (["tune", "matmul:1..40,16,8", "--buckets", "50"], "ascend strictly"),
    (["tune", "matmul:1..40,16,8", "--buckets", "x"], "--buckets takes"),
    (["tune", "matmul:8,16,8", "--buckets", "4"], "one run-time dim"),
])
def test_bad_dims_are_one_line_and_exit_code_2(dirs, capsys, argv, fragment):  # noqa: F811 (the fixture)
    assert main([*argv, "--trials", "1", "--db", str(dirs / "t.db")]) == 2
    err = capsys.readouterr().err
    assert fragment in err and len(err.strip().splitlines()) == 1
