"""save_model / load_model: a compiled model as a directory a fresh process loads without compiling.

    model.save("resnet50.tg")       # manifest.json, weights.bin, kernels/k<i>.so (+ .c sources)
    model = load_model("resnet50.tg")

The manifest holds the format and tilegraph versions, the target (its string and fingerprint),
the graph (nodes, types; constants by offset into weights.bin), the kernels (entry points and
parameter types), the steps and the memory plan. Loading checks the versions and that this
machine's target has the same fingerprint, and refuses with one line otherwise. weights.bin is
memory-mapped read-only. A save writes a temporary directory and renames it into place.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.dtype import as_dtype
from tilegraph.errors import ModelFileError
from tilegraph.graph.ir import Graph, Node, TensorType
from tilegraph.graph.model import CompiledModel, Step
from tilegraph.graph.plan import MemoryPlan
from tilegraph.runtime.kernel import Kernel
from tilegraph.target import Target, as_target
from tilegraph.te.buffer import Buffer
from tilegraph.version import __version__

FORMAT = "tilegraph-compiled-model"
FORMAT_VERSION = 1
WEIGHT_ALIGN = 64


def _buffer_json(b: Buffer) -> dict:
    return {"name": b.name, "shape": list(b.shape), "dtype": b.dtype.name}


def save_model(model: CompiledModel, path: str | os.PathLike) -> Path:
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    except OSError as e:
        raise ModelFileError(f"{path}: cannot write the compiled model here: {e.strerror or e}") from None
    try:
        _write(model, work)
        if path.exists():
            if not (path / "manifest.json").is_file():
                raise ModelFileError(f"{path}: exists and is not a saved model; not overwriting it")
            shutil.rmtree(path)
        os.replace(work, path)
    except OSError as e:
        shutil.rmtree(work, ignore_errors=True)
        raise ModelFileError(f"{path}: cannot write the compiled model: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return path


def _write(model: CompiledModel, work: Path) -> None:
    graph = model.graph
    constants, offset = {}, 0
    with open(work / "weights.bin", "wb") as f:
        for name, array in graph.constants.items():
            pad = -offset % WEIGHT_ALIGN
            f.write(b"\0" * pad)
            offset += pad
            constants[name] = offset
            f.write(array.tobytes())
            offset += array.nbytes
    (work / "kernels").mkdir()
    kernels = []
    for i, kernel in enumerate(model.kernel_objects):
        shutil.copyfile(kernel.lib_path, work / "kernels" / f"k{i}.so")
        (work / "kernels" / f"k{i}.c").write_text(kernel.source)
        kernels.append({"library": f"kernels/k{i}.so", "entry": kernel.entry, "key": model.kernel_keys[i],
                        "tuned": model.tuned[i], "inputs": [_buffer_json(b) for b in kernel.inputs],
                        "outputs": [_buffer_json(b) for b in kernel.outputs]})
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "tilegraph_version": __version__,
        "target": str(model.target), "target_fingerprint": model.target.fingerprint,
        "graph": {"name": graph.name, "inputs": list(graph.inputs), "outputs": list(graph.outputs),
                  "values": {k: {"shape": list(v.shape), "dtype": v.dtype} for k, v in graph.values.items()},
                  "constants": constants,
                  "nodes": [{"op": n.op, "inputs": list(n.inputs), "outputs": list(n.outputs), "name": n.name,
                             "attrs": [[k, v] for k, v in n.attrs]} for n in graph.nodes]},
        "kernels": kernels,
        "steps": [{"kernel": s.kernel, "node": s.node, "inputs": list(s.inputs), "outputs": list(s.outputs),
                   "nodes": list(s.nodes)}
                  for s in model.steps],
        "views": model.views, "plan": model.plan.to_json(), "rewrites": list(model.rewrites),
    }
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1))


def load_model(path: str | os.PathLike, target: Any = "cpu") -> CompiledModel:
    path = Path(path)
    manifest_path = path / "manifest.json"
    if not manifest_path.is_file():
        raise ModelFileError(f"{path}: not a saved tilegraph model (no manifest.json)")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as e:
        raise ModelFileError(f"{path}: manifest.json is unreadable ({e})") from None
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise ModelFileError(f"{path}: saved in format {manifest.get('format')!r} v{manifest.get('format_version')}, "
                             f"this tilegraph reads {FORMAT} v{FORMAT_VERSION}; recompile the model")
    if manifest.get("tilegraph_version") != __version__:
        raise ModelFileError(f"{path}: saved by tilegraph {manifest.get('tilegraph_version')}, this is {__version__}; "
                             "recompile the model")
    here = as_target(target)
    if manifest["target_fingerprint"] != here.fingerprint:
        raise ModelFileError(f"{path}: compiled for target {manifest['target']} ({manifest['target_fingerprint']}), "
                             f"this machine's target is {here} ({here.fingerprint}); recompile the model here")
    saved_target = Target.from_string(manifest["target"])
    try:
        return _read(path, manifest, saved_target)
    except (KeyError, TypeError, ValueError, OSError) as e:
        raise ModelFileError(f"{path}: the saved model is incomplete or corrupt ({type(e).__name__}: {e})") from None


def _read(path: Path, manifest: dict, target: Target) -> CompiledModel:
    g = manifest["graph"]
    values = {k: TensorType(tuple(v["shape"]), v["dtype"]) for k, v in g["values"].items()}
    weights = np.memmap(path / "weights.bin", dtype=np.uint8, mode="r") if g["constants"] else None
    constants = {}
    for name, offset in g["constants"].items():
        t = values[name]
        constants[name] = np.ndarray(t.shape, dtype=t.dtype, buffer=weights, offset=offset)
    nodes = [Node(n["op"], tuple(n["inputs"]), tuple(n["outputs"]), [(k, v) for k, v in n["attrs"]], n["name"])
             for n in g["nodes"]]
    graph = Graph(g["name"], tuple(g["inputs"]), tuple(g["outputs"]), tuple(nodes), values, constants)

    def buffers(items: list[dict]) -> list[Buffer]:
        return [Buffer(b["name"], tuple(b["shape"]), as_dtype(b["dtype"])) for b in items]

    kernels = []
    for k in manifest["kernels"]:
        library = path / k["library"]
        if not library.is_file():
            raise ModelFileError(f"{path}: kernel library {k['library']} is missing")
        source = (library.with_suffix(".c")).read_text() if library.with_suffix(".c").is_file() else ""
        kernels.append(Kernel(library, k["entry"], buffers(k["inputs"]), buffers(k["outputs"]), source, target))
    steps = [Step(s["kernel"], s["node"], tuple(s["inputs"]), tuple(s["outputs"]), tuple(s.get("nodes", ())))
             for s in manifest["steps"]]
    return CompiledModel(graph, steps, kernels, [k["key"] for k in manifest["kernels"]],
                         [k["tuned"] for k in manifest["kernels"]], MemoryPlan.from_json(manifest["plan"]),
                         manifest["views"], target, manifest.get("rewrites", ()))


__all__ = ["save_model", "load_model", "FORMAT_VERSION"]
