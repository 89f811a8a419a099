"""save_model / load_model: a compiled model as a directory a fresh process loads without compiling.

    model.save("resnet50.tg")       # manifest.json + data-<id>/ (weights.bin, kernels/k<i>.so and .c)
    model = load_model("resnet50.tg")
    load_model("bert.tg", target="opencl")   # a GPU model: kernels/k<i>.cl (.cu) and their launches,
                                             # rebuilt for the device (graph/serialize_gpu.py)

A saved model contains native code: its kernel libraries are loaded into the process and run.
Load a model only from a source you would run a program from. What loading checks is against
accidents (a half-copied folder, a flipped byte, another model's file, a hand-edited manifest), not
against a malicious author:

- the manifest, field by field (graph/manifest.py), before anything is read;
- the format and tilegraph versions, and that this machine's target has the model's fingerprint;
- every file named stays inside the model's folder (no absolute paths, no `..`, no links out);
- the sha256 of weights.bin and of each library, recorded at save time, before it is mapped or
  loaded (a library is loaded from a private copy of the bytes that were checked);
- each library's own signature (the dtypes and sizes it was compiled for) against the buffers of
  its kernel, and those against the graph types of every step that launches it;
- the memory plan: every tensor inside the arena, the arena within this machine's memory.

Saving writes a new data folder, then replaces manifest.json (an atomic rename), then deletes what
the old manifest named: a process killed at any moment leaves the old model or the new one, each
loadable. A save goes only into a new path, an empty directory or a directory holding a saved model
and nothing else, never the working directory; anything else there is refused, not deleted.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from tilegraph.build.cache import sha256_file
from tilegraph.dtype import as_dtype
from tilegraph.errors import GraphError, ModelFileError, ResourceError
from tilegraph.graph.device_model import DeviceModel
from tilegraph.graph.dims import argument_dims
from tilegraph.graph.ir import Graph, Node, TensorType
from tilegraph.graph.manifest import DATA_FOLDER, check_manifest
from tilegraph.graph.model import CompiledModel, Step
from tilegraph.graph.plan import MemoryPlan
from tilegraph.graph.serialize_gpu import gpu_kernel_from_json, gpu_kernel_json
from tilegraph.runtime.backends import backend_for
from tilegraph.runtime.buckets import BucketedKernel
from tilegraph.runtime.kernel import Kernel, LibraryMismatch
from tilegraph.target import Target, as_target
from tilegraph.te.buffer import Buffer
from tilegraph.version import __version__

FORMAT = "tilegraph-compiled-model"
FORMAT_VERSION = 2
WEIGHT_ALIGN = 64
MANIFEST = "manifest.json"
# what a saved model's directory may hold (format 1 kept weights.bin and kernels/ at the top)
OWNED = {MANIFEST, "weights.bin", "kernels"}
TEMP_PREFIX = ".tilegraph-"


def _buffer_json(b: Buffer) -> dict:
    return {"name": b.name, "shape": list(b.shape), "dtype": b.dtype.name}


# ------------------------------------------------------------------------------------------ save
def save_model(model: CompiledModel, path: str | os.PathLike) -> Path:
    path = Path(path)
    existing = _check_save_target(path)
    try:
        if existing is None:  # a new path: build it beside, then one rename puts it in place
            path.parent.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{path.name}.", dir=path.parent))
            try:
                _write_into(model, work)
                _apply_umask(work)
                os.rename(work, path)
            except BaseException:
                shutil.rmtree(work, ignore_errors=True)
                raise
        else:
            old = _named_by_manifest(path)
            _write_into(model, path)
            _remove_stale(path, keep=_named_by_manifest(path), also=old)
    except OSError as e:
        raise ModelFileError(f"{path}: cannot write the compiled model: {e.strerror or e}") from None
    return path


def _check_save_target(path: Path) -> list[str] | None:
    """None for a new path; the entries of an empty or tilegraph-owned directory; else refuses."""
    resolved = path.resolve()
    cwd = Path.cwd().resolve()
    if resolved == cwd or resolved in cwd.parents:
        raise ModelFileError(f"{path}: is the working directory (or holds it); save the model into a folder of its own")
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_dir() or path.is_symlink():
        raise ModelFileError(f"{path}: exists and is not a saved model folder; not overwriting it")
    entries = sorted(p.name for p in path.iterdir())
    foreign = [e for e in entries if not _owned(e)]
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise ModelFileError(f"{path}: holds files a saved model does not ({shown}); not overwriting it")
    if entries and MANIFEST not in entries and any(not e.startswith(TEMP_PREFIX) for e in entries):
        raise ModelFileError(f"{path}: is not a saved model (no {MANIFEST}); not overwriting it")
    if MANIFEST in entries:
        try:
            manifest = json.loads((path / MANIFEST).read_text())
        except (OSError, ValueError, RecursionError):
            manifest = None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ModelFileError(f"{path}: its {MANIFEST} is not a tilegraph model's; not overwriting it")
    return entries


def _owned(entry: str) -> bool:
    return entry in OWNED or DATA_FOLDER.fullmatch(entry) is not None or entry.startswith(TEMP_PREFIX)


def _named_by_manifest(path: Path) -> set[str]:
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError, RecursionError):
        return set()
    data = manifest.get("data") if isinstance(manifest, dict) else None
    return {data} if isinstance(data, str) and DATA_FOLDER.fullmatch(data) else set()


def _remove_stale(path: Path, keep: set[str], also: set[str]) -> None:
    """Delete what a tilegraph save left in `path` that the current manifest does not name."""
    for entry in path.iterdir():
        if entry.name == MANIFEST or entry.name in keep or not _owned(entry.name):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _cpu_kernel_json(kernel: Any, data: Path, stem: str) -> dict:
    """A CPU kernel's library copied into `data`/kernels, and what loading it needs; a bucketed
    kernel (runtime/buckets.py) as its buckets' kernels with their ranges."""
    if isinstance(kernel, BucketedKernel):
        out = {"bucket_dim": kernel.dim_name, "ranges": [list(r) for r in kernel.ranges],
               "dims": _dims_json(kernel.dims),
               "inputs": [_buffer_json(b) for b in kernel.inputs], "outputs": [_buffer_json(b) for b in kernel.outputs],
               "buckets": [_cpu_kernel_json(k, data, f"{stem}_b{j}") for j, k in enumerate(kernel.kernels)]}
        if kernel.maps is not None:
            out["maps"] = [list(m) for m in kernel.maps]
        return out
    library = data / "kernels" / f"{stem}.so"
    shutil.copyfile(kernel.lib_path, library)
    (data / "kernels" / f"{stem}.c").write_text(kernel.source)
    out = {"library": f"kernels/{stem}.so", "sha256": sha256_file(library), "entry": kernel.entry,
           "inputs": [_buffer_json(b) for b in kernel.inputs], "outputs": [_buffer_json(b) for b in kernel.outputs]}
    if getattr(kernel, "dims", ()):
        out["dims"] = _dims_json(kernel.dims)
        out["dims_limit"] = dict(kernel.dims_limit)
    return out


