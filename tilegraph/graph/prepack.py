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
    packed constants' names). Kernels with nothing to prepack come back as they were. A bucketed
    kernel (runtime/buckets.py) prepacks bucket by bucket: each bucket reads the packed copy its
    own packing makes (buckets packing alike share one), passed as extra inputs before the dims."""
    steps, kernels = list(steps), list(kernels)
    plans = []  # (kernel index, bucket or None, the kernel to split, position, split)
    for index, kernel in enumerate(kernels):
        parts = [(b, k) for b, k in enumerate(kernel.kernels)] if _bucketed(kernel) else [(None, kernel)]
        for bucket, part in parts:
            plan = _plan(graph, steps, index, part)
            if plan is not None:
                plans.append((index, bucket, part, *plan))
    if not plans:
        return graph, steps, kernels, ()
    with ThreadPoolExecutor(max(1, workers)) as pool:  # the C compiler runs in its own processes
        builds = list(pool.map(lambda p: _build(p[2], p[3], p[4], target), plans))
    packed = _Packed(graph)
    by_bucketed: dict[int, dict[int, tuple[int, PackSplit, Any, Any]]] = {}
    for (index, bucket, _, position, split), built in zip(plans, builds):
        if built is None:
            continue
        if bucket is not None:
            by_bucketed.setdefault(index, {})[bucket] = (position, split, *built)
            continue
        pack, compute = built
        digest = _digest(pack)
        for i, step in enumerate(steps):
            if step.kernel == index:
                name = packed.add(step.inputs[position], digest, kernels[index].inputs[position].shape, pack, split)
                steps[i] = replace(step, inputs=tuple(name if j == position else n for j, n in enumerate(step.inputs)))
        kernels[index] = compute
    for index, parts in by_bucketed.items():
        kernels[index] = _bucketed_prepacked(index, kernels[index], parts, steps, packed)
    if not packed.constants:
        return graph, steps, kernels, ()
    graph = replace(graph, values={**graph.values, **packed.values}, constants={**graph.constants, **packed.constants})
    return graph, steps, kernels, tuple(packed.constants)


class _Packed:
    """The packed constants made so far, each once (`<weight>:packed:<digest>`)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.values: dict[str, TensorType] = {}
        self.constants: dict[str, np.ndarray] = {}

    def add(self, weight: str, digest: str, shape: tuple[int, ...], pack: Any, split: PackSplit) -> str:
        name = f"{weight}:packed:{digest}"
        if name not in self.constants:
            operand = np.ascontiguousarray(self.graph.constants[weight]).reshape(shape)
            packed_dtype = split.packed.dtype.array_numpy
            self.constants[name] = pack(operand, out=np.zeros(split.packed.shape, packed_dtype))
            self.values[name] = TensorType(tuple(split.packed.shape), packed_dtype.name)
        return name


def _digest(pack: Any) -> str:
    return hashlib.sha256(pack.source.encode()).hexdigest()[:10]


def _bucketed(kernel: Any) -> bool:
    from tilegraph.runtime.buckets import BucketedKernel

    return isinstance(kernel, BucketedKernel) and kernel.maps is None


def _bucketed_prepacked(index: int, kernel: Any, parts: dict[int, tuple[int, PackSplit, Any, Any]],
                        steps: list[Step], packed: _Packed) -> Any:
    """A bucketed kernel whose buckets in `parts` ({bucket: (position, split, pack, compute)}) read
    their packed weights: one extra input per distinct packing, before the dims input."""
    from tilegraph.runtime.buckets import BucketedKernel

    originals = list(kernel.inputs[:-1])
    slots: dict[tuple[int, str], int] = {}  # (weight position, packing digest) -> extra input
    extra = []
    for position, split, pack, _ in parts.values():
        key = (position, _digest(pack))
        if key not in slots:
            slots[key] = len(originals) + len(extra)
            extra.append((key, split, pack))
    inputs = [*originals, *(split.packed for _, split, _ in extra), kernel.inputs[-1]]
    dims_slot = len(inputs) - 1
    maps, computes = [], []
    for b, part in enumerate(kernel.kernels):
        own = list(range(len(originals))) + [dims_slot]
        if b in parts:
            position, _, pack, compute = parts[b]
            own[position] = slots[(position, _digest(pack))]
            computes.append(compute)
        else:
            computes.append(part)
        maps.append(own)
    for i, step in enumerate(steps):
        if step.kernel == index:
            names = [packed.add(step.inputs[position], digest, kernel.inputs[position].shape, pack, split)
                     for (position, digest), split, pack in extra]
            steps[i] = replace(step, inputs=(*step.inputs[:-1], *names, step.inputs[-1]))
    return BucketedKernel(kernel.dims, kernel.dim_name, kernel.ranges, computes, inputs=inputs, maps=maps)


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
