"""Random inputs for a workload: deterministic per seed, C-contiguous, in each input's dtype.

Floats are standard normal, except arguments that must be positive (a variance, a divisor; see
reference.POSITIVE_ARGS), which are uniform in [0.5, 1.5). Integers are uniform in [-4, 4].
"""

from __future__ import annotations

import numpy as np

from tilegraph.ops._common import attr, op_boundary
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


def random_inputs(wl: Workload, seed: int = 0) -> list[np.ndarray]:
    """One array per workload input, in order."""
    rng = np.random.default_rng(seed)
    positive = positive_inputs(wl)
    arrays = []
    for i, t in enumerate(wl.inputs):
        dtype = t.dtype.numpy
        if t.dtype.is_float:
            values = rng.uniform(0.5, 1.5, t.shape) if i in positive else rng.standard_normal(t.shape)
        elif t.dtype.kind == "bool":
            values = rng.random(t.shape) < 0.5
        else:
            values = rng.integers(-4, 5, t.shape)
        arrays.append(np.ascontiguousarray(values, dtype=dtype))
    return arrays
