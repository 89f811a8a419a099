"""DeviceModel: a compiled model on a GPU target whose tensors stay in device memory.

    model = tg.compile(graph, target="opencl")    # or "cuda" (with torch on an NVIDIA GPU)
    outs = model(x)                                # numpy in, numpy out, as CompiledModel
    model.launch_mode                              # "graph" once a CUDA model replays one graph

At the first call the model allocates one device arena laid out by the memory plan (offsets
aligned for device sub-buffers), a region of it per planned tensor (a view shares its source's),
and uploads every constant once. A call then uploads the inputs, launches every kernel on device
buffers in order, and downloads only the outputs: nothing crosses to the host between kernels.

On CUDA the first call launches kernel by kernel and then records the launches as one CUDA graph;
later calls replay it (one host call for the whole model). The graph is kept only if its replay of
the first call's inputs gives the first call's outputs bit for bit; otherwise, or where the capture
fails, every call launches kernel by kernel (`graph_note` says why). `device_graph = False` turns
replay off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tilegraph.dtype import poisoned
from tilegraph.graph.model import CompiledModel
from tilegraph.runtime.device_memory import DeviceMemory, device_memory


class DeviceModel(CompiledModel):
    """CompiledModel whose arena lives on the device (the host arena is unused)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._memory: DeviceMemory | None = None
        self._regions: dict[str, Any] = {}
        self._device_steps: list[Any] = []  # each step's launch, its device arguments bound once
        self.device_graph = True  # replay the launches as one graph where the device has them (CUDA)
        self._replay: Callable[[], None] | None = None
        self._graph_tried = False
        self.graph_note = ""  # why the launches are not replayed as a graph, where they are not

    @property
    def launch_mode(self) -> str:
        """"graph" (one replay a call) or "kernels" (a launch per kernel)."""
        return "graph" if self.device_graph and self._replay is not None else "kernels"

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
            replay = self._replay if self.device_graph else None
            out = self._launch(memory, arrays, replay)
            if self.device_graph and not self._graph_tried:
                self._graph_tried = True
                self._replay = self._captured(memory, arrays, out)
            return out

    def summary(self) -> str:
        return super().summary() + " (tensors in device memory)"

    # ---- internals -------------------------------------------------------------------------
    def _launch(self, memory: DeviceMemory, arrays: Mapping[str, np.ndarray],
                replay: Callable[[], None] | None) -> dict[str, np.ndarray]:
        for name, array in arrays.items():
            memory.upload(self._handle(name), array)
        if replay is not None:
            replay()
        else:
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

    def _captured(self, memory: DeviceMemory, arrays: Mapping[str, np.ndarray],
                  expected: dict[str, np.ndarray]) -> Callable[[], None] | None:
        """The launches as one replayable graph, checked against the call that just ran kernel by
        kernel: its outputs poisoned first, the same inputs must give the same outputs bit for bit
        (a replay that launched nothing would leave the poison); None where that is not so."""
        try:
            replay = memory.capture(lambda: self._prepare_steps(memory))
        except Exception as e:  # no graph is a slower model, never a failed one
            self.graph_note = f"graph capture failed: {_first_line(e)}"
            return None
        if replay is None:
            self.graph_note = f"{self.target.kind} has no graphs of launches"
            return None
        try:
            for name in self.graph.outputs:
                t = self.graph.type_of(name)
                memory.upload(self._handle(name), poisoned(t.shape, t.dtype))
            again = self._launch(memory, arrays, replay)
        except Exception as e:
            self.graph_note = f"graph replay failed: {_first_line(e)}"
            return None
        differ = [n for n in expected if not np.array_equal(expected[n], again[n], equal_nan=True)]
        if differ:
            self.graph_note = f"the graph's replay differs from the launches' outputs ({', '.join(differ)})"
            return None
        return replay

    def _handle(self, name: str) -> Any:
        return self._regions[self._root(name)]

    def _prepare_steps(self, memory: DeviceMemory) -> list[Callable[[], None]]:
        return [memory.prepare(self.kernel_objects[s.kernel], [self._handle(n) for n in (*s.inputs, *s.outputs)])
                for s in self.steps]

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
        self._device_steps = self._prepare_steps(memory)
        self._memory = memory
        return memory


def _first_line(err: Exception) -> str:
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0][:200]}" if text else type(err).__name__


__all__ = ["DeviceModel"]
