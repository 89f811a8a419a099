"""Random inputs for a workload: deterministic per seed, C-contiguous, in each input's dtype.

Floats are standard normal, except arguments that must be positive (a variance, a divisor; see
reference.POSITIVE_ARGS), which are uniform in [0.5, 1.5). Integers are uniform in [-4, 4].
"""

from __future__ import annotations

import math
import os

import numpy as np

from tilegraph.errors import ResourceError, shorten
from tilegraph.ops._common import attr, op_boundary
from tilegraph.te.dims import dims_array
from tilegraph.te.workload import Workload
from tilegraph.testing.reference import POSITIVE_ARGS


def positive_inputs(wl: Workload) -> set[int]:
    """Positions (in wl.inputs) of the inputs some op needs to be positive."""
    needs: set[int] = set()
    for t in wl.computes:
        wanted = POSITIVE_ARGS.get(attr(t, "ref_op"), frozenset())  # type: ignore[arg-type]
        if not wanted:
            continue
        boundary = op_boundary(t)
        for arg_name, position in attr(t, "ref_args", ()):  # type: ignore[attr-defined]
            if arg_name in wanted:
                needs.add(id(boundary[position]))
    return {i for i, t in enumerate(wl.inputs) if id(t) in needs}


def bytes_needed(wl: Workload) -> int:
    """Memory to test and time `wl`: its inputs and outputs, plus the float64 reference of every
    tensor (tests and the tuner's check compute one)."""
    total = 0
    io = {id(t) for t in (*wl.inputs, *wl.outputs)}
    for t in wl.tensors:
        n = math.prod(t.shape)
        total += n * 8 + (n * t.dtype.itemsize if id(t) in io else 0)
    return total


def available_memory() -> int | None:
    """Bytes the OS says can be allocated without swapping (MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def require_memory(wl: Workload) -> None:
    """Refuse, before allocating anything, a workload whose arrays do not fit in this machine."""
    need, have = bytes_needed(wl), available_memory()
    if have is not None and need > have:
        raise ResourceError(f"workload {wl.op_name} {_shapes(wl)} needs about {need / 2**30:.1f} GiB for its arrays; "
                            f"{have / 2**30:.1f} GiB is available")


def _shapes(wl: Workload) -> str:
    return shorten(", ".join(f"{t.name}{list(t.shape)}" for t in (*wl.inputs, *wl.outputs)), 100)


def random_inputs(wl: Workload, seed: int = 0) -> list[np.ndarray]:
    """One array per workload input, in order (after checking that the workload fits in memory)."""
    require_memory(wl)
    rng = np.random.default_rng(seed)
    positive = positive_inputs(wl)
    arrays = []
    for i, t in enumerate(wl.inputs):
        if t is wl.dims_input:  # the run-time dims where the tuner measures (a bucket's upper bound)
            arrays.append(dims_array(wl.dims, wl.tuning_dims))
            continue
        dtype = t.dtype.array_numpy  # bfloat16: ml_dtypes' type, so the values convert (not their bits)
        if t.dtype.is_float:
            values = rng.uniform(0.5, 1.5, t.shape) if i in positive else rng.standard_normal(t.shape)
        elif t.dtype.kind == "bool":
            values = rng.random(t.shape) < 0.5
        else:
            values = rng.integers(-4, 5, t.shape)
        arrays.append(np.ascontiguousarray(values, dtype=dtype))
    return arrays