def _dims_json(dims: Any) -> list[list]:
    return [[d.name, d.lower, d.upper] for d in dims]


def _cpu_kernel_from_json(k: dict, data: Path, target: Any) -> Any:
    from tilegraph.te.dims import dim

    def buffers(items: list[dict]) -> list[Buffer]:
        return [Buffer(b["name"], tuple(b["shape"]), as_dtype(b["dtype"])) for b in items]

    try:
        dims = [dim(name, hi, lo) for name, lo, hi in k.get("dims", ())]
        if "buckets" in k:
            maps = k.get("maps")
            return BucketedKernel(dims, k["bucket_dim"], [tuple(r) for r in k["ranges"]],
                                  [_cpu_kernel_from_json(b, data, target) for b in k["buckets"]],
                                  inputs=None if maps is None else buffers(k["inputs"]), maps=maps)
    except (TypeError, ValueError) as err:
        raise ModelFileError(f"manifest.json: a kernel's dims or buckets are malformed: {err}") from None
    library = _inside(data, k["library"], "kernel library")
    source_file = library.with_suffix(".c")
    source = source_file.read_text() if source_file.is_file() else ""
    return Kernel(library, k["entry"], buffers(k["inputs"]), buffers(k["outputs"]), source, target,
                  sha256=k["sha256"], dims=dims, dims_limit=k.get("dims_limit"))


