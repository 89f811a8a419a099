"""Saved models as artifacts (issue 35, part 2): what a save may overwrite, what survives a kill,
and what loading checks before any native code runs. Each case is one of the graph-level
reliability probe's (shared/research/reliability_probe_graph.md)."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import ModelFileError, ResourceError
from tilegraph.graph import GraphBuilder, TensorType

pytestmark = pytest.mark.needs_cc


def _matmul_relu(m, k, n, seed):
    rng = np.random.default_rng(seed)
    b = GraphBuilder(f"mm{m}x{k}x{n}")
    x = b.input("x", TensorType((m, k), "float32"))
    w = b.constant(rng.standard_normal((k, n)).astype(np.float32), "w")
    y = b.add("relu", [b.add("matmul", [x, w], name="mm")], name="act")
    return b.build([y]), w


def _expected(graph, x):
    w = next(iter(graph.constants.values()))
    return np.maximum(x.astype(np.float64) @ w, 0)


@pytest.fixture(scope="module")
def models():
    """Two models with the same kernel entry names and different shapes (the probe's A and B)."""
    a, _ = _matmul_relu(2, 8, 4, 0)
    b, _ = _matmul_relu(4, 16, 8, 1)
    return (a, tg.compile(a, orchestration="greedy")), (b, tg.compile(b, orchestration="greedy"))


def _check(model, graph, seed=0):
    x = np.random.default_rng(seed).standard_normal(graph.type_of("x").shape).astype(np.float32)
    np.testing.assert_allclose(model(x)[0], _expected(graph, x), rtol=1e-5, atol=1e-5)


def _manifest(path):
    return json.loads((path / "manifest.json").read_text())


def _edit(path, fn):
    manifest = _manifest(path)
    fn(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_a_model_saved_again_into_its_folder_loads_its_own_kernels(models, tmp_path):
    (ga, a), (gb, b) = models
    path = tmp_path / "m.tg"
    a.save(path)
    _check(tg.load(path), ga)
    b.save(path)  # same folder, same library names and entry points, other shapes
    _check(tg.load(path), gb)
    a.save(path)
    _check(tg.load(path), ga)
    assert sorted(p.name for p in path.iterdir() if p.name != "manifest.json") == [_manifest(path)["data"]]


def test_saving_never_deletes_what_it_did_not_write(models, tmp_path, monkeypatch):
    (_, a), (gb, b) = models
    path = tmp_path / "m.tg"
    a.save(path)
    (path / "NOTES.md").write_text("mine")
    (path / "inputs").mkdir()
    (path / "inputs" / "x.npy").write_bytes(b"data")
    with pytest.raises(ModelFileError, match="holds files a saved model does not.*NOTES.md"):
        b.save(path)
    assert (path / "NOTES.md").read_text() == "mine" and (path / "inputs" / "x.npy").read_bytes() == b"data"
    _check(tg.load(path), models[0][0])  # the old model is untouched
    monkeypatch.chdir(path)  # `tilegraph compile ... -o .` inside a model folder
    with pytest.raises(ModelFileError, match="working directory"):
        b.save(".")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModelFileError, match="working directory"):
        b.save(tmp_path)
    assert (path / "NOTES.md").exists()
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "data.csv").write_text("1,2")
    with pytest.raises(ModelFileError, match="holds files"):
        b.save(plain)
    empty = tmp_path / "empty"
    empty.mkdir()
    b.save(empty)
    _check(tg.load(empty), gb)


def test_a_saved_model_folder_follows_the_umask(models, tmp_path):
    old = os.umask(0o022)
    try:
        path = models[0][1].save(tmp_path / "shared.tg")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o755
    assert (path / _manifest(path)["data"]).stat().st_mode & 0o777 == 0o755


SAVER = """
import sys, numpy as np, tilegraph as tg
from tests.graph.test_serialize import _matmul_relu
path = sys.argv[1]
models = [tg.compile(_matmul_relu(2, 8, 4, 0)[0], orchestration="greedy"),
          tg.compile(_matmul_relu(4, 16, 8, 1)[0], orchestration="greedy")]
models[0].save(path)
print("ready", flush=True)
i = 0
while True:
    i += 1
    models[i % 2].save(path)
"""


def _kill_during_saves(tmp_path, kills, models):
    path = tmp_path / "killed.tg"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    rng = random.Random(35)
    for _ in range(kills):
        child = subprocess.Popen([sys.executable, "-c", SAVER, str(path)], stdout=subprocess.PIPE, env=env)
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.4))
        child.send_signal(signal.SIGKILL)
        child.wait()
        model = tg.load(path)  # never without a loadable model: the old one or the new one
        graph = models[0][0] if model.graph.type_of("x").shape == (2, 8) else models[1][0]
        _check(model, graph)


