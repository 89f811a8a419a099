"""DeviceModel: a compiled model on a GPU target whose tensors stay in device memory.

    model = tg.compile(graph, target="opencl")    # or "cuda" (with torch on an NVIDIA GPU)
    outs = model(x)                                # numpy in, numpy out, as CompiledModel

At the first call the model allocates one device arena laid out by the memory plan (offsets
aligned for device sub-buffers), a region of it per planned tensor (a view shares its source's),
and uploads every constant once. A call then uploads the inputs, launches every kernel on device
buffers in order, and downloads only the outputs: nothing crosses to the host between kernels.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from tilegraph.graph.model import CompiledModel
from tilegraph.runtime.device_memory import DeviceMemory, device_memory


class DeviceModel(CompiledModel):
    """CompiledModel whose arena lives on the device (the host arena is unused)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._memory: DeviceMemory | None = None
        self._regions: dict[str, Any] = {}
        self._device_steps: list[Any] = []  # each step's launch, its device arguments bound once

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if not isinstance(inputs, Mapping):
            return super().run(inputs)  # the one error message
        unknown = sorted(set(inputs) - set(self.graph.inputs))
        missing = [n for n in self.graph.inputs if n not in inputs]
        if unknown or missing:
            return super().run(inputs)  # the one error message
        arrays = {name: self._checked(name, inputs[name]) for name in self.graph.inputs}
        with self._lock:
            memory = self._bind_device()
            for name, array in arrays.items():
                memory.upload(self._handle(name), array)
            for step in self._device_steps:
                step()
            memory.synchronize()
            out = {}
            for name in self.graph.outputs:
                t = self.graph.type_of(name)
                host = np.empty(t.shape, dtype=t.dtype)
                memory.download(self._handle(name), host)
                out[name] = host
            return out

    def summary(self) -> str:
        return super().summary() + " (tensors in device memory)"

    # ---- internals -------------------------------------------------------------------------
    def _handle(self, name: str) -> Any:
        return self._regions[self._root(name)]

    def _bind_device(self) -> DeviceMemory:
        if self._memory is not None:
            return self._memory
        memory = device_memory(self.target)
        arena = memory.alloc(self.plan.arena_bytes)
        regions: dict[str, Any] = {}
        for name in self.graph.values:
            root = self._root(name)
            if root in regions:
                continue
            if root in self.graph.constants:
                regions[root] = memory.constant(self.graph.constants[root])
            elif root in self.plan.offsets:
                regions[root] = memory.region(arena, self.plan.offsets[root], max(1, self.graph.values[root].nbytes))
        self._regions = regions
        self._device_steps = [memory.prepare(self.kernel_objects[s.kernel], [self._handle(n) for n in (*s.inputs, *s.outputs)])
                              for s in self.steps]
        self._memory = memory
        return memory


__all__ = ["DeviceModel"]
