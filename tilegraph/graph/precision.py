"""Low-precision compiles and their accuracy gate.

    model = compile_model("bert.onnx", precision="bf16")        # gemms_read_bfloat16, then the gate
    model.precision_report.line()    # 'bf16: max relative error 4.2e-03 (bound 1.5e-02: 3 x the ...) passed'

The gate, on by default: the compiled low-precision model runs on seeded random inputs and its
outputs are compared with the float reference (the float32 graph evaluated op by op in float64,
graph/reference.py). Its error must stay within FACTOR times the error of the same reference
evaluated on the low-precision graph (every operand the products read rounded to bfloat16, as
PyTorch's autocast rounds them: inductor's accuracy rule, m = 3 for bf16, with our own emulation
standing in for eager autocast), or within the bound the user gives (`accuracy=`). A model that
fails it is compiled again in float32, and the report says why; nothing runs silently less
accurate than asked. A target without AVX512_BF16 compiles bf16 requests in float32 (as OpenVINO
does): there the conversions cost and nothing computes faster. Per-layer fallback (only the
layers that break the bound in float32) is not done yet: the whole model falls back.

precision="int8" (passes/gemms_read_int8.py) goes through the same gate with another default
bound, INT8_BOUND: the reference evaluated on the quantized graph is the int8 model itself (its
integer products are exact), so its error cannot bound the model's; a target without an int8 dot
product compiles int8 requests in float32.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tilegraph.graph.ir import Graph
from tilegraph.graph.reference import run_reference

FACTOR = 3.0           # inductor's multiplier for bf16 (torch/_dynamo/utils.py same(): m = 3)
SLACK = 1e-6           # relative error below float32 rounding of a few operations always passes
DEFAULT_INDEX_BOUND = 1000
INT8_BOUND = 5e-2      # int8's default: the reference of the quantized graph is the int8 model itself
                       # (exact integer products), so its error cannot set the bound as bf16's does


@dataclass(frozen=True)
class PrecisionReport:
    requested: str            # the precision asked for ("bf16")
    precision: str            # what the model runs in: the requested one, or "fp32" after a failed gate
    error: float              # max over outputs of max|model - reference| / max|reference|
    emulated_error: float     # the same for the reference evaluated on the low-precision graph
    bound: float              # what `error` had to stay within
    rule: str                 # how the bound was set
    checked: bool             # False when the gate was switched off, or the target made the choice

    @property
    def passed(self) -> bool:
        return self.precision == self.requested and (not self.checked or self.error <= self.bound)

    def line(self) -> str:
        if not self.checked and self.precision != self.requested:
            return f"{self.requested} asked for, compiled in {self.precision}: {self.rule}"
        if not self.checked:
            return f"{self.requested}: accuracy not checked (accuracy_check=False)"
        verdict = "passed" if self.passed else f"failed: compiled in {self.precision} instead"
        return (f"{self.requested}: max relative error {self.error:.1e} against the float reference "
                f"(bound {self.bound:.1e}: {self.rule}) {verdict}")

    def to_json(self) -> dict:
        def number(x: float) -> float | None:  # JSON has no inf or NaN
            return x if math.isfinite(x) else None

        return {"requested": self.requested, "precision": self.precision, "error": number(self.error),
                "emulated_error": number(self.emulated_error), "bound": number(self.bound), "rule": self.rule,
                "checked": self.checked, "passed": self.passed}


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input: standard normal floats, and integers that stay valid
    indices (below the smallest extent a gather indexes with them)."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for name in graph.inputs:
        t = graph.values[name]
        if t.dtype.startswith(("int", "uint")):
            arrays[name] = rng.integers(0, index_bound(graph, name), t.shape).astype(t.dtype)
        elif t.dtype == "bool":
            arrays[name] = rng.random(t.shape) < 0.5
        else:
            arrays[name] = rng.standard_normal(t.shape).astype(t.dtype)
    return arrays


def index_bound(graph: Graph, name: str, default: int = DEFAULT_INDEX_BOUND) -> int:
    """Random integer inputs stay valid indices: below the smallest extent a gather indexes with them."""
    bounds = []
    for node in graph.nodes:
        if node.op in ("gather", "gather_elements") and len(node.inputs) > 1 and node.inputs[1] == name:
            data = graph.values[node.inputs[0]]
            axis = int(node.attr("axis", 0)) % max(1, len(data.shape))
            bounds.append(data.shape[axis] if data.shape else 1)
    return max(1, min(bounds)) if bounds else default


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max|got - want| / max|want| over the elements where want is finite; a non-finite element of
    `got` where `want` is finite makes it infinite."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    finite = np.isfinite(want)
    if not np.all(np.isfinite(got[finite])):
        return float("inf")
    if not finite.any():
        return 0.0
    scale = max(float(np.max(np.abs(want[finite]))), 1e-30)
    return float(np.max(np.abs(got[finite] - want[finite]))) / scale


def _error(outputs: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray]) -> float:
    return max((relative_error(outputs[name], want) for name, want in reference.items()), default=0.0)


def check_accuracy(model: object, reference_graph: Graph, low_graph: Graph, requested: str,
                   bound: float | None = None, seed: int = 0) -> PrecisionReport:
    """The gate: `model` (compiled from `low_graph`) against `reference_graph`'s float reference."""
    inputs = random_inputs(reference_graph, seed)
    reference = run_reference(reference_graph, inputs)
    emulated = _error(run_reference(low_graph, inputs), reference)
    error = _error(model.run(inputs), reference)  # type: ignore[attr-defined]
    if bound is None and requested == "int8":
        limit, rule = INT8_BOUND, "int8's default bound"
    elif bound is None:
        limit, rule = FACTOR * emulated + SLACK, f"{FACTOR:g} x the error of the bf16-rounded reference"
    else:
        limit, rule = float(bound), "the bound given"
    passed = error <= limit
    return PrecisionReport(requested, requested if passed else "fp32", error, emulated, limit, rule, True)


__all__ = ["PrecisionReport", "check_accuracy", "random_inputs", "index_bound", "relative_error", "FACTOR"]