def test_a_model_survives_saves_killed_at_random_moments(models, tmp_path):
    _kill_during_saves(tmp_path, 4, models)


@pytest.mark.slow
def test_a_model_survives_twenty_killed_saves(models, tmp_path):
    _kill_during_saves(tmp_path, 20, models)


def test_damaged_libraries_and_weights_are_refused_before_loading(models, tmp_path):
    (ga, a), (_, b) = models
    path = a.save(tmp_path / "a.tg")
    data = path / _manifest(path)["data"]
    library = data / "kernels" / "k0.so"
    original = library.read_bytes()
    flipped = bytearray(original)
    flipped[len(flipped) // 2] ^= 0x01
    library.write_bytes(bytes(flipped))
    with pytest.raises(ModelFileError, match="changed or damaged"):
        tg.load(path)
    library.write_bytes(original[:2000])  # half-copied: was a SIGBUS
    with pytest.raises(ModelFileError, match="changed or damaged"):
        tg.load(path)
    library.write_bytes(original)
    weights = data / "weights.bin"
    w = bytearray(weights.read_bytes())
    w[5] ^= 0x01
    weights.write_bytes(bytes(w))
    with pytest.raises(ModelFileError, match="weights.bin was changed or damaged"):
        tg.load(path)


def test_another_models_library_is_refused_even_with_its_hash(models, tmp_path):
    """The library says what it was compiled for (its signature): another model's k0.so with the
    same entry point, its sha256 copied into the manifest too, is refused (was a SIGSEGV)."""
    (_, a), (_, b) = models
    pa, pb = a.save(tmp_path / "a.tg"), b.save(tmp_path / "b.tg")
    lib_a = pa / _manifest(pa)["data"] / "kernels" / "k0.so"
    lib_b = pb / _manifest(pb)["data"] / "kernels" / "k0.so"
    lib_a.write_bytes(lib_b.read_bytes())
    _edit(pa, lambda m: m["kernels"][0].update(sha256=_manifest(pb)["kernels"][0]["sha256"]))
    with pytest.raises(ModelFileError, match="not the kernel asked for"):
        tg.load(pa)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["kernels"][0].update(library="/usr/lib/x86_64-linux-gnu/libm.so.6"), "kernels/k<n>.so"),
    (lambda m: m["kernels"][0].update(library="../../../etc/passwd"), "kernels/k<n>.so"),
    (lambda m: m["kernels"][0].update(entry="free"), "entry point"),
    (lambda m: m.update(data="../elsewhere"), "data-<12 hex digits>"),
    (lambda m: m["steps"][0].update(kernel=7), r"steps\[0\].kernel: 7 names no kernel"),
    (lambda m: m.pop("target_fingerprint"), "'target_fingerprint' is missing"),
    (lambda m: m["graph"]["values"]["x"].update(shape=[2.5, 8]), r"graph.values.x.shape\[0\]"),
    (lambda m: [b.update(shape=[1, 8]) for b in m["kernels"][0]["inputs"][:1]], "takes float32"),
    (lambda m: m["graph"]["values"]["x"].update(shape=[4, 8]), "declares outputs"),
    (lambda m: m["plan"]["offsets"].update({next(iter(m["plan"]["offsets"])): 10**9}), "outside the arena"),
])
def test_hand_edited_manifests_are_one_line(models, tmp_path, edit, message):
    path = models[0][1].save(tmp_path / "e.tg")
    _edit(path, edit)
    with pytest.raises(ModelFileError, match=message):
        tg.load(path)


def test_an_arena_beyond_this_machine_is_a_resource_error(models, tmp_path):
    path = models[0][1].save(tmp_path / "big.tg")
    _edit(path, lambda m: m["plan"].update(arena_bytes=10**15))
    with pytest.raises(ResourceError, match="arena needs"):
        tg.load(path)


@pytest.mark.parametrize("text", ["null", "[1, 2, 3]", "[" * 100000, '"model"', "{"])
def test_a_manifest_that_is_not_an_object_is_one_line(models, tmp_path, text):
    path = models[0][1].save(tmp_path / "n.tg")
    (path / "manifest.json").write_text(text)
    with pytest.raises(ModelFileError, match="manifest.json"):
        tg.load(path)
