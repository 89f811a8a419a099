"""SpecializedModel: an ONNX model whose shapes depend on input values, compiled per value seen.

    model = tg.compile(onnx_model)          # ReduceSum's axes is a graph input, not a constant
    model.run({"x": x, "axes": np.array([1])})    # compiles the variant for axes=[1], runs it
    model.run({"x": x2, "axes": np.array([1])})   # reuses it
    model.variant({"axes": [1]})            # the CompiledModel for those values (to save it, say)

tilegraph compiles static shapes, so a tensor that decides a shape (Reshape's shape, a reduction's
axes, Resize's sizes, Slice's starts) must be known when kernels are made. When such a tensor is
computed from model inputs, compile_model returns this wrapper instead of refusing: each call binds
those inputs' values as constants (frontends.onnx_inputs.bind_inputs) and runs the CompiledModel made for
them, compiled on the first call with those values (as torch.compile specialises on an integer).
Only the deciding inputs are keys, the others are ordinary inputs of every variant. At most
MAX_VARIANTS value sets are kept; one more is a GraphError naming the inputs, never a silent
recompilation storm. Compiling with `values=` binds them up front (one CompiledModel, savable).
Every option given to compile_model applies to each variant as it compiles (a tuning budget too:
the first run with new values tunes then).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tilegraph.errors import GraphError, RunTimeValueError

MAX_VARIANTS = 8  # torch.compile's default cache_size_limit is 8 too


class SpecializedModel:
    def __init__(self, proto: Any, value_inputs: tuple[str, ...], compile_bound: Callable[[Mapping[str, Any]], Any],
                 reason: str):
        from tilegraph.graph.frontends.onnx import model_inputs

        self.proto = proto
        self.value_inputs = tuple(value_inputs)
        self.reason = reason  # the refusal that made it specialise: which node needs which value
        self._compile_bound = compile_bound
        self._inputs = tuple(model_inputs(proto))
        self._variants: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    @property
    def input_names(self) -> tuple[str, ...]:
        return self._inputs

    @property
    def output_names(self) -> tuple[str, ...]:
        return tuple(o.name for o in self.proto.graph.output)

    @property
    def variants(self) -> int:
        """How many value sets have been compiled."""
        return len(self._variants)

    def __call__(self, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
        if len(inputs) != len(self._inputs):
            raise GraphError(f"the model takes {len(self._inputs)} inputs ({', '.join(self._inputs)}), got {len(inputs)}")
        results = self.run(dict(zip(self._inputs, inputs)))
        return tuple(results[name] for name in self.output_names)

    def run(self, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        if not isinstance(inputs, Mapping):
            raise GraphError(f"run takes a dict of input name -> array, got a {type(inputs).__name__}; "
                             "call model(*arrays) to pass them in order")
        unknown = sorted(set(inputs) - set(self._inputs))
        missing = [n for n in self._inputs if n not in inputs]
        if unknown or missing:
            raise GraphError(f"the model takes inputs {list(self._inputs)}; "
                             + (f"unknown {unknown}" if unknown else "") + (" and " if unknown and missing else "")
                             + (f"missing {missing}" if missing else ""))
        model, bound = self._variant_for(inputs)
        return model.run({name: array for name, array in inputs.items() if name not in bound})

    def variant(self, values: Mapping[str, Any]) -> Any:
        """The CompiledModel for these values of the deciding inputs (compiled if new)."""
        missing = [n for n in self.value_inputs if n not in values]
        if missing:
            raise GraphError(f"variant needs values for {missing} (the inputs that decide shapes: "
                             f"{list(self.value_inputs)})")
        return self._variant_for(values)[0]

    def _variant_for(self, inputs: Mapping[str, Any]) -> tuple[Any, tuple[str, ...]]:
        with self._lock:
            while True:
                bound = self.value_inputs
                values = {name: inputs[name] for name in bound}
                key = tuple(_key(values[name]) for name in bound)
                if key in self._variants:
                    return self._variants[key], bound
                if len(self._variants) >= MAX_VARIANTS:
                    raise GraphError(f"inputs {list(bound)} decide shapes and took more than {MAX_VARIANTS} "
                                     "different values (one compiled model each); compile with values={...} "
                                     "for each set instead")
                try:
                    model = self._compile_bound(values)
                except RunTimeValueError as err:  # these values leave another deciding tensor to inputs
                    more = tuple(n for n in err.inputs if n not in bound and n in inputs)
                    if not more:
                        raise
                    self.value_inputs = tuple(n for n in self._inputs if n in bound or n in more)
                    self._variants.clear()  # keys over the old set no longer apply
                    continue
                self._variants[key] = model
                return model, bound

    def save(self, path: Any) -> Any:
        raise GraphError(f"this model specialises on the values of inputs {list(self.value_inputs)} ({self.reason}); "
                         "save one variant: model.variant({...}).save(path), or compile with values={...}")

    def summary(self) -> str:
        return (f"{self.proto.graph.name or 'model'}: specialised on the values of inputs {list(self.value_inputs)}; "
                f"{self.variants} variant(s) compiled")


def _key(value: Any) -> tuple:
    array = np.asarray(value)
    return array.dtype.str, array.shape, array.tobytes()


__all__ = ["SpecializedModel", "MAX_VARIANTS"]
