"""Training: workloads split (not records), decision values weighted by speed, a model that loads."""

import json
import random

import pytest

from tilegraph import workloads
from tilegraph.target import Target
from tilegraph.tune.space.program import sample
from tilegraph.tune.space.sketch import sketches_for

pytest.importorskip("torch")

from tilegraph.tlm import train  # noqa: E402
from tilegraph.tune.tlm.language import render  # noqa: E402
from tilegraph.tune.tlm.weights import load_model  # noqa: E402


def _dataset(path, specs, per=12):
    rng = random.Random(0)
    target = Target.from_string("cpu -isa=avx2")
    lines = []
    for spec in specs:
        wl = workloads.from_spec(spec)
        for i in range(per):
            program = sample(wl, sketches_for(wl)[0], rng)
            latency = None if i == 0 else 1e-5 * (1 + rng.random())
            lines.append({"workload": wl.key, "source": "ops", "name": spec, "target": "t",
                          "sentence": " ".join(render(wl, target, program)), "latency_s": latency})
    path.mkdir()
    (path / "records.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_split_is_by_workload_and_stable():
    keys = [f"k{i}" for i in range(40)]
    tr, held = train.split_workloads(keys, 0)
    assert len(held) == 4 and not set(tr) & set(held) and set(tr) | set(held) == set(keys)
    assert train.split_workloads(keys, 0) == (tr, held) and train.split_workloads(keys, 1)[1] != held


def test_train_command_writes_a_model_that_loads_with_its_metrics(tmp_path):
    data = _dataset(tmp_path / "ds", ["matmul:32,48,64", "softmax:16,100", "conv2d_nhwc:1,8,8,4,8,3,1,1",
                                      "dense:4,32,16", "batch_matmul:2,16,16,16"])
    out = tmp_path / "w"
    assert train.main(["--data", str(data), "--out", str(out), "--epochs", "2", "--seed", "1"]) == 0
    net, meta = load_model(out)
    assert meta["trained"]["seed"] == 1 and "--epochs 2" in meta["trained"]["command"]
    metrics = meta["metrics"]
    assert len(metrics["held_out_workloads"]) == 1 and metrics["epochs_run"] == 2
    assert metrics["held_out"]["decisions"] > 0 and 0 <= metrics["held_out"]["top1"] <= 1
    assert meta["dataset"]["programs"] == 60


def test_training_continues_from_a_model_and_never_ships_worse_than_its_start(tmp_path, tiny_model_dir):
    data = _dataset(tmp_path / "ds", ["matmul:32,48,64", "softmax:16,100", "dense:4,32,16", "matmul:20,30,40"])
    out = tmp_path / "w"
    assert train.main(["--data", str(data), "--out", str(out), "--epochs", "1", "--lr", "1e-9",
                       "--init", str(tiny_model_dir)]) == 0
    net, meta = load_model(out)
    history = meta["metrics"]["history"]
    assert history[0]["epoch"] == 0 and history[0]["train_loss"] is None  # the start, measured first
    assert meta["metrics"]["held_out"]["loss"] <= history[0]["held_out"]["loss"]
    assert meta["init"]["trained"]["command"] == "tests: random tiny model" and net.cfg.width == 32
    assert train.main(["--data", str(data), "--out", str(out), "--init", str(tmp_path / "none")]) == 2


def test_bad_data_is_one_line(tmp_path, capsys):
    assert train.main(["--data", str(tmp_path / "none"), "--out", str(tmp_path / "w")]) == 2
    assert "no dataset here" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "records.jsonl").write_text("{oops\n")
    assert train.main(["--data", str(tmp_path / "bad"), "--out", str(tmp_path / "w")]) == 2
    assert "not a dataset record" in capsys.readouterr().err


def test_a_compressed_dataset_reads_the_same(tmp_path):
    import gzip

    data = _dataset(tmp_path / "ds", ["matmul:32,48,64", "softmax:16,100"], per=4)
    plain = train.load_records([data])
    (data / "records.jsonl.gz").write_bytes(gzip.compress((data / "records.jsonl").read_bytes()))
    (data / "records.jsonl").unlink()
    assert train.load_records([data]) == plain
