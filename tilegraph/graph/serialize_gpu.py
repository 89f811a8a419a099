"""A GPU model's kernels in a saved model: the printed program and what its launches need.

    entry = gpu_kernel_json(kernel, data, i)   # writes kernels/k<i>.cl (or .cu), returns the manifest entry
    kernel = gpu_kernel_from_json(entry, data, target)   # the same kernel, rebuilt for the device

A GPU kernel is its source (compiled by the device's driver on load, or by nvcc through the build
cache) plus its launches: the program's parameters and temporaries, and per device kernel its entry
name, the global buffers it takes, its grid and block and its shared memory. The loop IR the
program was lowered from is not saved: launching does not read it. The kernel is rebuilt through
the backend registry's loader (tune/kernel_loader.py), as a measurement worker rebuilds one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilegraph.build.cache import sha256_file
from tilegraph.dtype import as_dtype
from tilegraph.errors import ModelFileError
from tilegraph.loop.ir import Buffer, Func, Seq
from tilegraph.runtime.backends import backend_for
from tilegraph.target import Target

SUFFIX = {"opencl": ".cl", "cuda": ".cu"}


def _buffer_json(b: Buffer) -> dict:
    return {"name": b.name, "shape": list(b.shape), "dtype": b.dtype.name}


def _buffer(d: dict) -> Buffer:
    return Buffer(d["name"], tuple(d["shape"]), as_dtype(d["dtype"]))


def gpu_kernel_json(kernel: Any, data: Path, index: int) -> dict:
    """Write the kernel's source under `data`/kernels and return its manifest entry (without key/tuned)."""
    program = kernel.program
    entries = tuple(getattr(kernel, "entries", ())) or tuple(k.func.name for k in program.kernels)
    name = f"kernels/k{index}{SUFFIX.get(kernel.target.kind, '.gpu')}"
    (data / name).write_text(kernel.source)
    return {
        "source": name, "sha256": sha256_file(data / name), "entry": program.name,
        "inputs": [_buffer_json(b) for b in kernel.inputs], "outputs": [_buffer_json(b) for b in kernel.outputs],
        "gpu": {
            "entries": list(entries),
            "temporaries": [_buffer_json(b) for b in program.temporaries],
            "launches": [{"name": k.func.name, "params": [b.name for b in k.func.params], "grid": list(k.grid),
                          "block": list(k.block), "shared_bytes": int(k.shared_bytes), "registers": int(k.registers)}
                         for k in program.kernels],
            "shapes": {n: list(s) for n, s in dict(program.attrs.get("shapes", {})).items()},
        },
    }


def gpu_kernel_from_json(entry: dict, data: Path, target: Target, inside: Any) -> Any:
    """The kernel of a manifest entry, rebuilt for `target`'s device; `inside(folder, relative,
    what)` resolves a path confined to the data folder (serialize._inside)."""
    from tilegraph.codegen.gpu_dialect import GpuSource
    from tilegraph.lower.gpu.split_host_device import DeviceKernel, GpuProgram
    from tilegraph.tune.kernel_loader import GpuKernelSpec, load_kernel
    from tilegraph.tune.result import BuildResult

    path = inside(data, entry["source"], "kernel source")
    if sha256_file(path) != entry["sha256"]:
        raise ModelFileError(f"{entry['source']} does not match its recorded sha256 (modified or corrupt)")
    gpu = entry["gpu"]
    inputs, outputs = [_buffer(b) for b in entry["inputs"]], [_buffer(b) for b in entry["outputs"]]
    params = (*inputs, *outputs)
    temporaries = tuple(_buffer(b) for b in gpu["temporaries"])
    by_name = {b.name: b for b in (*params, *temporaries)}
    launches = []
    for k in gpu["launches"]:
        missing = [p for p in k["params"] if p not in by_name]
        if missing or len(k["grid"]) != 3 or len(k["block"]) != 3:
            raise ModelFileError(f"kernel {k['name']}: launch names unknown buffers {missing} or bad dimensions")
        func = Func(k["name"], tuple(by_name[p] for p in k["params"]), Seq(()))  # launching reads no body
        launches.append(DeviceKernel(func, tuple(k["grid"]), tuple(k["block"]), k["shared_bytes"], k["registers"]))
    shapes = {n: tuple(s) for n, s in gpu["shapes"].items()}
    program = GpuProgram(entry["entry"], params, temporaries, tuple(launches), Func(entry["entry"], params, Seq(())),
                         {"shapes": shapes} if shapes else {})
    source = GpuSource(path.read_text(), tuple(gpu["entries"]), program)
    backend = backend_for(target)
    build = BuildResult(True, entry=entry["entry"], loader=str(backend.loader),
                        payload=GpuKernelSpec(source, len(inputs), target))
    return load_kernel(build)


__all__ = ["gpu_kernel_from_json", "gpu_kernel_json"]