def _write_into(model: CompiledModel, folder: Path) -> None:
    """A new data folder in `folder`, then its manifest.json replaced atomically."""
    data_name = f"data-{secrets.token_hex(6)}"
    data = folder / data_name
    data.mkdir()
    weights = _write_weights(model.graph, data / "weights.bin")
    (data / "kernels").mkdir()
    kernels = []
    gpu = backend_for(model.target).is_gpu
    for i, kernel in enumerate(model.kernel_objects):
        if gpu:  # the program's source and launches (graph/serialize_gpu.py)
            kernels.append({**gpu_kernel_json(kernel, data, i), "key": model.kernel_keys[i], "tuned": model.tuned[i]})
            continue
        kernels.append({**_cpu_kernel_json(kernel, data, f"k{i}"), "key": model.kernel_keys[i], "tuned": model.tuned[i]})
    graph = model.graph
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "tilegraph_version": __version__,
        "target": str(model.target), "target_fingerprint": model.target.fingerprint,
        "data": data_name, "weights": weights,
        "graph": {"name": graph.name, "inputs": list(graph.inputs), "outputs": list(graph.outputs),
                  "values": {k: {"shape": list(v.shape), "dtype": v.dtype} for k, v in graph.values.items()},
                  "constants": weights.pop("offsets"),
                  "nodes": [{"op": n.op, "inputs": list(n.inputs), "outputs": list(n.outputs), "name": n.name,
                             "attrs": [[k, v] for k, v in n.attrs]} for n in graph.nodes],
                  "dims": {k: list(v) for k, v in graph.dims.items()},
                  "input_dims": {k: list(v) for k, v in graph.input_dims.items()}},
        "kernels": kernels,
        "steps": [{"kernel": s.kernel, "node": s.node, "inputs": list(s.inputs), "outputs": list(s.outputs),
                   "nodes": list(s.nodes)}
                  for s in model.steps],
        "views": model.views, "plan": model.plan.to_json(), "rewrites": list(model.rewrites),
        "precision": getattr(model, "precision", "fp32"),
    }
    fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}manifest.", dir=folder)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(manifest, indent=1))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, folder / MANIFEST)  # the moment the new model replaces the old one
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_weights(graph: Graph, path: Path) -> dict:
    offsets, offset = {}, 0
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        for name, array in graph.constants.items():
            pad = b"\0" * (-offset % WEIGHT_ALIGN)
            f.write(pad)
            digest.update(pad)
            offset += len(pad)
            offsets[name] = offset
            data = np.ascontiguousarray(array).tobytes()
            f.write(data)
            digest.update(data)
            offset += len(data)
    return {"bytes": offset, "sha256": digest.hexdigest(), "offsets": offsets}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _apply_umask(folder: Path) -> None:
    """mkdtemp makes 0700 folders; a saved model gets the permissions a plain mkdir would give."""
    mode = 0o777 & ~_umask()
    for root, dirs, _ in os.walk(folder):
        for d in dirs:
            os.chmod(Path(root) / d, mode)
    os.chmod(folder, mode)


