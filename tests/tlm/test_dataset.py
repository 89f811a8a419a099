"""The dataset command: a corpus that holds the suite out, every measured program kept with its sentence."""

import json

import pytest

from tilegraph import workloads
from tilegraph.tlm import dataset
from tilegraph.tune.tlm.language import parse


def test_random_ops_are_seeded_varied_and_hold_the_suite_out():
    suite = dataset.suite_keys()
    assert len(suite) == len(workloads.list())
    a = dataset.random_ops(30, 0, suite)
    assert [e.name for e in a] == [e.name for e in dataset.random_ops(30, 0, suite)]
    assert [e.name for e in a] != [e.name for e in dataset.random_ops(30, 1, suite)]
    assert not {e.key for e in a} & suite and len({e.key for e in a}) == 30
    assert len({e.name.split(":")[0] for e in a}) >= 15  # the op library, not one family
    # a workload of the suite is redrawn
    gmm = workloads.get("GMM-1")
    assert gmm.key not in {e.key for e in dataset.random_ops(60, 0, {gmm.key})}


@pytest.mark.extended
@pytest.mark.needs_cc
def test_build_keeps_every_measured_program_and_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("TILEGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "ds"
    summary = dataset.build(out, seconds=3, ops=2, models=(), layers_per_model=0, seed=0)
    lines = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert summary["workloads"] == 2 and summary["programs"] == len(lines) >= 2
    corpus = {e["key"]: e for e in json.loads((out / "corpus.json").read_text())}
    for line in lines:
        wl = workloads.from_spec(corpus[line["workload"]]["name"])
        assert parse(line["sentence"].split(), wl) is not None  # the sentence is this workload's program
        assert line["latency_s"] is None or line["latency_s"] > 0
    again = dataset.build(out, seconds=3, ops=2, models=(), layers_per_model=0, seed=0)
    assert again["tuned_this_run"] == 0 and again["programs"] == len(lines)


def test_the_command_rejects_bad_arguments(capsys):
    assert dataset.main(["--out", "/tmp/unused-tlm-ds", "--models", "alexnet"]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert dataset.main(["--out", "/tmp/unused-tlm-ds", "--time-per-workload", "0"]) == 2
