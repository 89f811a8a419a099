"""Whole models: the reference models (reduced depth here; full size under -m slow) from both ONNX
exporters and through torch.export / torch.compile, against ONNX Runtime and eager PyTorch; save
and load in a fresh process; bad inputs and bad saved models."""

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tilegraph as tg
from tilegraph.errors import GraphError, ModelFileError

pytestmark = [pytest.mark.needs_cc, pytest.mark.extended]  # long: in CI's extended run, not the default one
ort = pytest.importorskip("onnxruntime")
MODELS = ("resnet50", "mobilenet_v2", "bert", "gpt2")
TOLERANCE = 1e-3  # max |out - ref| <= 1e-3 * max |ref|


def _inputs(model, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for name in model.input_names:
        t = model.graph.type_of(name)
        out[name] = (rng.integers(0, 1000, t.shape).astype(t.dtype) if t.dtype == "int64"
                     else rng.standard_normal(t.shape).astype(t.dtype))
    return out


def _check_against_onnxruntime(path):
    model = tg.compile(path)
    inputs = _inputs(model)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = session.run(None, inputs)
    got = model.run(inputs)
    for name, e in zip(model.output_names, expected):
        error = np.abs(got[name] - e).max() / np.abs(e).max()
        assert error <= TOLERANCE, f"{path.name} {name}: relative error {error:.2e}"
    return model


@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
@pytest.mark.parametrize("name", MODELS)
def test_reduced_model_matches_onnxruntime(exported, name, exporter):
    model = _check_against_onnxruntime(exported(name, exporter))
    info = model.kernels
    assert info and all(k.workload_key and k.nodes for k in info) and not any(k.tuned for k in info)
    assert 0 < model.lower_bound_bytes <= model.arena_bytes


@pytest.mark.slow
@pytest.mark.parametrize("exporter", ["dynamo", "legacy"])
@pytest.mark.parametrize("name", MODELS)
def test_full_model_matches_onnxruntime(exported, name, exporter):
    _check_against_onnxruntime(exported(name, exporter, small=False))


@pytest.mark.parametrize("name", MODELS)
def test_from_torch_and_torch_compile_match_eager(name):
    torch = pytest.importorskip("torch")
    from tilegraph.graph import zoo

    module, args = zoo.torch_model(name, small=True)
    with torch.no_grad():
        expected = module(*args).numpy()
    got = tg.compile(module, example_inputs=args)(*[a.numpy() for a in args])[0]
    assert np.abs(got - expected).max() <= TOLERANCE * np.abs(expected).max()
    torch._dynamo.reset()
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a fallback to eager would warn: these models compile whole
        warnings.filterwarnings("ignore", message=".*(TF32|torchvision|deprecated).*")
        compiled = torch.compile(module, backend="tilegraph")
        with torch.no_grad():
            out = compiled(*args).numpy()
    assert np.abs(out - expected).max() <= TOLERANCE * np.abs(expected).max()


def test_torch_compile_falls_back_to_eager_with_one_warning():
    torch = pytest.importorskip("torch")

    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, 0) * 2  # cumsum has no graph op

    torch._dynamo.reset()
    x = torch.randn(5, 3)
    with pytest.warns(UserWarning, match="eager PyTorch.*aten.cumsum"):
        out = torch.compile(Odd(), backend="tilegraph")(x)
    torch.testing.assert_close(out, torch.cumsum(x, 0) * 2)


def test_save_load_in_a_fresh_process_gives_identical_outputs_without_compiling(exported, tmp_path):
    model = tg.compile(exported("bert", "dynamo"))
    inputs = _inputs(model, seed=4)
    expected = model.run(inputs)
    model.save(tmp_path / "bert.tg")
    np.savez(tmp_path / "io.npz", **inputs, **{f"out_{k}": v for k, v in expected.items()})
    code = f"""
import json, sys, numpy as np, tilegraph as tg, tilegraph.driver as driver
def refuse(*a, **k): raise AssertionError("compiled while loading")
driver.build = refuse; sys.modules["tilegraph.build.compile"].compile_c = refuse
m = tg.load({str(tmp_path / 'bert.tg')!r})
data = np.load({str(tmp_path / 'io.npz')!r})
got = m.run({{n: data[n] for n in m.input_names}})
print(json.dumps(all(np.array_equal(got[k], data['out_' + k]) for k in m.output_names)))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) is True


def test_loading_refuses_other_targets_versions_and_corrupt_dirs(exported, tmp_path):
    model = tg.compile(exported("resnet50", "dynamo"))
    path = model.save(tmp_path / "r.tg")
    with pytest.raises(ModelFileError, match="compiled for target .*recompile"):
        tg.load(path, target="cpu -isa=generic -cores=1")
    manifest = json.loads((path / "manifest.json").read_text())
    (path / "manifest.json").write_text(json.dumps({**manifest, "tilegraph_version": "0.0.1"}))
    with pytest.raises(ModelFileError, match="saved by tilegraph 0.0.1"):
        tg.load(path)
    (path / "manifest.json").write_text(json.dumps(manifest))
    (path / manifest["data"] / "kernels" / "k0.so").unlink()
    with pytest.raises(ModelFileError, match="missing"):
        tg.load(path)
    with pytest.raises(ModelFileError, match="not a saved tilegraph model"):
        tg.load(tmp_path)
    with pytest.raises(ModelFileError, match="cannot write"):
        model.save("/proc/no/such/dir.tg")


def test_wrong_inputs_are_named(exported):
    model = tg.compile(exported("bert", "dynamo"))
    ids = _inputs(model)["input_ids"]
    with pytest.raises(GraphError, match="has shape \\(1, 3\\)"):
        model(ids[:, :3])
    with pytest.raises(GraphError, match="has dtype int32.*astype"):
        model(ids.astype(np.int32))
    with pytest.raises(GraphError, match="unknown \\['ids'\\].*missing \\['input_ids'\\]"):
        model.run({"ids": ids})
    with pytest.raises(GraphError, match="takes 1 inputs"):
        model(ids, ids)