# ------------------------------------------------------------------------------------------ load
def load_model(path: str | os.PathLike, target: Any = "cpu") -> CompiledModel:
    path = Path(path)
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise ModelFileError(f"{path}: not a saved tilegraph model (no {MANIFEST})")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError, RecursionError) as e:
        raise ModelFileError(f"{path}: {MANIFEST} is unreadable ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(manifest, dict):
        raise ModelFileError(f"{path}: {MANIFEST} is not a JSON object")
    if manifest.get("format") != FORMAT or manifest.get("format_version") != FORMAT_VERSION:
        raise ModelFileError(f"{path}: saved in format {manifest.get('format')!r} v{manifest.get('format_version')}, "
                             f"this tilegraph reads {FORMAT} v{FORMAT_VERSION}; recompile the model")
    if manifest.get("tilegraph_version") != __version__:
        raise ModelFileError(f"{path}: saved by tilegraph {manifest.get('tilegraph_version')}, this is {__version__}; "
                             "recompile the model")
    try:
        check_manifest(manifest)
    except ModelFileError as e:
        raise ModelFileError(f"{path}: {e}") from None
    here = as_target(target)
    if manifest["target_fingerprint"] != here.fingerprint:
        raise ModelFileError(f"{path}: compiled for target {manifest['target']} ({manifest['target_fingerprint']}), "
                             f"this machine's target is {here} ({here.fingerprint}); recompile the model here")
    try:
        saved_target = Target.from_string(manifest["target"])
        return _read(path, manifest, saved_target)
    except (ModelFileError, ResourceError):
        raise
    except LibraryMismatch as e:
        raise ModelFileError(f"{path}: {e}") from None
    except (GraphError, KeyError, TypeError, ValueError, OSError) as e:
        raise ModelFileError(f"{path}: the saved model is incomplete or corrupt ({type(e).__name__}: {e})") from None


def _inside(folder: Path, relative: str, what: str) -> Path:
    """folder/relative, refused unless it resolves inside `folder` (no `..`, no links out)."""
    candidate = folder / relative
    try:
        resolved = candidate.resolve(strict=True)
    except (OSError, RuntimeError):
        raise ModelFileError(f"{folder}: {what} {relative} is missing") from None
    if not resolved.is_relative_to(folder.resolve()):
        raise ModelFileError(f"{folder}: {what} {relative} lies outside the model's folder")
    return resolved


def _read(path: Path, manifest: dict, target: Target) -> CompiledModel:
    data = _inside(path, manifest["data"], "data folder")
    g = manifest["graph"]
    values = {k: TensorType(tuple(v["shape"]), v["dtype"]) for k, v in g["values"].items()}
    constants = _read_weights(data, manifest["weights"], g["constants"], values)
    nodes = [Node(n["op"], tuple(n["inputs"]), tuple(n["outputs"]), [(k, v) for k, v in n["attrs"]], n["name"])
             for n in g["nodes"]]
    graph = Graph(g["name"], tuple(g["inputs"]), tuple(g["outputs"]), tuple(nodes), values, constants,
                  {k: tuple(v) for k, v in g.get("dims", {}).items()},
                  {k: tuple(v) for k, v in g.get("input_dims", {}).items()}).verify()

    def buffers(items: list[dict]) -> list[Buffer]:
        return [Buffer(b["name"], tuple(b["shape"]), as_dtype(b["dtype"])) for b in items]

    steps = [Step(s["kernel"], s["node"], tuple(s["inputs"]), tuple(s["outputs"]), tuple(s.get("nodes", ())))
             for s in manifest["steps"]]
    _check_steps(manifest["kernels"], steps, graph)
    plan = MemoryPlan.from_json(manifest["plan"])
    _check_plan(plan, graph, manifest["views"], path)
    kernels = []
    if backend_for(target).is_gpu:
        kernels = [gpu_kernel_from_json(k, data, target, _inside) for k in manifest["kernels"]]
        return DeviceModel(graph, steps, kernels, [k["key"] for k in manifest["kernels"]],
                           [k["tuned"] for k in manifest["kernels"]], plan, manifest["views"], target,
                           manifest.get("rewrites", ()))
    kernels = [_cpu_kernel_from_json(k, data, target) for k in manifest["kernels"]]
    model = CompiledModel(graph, steps, kernels, [k["key"] for k in manifest["kernels"]],
                          [k["tuned"] for k in manifest["kernels"]], plan, manifest["views"], target,
                          manifest.get("rewrites", ()))
    model.precision = manifest.get("precision") or _saved_precision(graph)
    return model


def _saved_precision(graph: Graph) -> str:
    """A manifest written before the precision was saved: bf16 where products sum bfloat16 in float32
    (a QDQ model's int32 products were compiled at the default precision)."""
    return "bf16" if any(node.attr("accumulate", None) == "float32" for node in graph.nodes) else "fp32"


def _read_weights(data: Path, weights: dict, offsets: dict[str, int], values: dict[str, TensorType]
                  ) -> dict[str, np.ndarray]:
    path = _inside(data, "weights.bin", "weights file")
    size = path.stat().st_size
    if size != weights["bytes"]:
        raise ModelFileError(f"{data.parent}: weights.bin has {size} bytes, the manifest recorded {weights['bytes']}")
    if sha256_file(path) != weights["sha256"]:
        raise ModelFileError(f"{data.parent}: weights.bin was changed or damaged after saving (sha256 differs)")
    mapped = np.memmap(path, dtype=np.uint8, mode="r") if offsets and size else None
    constants = {}
    for name, offset in offsets.items():
        t = values.get(name)
        if t is None:
            raise ModelFileError(f"{data.parent}: constant {name!r} has no type in the manifest")
        if offset + t.nbytes > size:
            raise ModelFileError(f"{data.parent}: constant {name!r} lies past the end of weights.bin")
        constants[name] = np.ndarray(t.shape, dtype=t.dtype, buffer=mapped if t.nbytes else np.empty(0, np.uint8),
                                     offset=offset if t.nbytes else 0)
    return constants


def _check_steps(kernels: list[dict], steps: list[Step], graph: Graph) -> None:
    """Each step's tensors have its kernel's buffer dtypes and sizes (the library's own signature is
    checked against those buffers when it loads)."""
    for i, step in enumerate(steps):
        k = kernels[step.kernel]
        # a bucketed kernel: the inputs of its dispatcher (its buckets' own, or theirs with each's packed copies)
        for role, names, bufs in (("inputs", step.inputs, k["inputs"]), ("outputs", step.outputs, k["outputs"])):
            if len(names) != len(bufs):
                raise ModelFileError(f"manifest.json: steps[{i}] passes {len(names)} {role} to kernel {step.kernel}, "
                                     f"which takes {len(bufs)}")
            for name, buf in zip(names, bufs):
                held = argument_dims(name)
                if held is not None:  # a dims argument: the values of these graph dims, int32
                    if any(d not in graph.dims for d in held) or buf["dtype"] != "int32" or buf["shape"] != [len(held)]:
                        raise ModelFileError(f"manifest.json: steps[{i}] passes dims {name!r} where kernel "
                                             f"{step.kernel} takes {buf['dtype']}{buf['shape']}")
                    continue
                t = graph.values.get(name)
                if t is None:
                    raise ModelFileError(f"manifest.json: steps[{i}] names an unknown tensor {name!r}")
                if t.dtype != buf["dtype"] or t.size != int(np.prod(buf["shape"], dtype=np.int64)):
                    raise ModelFileError(f"manifest.json: steps[{i}] passes {name!r} ({t}) where kernel {step.kernel} "
                                         f"takes {buf['dtype']}{buf['shape']}")


def _check_plan(plan: MemoryPlan, graph: Graph, views: dict[str, str], path: Path) -> None:
    from tilegraph.testing.data import available_memory

    limit = available_memory()
    if limit is not None and plan.arena_bytes > limit:
        raise ResourceError(f"{path}: the model's arena needs {plan.arena_bytes / 2**30:.1f} GiB, this machine has "
                            f"{limit / 2**30:.1f} GiB available")
    for name, offset in plan.offsets.items():
        t = graph.values.get(name)
        if t is None or offset + t.nbytes > plan.arena_bytes:
            raise ModelFileError(f"manifest.json: plan.offsets.{name} puts a tensor outside the arena")
    for view, source in views.items():
        if view not in graph.values or source not in graph.values:
            raise ModelFileError(f"manifest.json: views.{view} names an unknown tensor")


__all__ = ["save_model", "load_model", "FORMAT_VERSION"]
