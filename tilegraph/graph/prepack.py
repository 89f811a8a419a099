"""Prepacked weights: a kernel that packs a weight at every call (its schedule copies the operand into
a tile-ordered buffer) gets the packed weight instead, packed once when the model is compiled.

    graph, steps, kernels, packed = prepack_weights(graph, steps, kernels, target)

For each CPU kernel and each of its inputs that every step launching it binds to a graph constant,
lower/prepack.py splits the kernel into the packing nest and the rest; the packing kernel runs once
on each such constant, its result becomes a new graph constant (`<weight>:packed:<digest>`, the
digest naming the packing), and those steps launch the rest with it. The compiled model saves and
loads the packed constants like any other. The original weight stays in the graph (its nodes name
it), so a packed weight's memory is held twice.

    before: step matmul(x, w)          kernel: for j0: pack w -> w_global; compute(x, w_global)
    after:  step matmul(x, w:packed:…) kernel: for j0: compute(x, w:packed:…[j0 * slab + ...])

An optimisation only: a kernel whose split or build fails keeps its packing (logged, never raised).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np

from tilegraph.graph.ir import Graph, TensorType
from tilegraph.graph.model import Step
from tilegraph.lower.prepack import PackSplit, split_constant_packing
from tilegraph.runtime.kernel import Kernel
from tilegraph.runtime.prepacked import prepacked_kernels
from tilegraph.target import Target

log = logging.getLogger("tilegraph.graph.prepack")


def prepack_weights(graph: Graph, steps: Sequence[Step], kernels: Sequence[Any], target: Target,
                    workers: int = 2) -> tuple[Graph, list[Step], list[Any], tuple[str, ...]]:
    """(graph with the packed constants, steps reading them, kernels without their packing, the
    packed constants' names). Kernels with nothing to prepack come back as they were."""
    steps, kernels = list(steps), list(kernels)
    plans = []
    for index, kernel in enumerate(kernels):
        plan = _plan(graph, steps, index, kernel)
        if plan is not None:
            plans.append((index, *plan))
    if not plans:
        return graph, steps, kernels, ()
    with ThreadPoolExecutor(max(1, workers)) as pool:  # the C compiler runs in its own processes
        builds = list(pool.map(lambda p: _build(kernels[p[0]], p[1], p[2], target), plans))
    new_values: dict[str, TensorType] = {}
    new_constants: dict[str, np.ndarray] = {}
    for (index, position, split), built in zip(plans, builds):
        if built is None:
            continue
        pack, compute = built
        digest = hashlib.sha256(pack.source.encode()).hexdigest()[:10]
        renamed: dict[str, str] = {}
        for i, step in enumerate(steps):
            if step.kernel != index:
                continue
            weight = step.inputs[position]
            if weight not in renamed:
                name = renamed[weight] = f"{weight}:packed:{digest}"
                if name not in new_constants:
                    operand = np.ascontiguousarray(graph.constants[weight]).reshape(kernels[index].inputs[position].shape)
                    packed_dtype = split.packed.dtype.array_numpy
                    new_constants[name] = pack(operand, out=np.zeros(split.packed.shape, packed_dtype))
                    new_values[name] = TensorType(tuple(split.packed.shape), packed_dtype.name)
            steps[i] = replace(step, inputs=tuple(renamed[weight] if j == position else n
                                                  for j, n in enumerate(step.inputs)))
        kernels[index] = compute
    if not new_constants:
        return graph, steps, kernels, ()
    graph = replace(graph, values={**graph.values, **new_values}, constants={**graph.constants, **new_constants})
    return graph, steps, kernels, tuple(new_constants)


def _plan(graph: Graph, steps: Sequence[Step], index: int, kernel: Any) -> tuple[int, PackSplit] | None:
    """(input position, split) of the first input of `kernel` that every step launching it binds to
    a constant and that the kernel packs; None when there is none."""
    lowered = getattr(kernel, "lowered", None)
    if not isinstance(kernel, Kernel) or lowered is None:
        return None
    users = [s for s in steps if s.kernel == index]
    n_inputs = len(kernel.inputs)
    for position in range(n_inputs):
        if not users or not all(s.inputs[position] in graph.constants for s in users):
            continue
        try:
            split = split_constant_packing(lowered, lowered.params[position].name, n_inputs)
        except Exception as err:  # an optimisation: a split that fails leaves the kernel as it is
            log.warning("prepacking %s: %s: %s", kernel.entry, type(err).__name__, err)
            continue
        if split is not None:
            return position, split
    return None


def _build(kernel: Kernel, position: int, split: PackSplit, target: Target) -> tuple[Kernel, Kernel] | None:
    """(packing kernel, compute kernel), or None where either fails to build."""
    try:
        return prepacked_kernels(kernel.inputs, kernel.outputs, position, split, target,
                                 getattr(kernel, "dims", ()), getattr(kernel, "dims_limit", None))
    except Exception as err:  # an optimisation: the kernel keeps its packing
        log.warning("prepacking %s: %s: %s", kernel.entry, type(err).__name__, err)
        return None


__all__ = ["prepack_weights"]
