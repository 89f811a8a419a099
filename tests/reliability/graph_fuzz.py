"""A differential fuzz of whole graphs: random small ONNX models compiled by tilegraph (greedy and
BLP orchestration, fused and unfused) against ONNX Runtime, on inputs with NaN and infinities too.

    python -m tests.reliability.graph_fuzz --cases 5000 [--first 0] [--report fuzz.json] [--keep DIR]

Case n is reproducible from its number alone (`random_case(n)`): a model of 2 to 9 random nodes
over 1 to 3 float inputs of random small shapes, drawn from elementwise unary and broadcasting
binary ops, reshapes, transposes, gathers at edge indices (0, -1, n-1, -n), reductions, matmuls,
convolutions, softmax, layer norm, concat and split, slices with out-of-range bounds, pads, where
of a comparison; one input in five has NaN and infinity
sprinkled in (cases with NaN leave out the ops whose NaN result ONNX Runtime makes depend on the
position: MaxPool and ReduceMax). Each case is compiled with one of the three variants
in turn (case n: greedy fused, BLP fused, unfused) so that every variant sees a third of the cases.

A case passes when tilegraph's outputs equal ONNX Runtime's (the same NaN and infinity positions;
finite values within 1e-4 relative to the output's largest magnitude), or when tilegraph refuses
the model with one typed error (counted as refused, with its reason). Anything else is a failure:
a mismatch, an untyped exception, a crash.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

VARIANTS = (("greedy", True), ("blp", True), ("greedy", False))
DIMS = (1, 2, 3, 4, 5, 7, 8)
UNARY = ("Relu", "Neg", "Abs", "Sigmoid", "Tanh", "Exp", "Sqrt", "Erf", "Reciprocal")
BINARY = ("Add", "Sub", "Mul", "Div", "Max", "Min")


@dataclass
class Case:
    number: int
    model: Any  # onnx.ModelProto
    feeds: dict[str, np.ndarray]
    variant: tuple[str, bool]
    ops: list[str] = field(default_factory=list)


class _Builder:
    """Grows one random model: tensors with known shapes, nodes appended in order."""

    def __init__(self, rng: np.random.Generator, nan_inputs: bool):
        from onnx import TensorProto, helper, numpy_helper

        self.helper, self.numpy_helper, self.F = helper, numpy_helper, TensorProto.FLOAT
        self.rng, self.nan = rng, nan_inputs
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.inputs: list[str] = []
        self.ops: list[str] = []
        self.bools: set[str] = set()  # comparison results and integer constants: no float op reads them

    def fresh(self, stem: str) -> str:
        return f"{stem}{len(self.shapes)}"

    def constant(self, array: np.ndarray) -> str:
        name = self.fresh("c")
        self.inits.append(self.numpy_helper.from_array(array, name))
        self.shapes[name] = tuple(array.shape)
        if array.dtype != np.float32:
            self.bools.add(name)  # an integer operand (indices, shapes, axes): never a float op's input
        return name

    def node(self, op: str, ins: list[str], shape: tuple[int, ...], **attrs: Any) -> str:
        out = self.fresh("t")
        self.nodes.append(self.helper.make_node(op, ins, [out], **attrs))
        self.shapes[out] = shape
        self.ops.append(op)
        return out

    def pick(self, min_rank: int = 0) -> str | None:
        consts = {i.name for i in self.inits}
        names = [n for n, s in self.shapes.items() if len(s) >= min_rank and n not in consts and n not in self.bools]
        return str(self.rng.choice(names)) if names else None


def _random_shape(rng: np.random.Generator) -> tuple[int, ...]:
    return tuple(int(d) for d in rng.choice(DIMS, size=int(rng.integers(1, 5))))


def _grow(b: _Builder) -> None:
    """Append one random node reading existing tensors."""
    rng = b.rng
    x = b.pick()
    assert x is not None
    shape = b.shapes[x]
    kinds = ["unary", "binary", "binary_const", "reshape", "transpose", "gather", "reduce", "softmax",
             "concat", "split", "layer_norm", "matmul", "conv", "slice", "pad", "where"]
    kind = str(rng.choice(kinds))
    if kind == "unary":
        op = str(rng.choice(UNARY))
        if op in ("Sqrt", "Reciprocal"):  # keep the interesting values finite-ish: sqrt(|x|), 1/(|x|+0.5)
            x = b.node("Abs", [x], shape)
            if op == "Reciprocal":
                x = b.node("Add", [x, b.constant(np.array([0.5], np.float32))], shape)
        elif op == "Exp":
            x = b.node("Tanh", [x], shape)  # exp of tanh: bounded, still exercising exp
        b.node(op, [x], shape)
    elif kind in ("binary", "binary_const"):
        op = str(rng.choice(BINARY))
        other_shape = tuple(d if rng.random() < 0.7 else 1 for d in shape[int(rng.integers(0, len(shape) + 1)):])
        if kind == "binary":
            same = [n for n, s in b.shapes.items() if s == shape and n != x and n not in b.bools]
            other = str(rng.choice(same)) if same and rng.random() < 0.6 else b.constant(
                rng.standard_normal(other_shape or (1,)).astype(np.float32))
        else:
            other = b.constant(rng.standard_normal(other_shape or (1,)).astype(np.float32))
        if op == "Div":  # a divisor away from 0 (a zero would be an infinity the other side computes too)
            other = b.node("Add", [b.node("Abs", [other], b.shapes[other]), b.constant(np.array([0.5], np.float32))],
                           b.shapes[other])
        out_shape = tuple(int(d) for d in np.broadcast_shapes(shape, b.shapes[other]))
        args = [x, other] if rng.random() < 0.5 else [other, x]
        b.node(op, args, out_shape)
    elif kind == "reshape":
        size = int(np.prod(shape))
        factors = [d for d in range(1, size + 1) if size % d == 0]
        first = int(rng.choice(factors))
        new = (first, size // first) if rng.random() < 0.7 else (size,)
        b.node("Reshape", [x, b.constant(np.array(new, np.int64))], new)
    elif kind == "transpose" and len(shape) > 1:
        perm = [int(p) for p in rng.permutation(len(shape))]
        b.node("Transpose", [x], tuple(shape[p] for p in perm), perm=perm)
    elif kind == "gather":
        axis = int(rng.integers(0, len(shape)))
        n = shape[axis]
        ids = np.array(sorted({0, n - 1, -1, -n, int(rng.integers(-n, n))}), np.int64)
        out = (*shape[:axis], len(ids), *shape[axis + 1:])
        b.node("Gather", [x, b.constant(ids)], out, axis=axis)
    elif kind == "reduce":
        ops = ["ReduceSum", "ReduceMean"] + ([] if b.nan else ["ReduceMax"])
        op = str(rng.choice(ops))
        axes = sorted({int(a) for a in rng.choice(len(shape), size=int(rng.integers(1, len(shape) + 1)))})
        keep = int(rng.integers(0, 2))
        out = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep else \
            tuple(d for i, d in enumerate(shape) if i not in axes)
        if not out:
            keep, out = 1, tuple(1 for _ in shape)
        b.node(op, [x, b.constant(np.array(axes, np.int64))], out, keepdims=keep)
    elif kind == "softmax":
        b.node("Softmax", [x], shape, axis=int(rng.integers(-len(shape), len(shape))))
    elif kind == "concat":
        axis = int(rng.integers(0, len(shape)))
        y = b.node("Relu", [x], shape)
        out = tuple(d * 2 if i == axis else d for i, d in enumerate(shape))
        b.node("Concat", [x, y], out, axis=axis)
    elif kind == "split" and max(shape) > 1:
        axis = int(np.argmax(shape))
        first = int(rng.integers(1, shape[axis]))
        parts = [first, shape[axis] - first]
        outs = [b.fresh("s"), b.fresh("s") + "b"]
        b.nodes.append(b.helper.make_node("Split", [x, b.constant(np.array(parts, np.int64))], outs, axis=axis))
        for o, p in zip(outs, parts):
            b.shapes[o] = tuple(p if i == axis else d for i, d in enumerate(shape))
        b.ops.append("Split")
    elif kind == "layer_norm":
        n = shape[-1]
        gamma = b.constant((np.abs(rng.standard_normal(n)) + 0.5).astype(np.float32))
        beta = b.constant(rng.standard_normal(n).astype(np.float32))
        b.node("LayerNormalization", [x, gamma, beta], shape, axis=-1, epsilon=1e-5)
    elif kind == "matmul" and len(shape) >= 2:
        n = int(rng.choice(DIMS))
        w = b.constant((rng.standard_normal((shape[-1], n)) / np.sqrt(shape[-1])).astype(np.float32))
        b.node("MatMul", [x, w], (*shape[:-1], n))
    elif kind == "conv" and len(shape) == 4:
        n, c, h, wd = shape
        k = int(rng.choice([1, 3])) if min(h, wd) >= 3 else 1
        pad = int(rng.integers(0, k // 2 + 1))
        stride = int(rng.choice([1, 2]))
        co = int(rng.choice(DIMS))
        w = b.constant((rng.standard_normal((co, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32))
        oh, ow = (h + 2 * pad - k) // stride + 1, (wd + 2 * pad - k) // stride + 1
        if oh >= 1 and ow >= 1:
            op = "Conv" if b.nan or rng.random() < 0.7 else "MaxPool"
            if op == "Conv":
                b.node("Conv", [x, w], (n, co, oh, ow), kernel_shape=[k, k], pads=[pad] * 4, strides=[stride] * 2)
            else:
                b.node("MaxPool", [x], (n, c, oh, ow), kernel_shape=[k, k], pads=[pad] * 4, strides=[stride] * 2)
    elif kind == "slice":
        axis = int(rng.integers(0, len(shape)))
        n = shape[axis]
        start = int(rng.integers(-n - 2, n))  # out-of-range starts and ends are clipped, as ONNX says
        end = int(rng.integers(start + 1 if start >= 0 else start % max(n, 1) + 1, n + 3)) if n > 1 else n
        lo, hi = max(0, start + n if start < 0 else start), min(n, end)
        lo = min(max(lo, 0), n)
        if hi > lo:
            consts = [b.constant(np.array([v], np.int64)) for v in (start, end, axis)]
            b.node("Slice", [x, *consts], tuple(hi - lo if i == axis else d for i, d in enumerate(shape)))
        else:
            b.node("Relu", [x], shape)
    elif kind == "pad":
        pads = [int(p) for p in rng.integers(0, 3, size=2 * len(shape))]
        out = tuple(d + pads[i] + pads[i + len(shape)] for i, d in enumerate(shape))
        b.node("Pad", [x, b.constant(np.array(pads, np.int64)), b.constant(np.array(0.5, np.float32))], out)
    elif kind == "where":
        threshold = b.constant(np.array([float(rng.normal())], np.float32))
        condition = b.node("Greater", [x, threshold], shape)
        b.bools.add(condition)
        other = b.constant(rng.standard_normal(shape[-1:]).astype(np.float32))
        b.node("Where", [condition, x, other], shape)
    else:
        b.node("Relu", [x], shape)


def random_case(number: int) -> Case:
    """Case `number`, the same on every machine and run."""
    from onnx import helper

    rng = np.random.default_rng(number)
    nan = rng.random() < 0.2
    b = _Builder(rng, nan)
    feeds = {}
    for i in range(int(rng.integers(1, 4))):
        name = f"x{i}"
        shape = _random_shape(rng) if rng.random() < 0.7 or i == 0 else (1, *_random_shape(rng)[:3])
        if rng.random() < 0.25:
            shape = (1, int(rng.choice([1, 2, 3])), int(rng.choice([3, 5, 7])), int(rng.choice([3, 4, 8])))  # an image
        values = rng.standard_normal(shape).astype(np.float32)
        if nan and values.size > 1:
            flat = values.reshape(-1)
            for special in (np.nan, np.inf, -np.inf):
                if rng.random() < 0.6:
                    flat[int(rng.integers(0, flat.size))] = special
        feeds[name] = values
        b.shapes[name] = shape
        b.inputs.append(name)
    for _ in range(int(rng.integers(2, 10))):
        _grow(b)
    produced = [n for n in b.shapes if n not in b.inputs and n not in {i.name for i in b.inits} and n not in b.bools]
    outputs = produced[-2:] if len(produced) > 1 and rng.random() < 0.4 else produced[-1:]
    graph = helper.make_graph(b.nodes, f"fuzz{number}",
                              [helper.make_tensor_value_info(n, b.F, list(b.shapes[n])) for n in b.inputs],
                              [helper.make_tensor_value_info(n, b.F, None) for n in outputs], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)
    return Case(number, model, feeds, VARIANTS[number % len(VARIANTS)], b.ops)


@dataclass
class Outcome:
    kind: str  # "match", "refused", "invalid" (ONNX Runtime refuses the model), "mismatch", "error"
    detail: str = ""


def same_values(got: np.ndarray, want: np.ndarray) -> str:
    """'' when `got` equals `want` as the fuzz defines it, else what differs."""
    if got.shape != want.shape:
        return f"shape {got.shape} vs {want.shape}"
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not np.array_equal(np.isnan(g), np.isnan(w)):
        return f"NaN at {int(np.count_nonzero(np.isnan(g) != np.isnan(w)))} other positions"
    finite = np.isfinite(w) & np.isfinite(g)
    if not np.array_equal(np.where(np.isinf(g), g, 0), np.where(np.isinf(w), w, 0)):
        return "infinities differ"
    if finite.any():
        scale = max(1.0, float(np.abs(w[finite]).max()))
        error = float(np.abs(g[finite] - w[finite]).max())
        if error > 1e-4 * scale:
            return f"max error {error:.3g} (scale {scale:.3g})"
    return ""


def run_case(case: Case) -> Outcome:
    import onnxruntime as ort

    import tilegraph as tg
    from tilegraph.errors import TilegraphError

    options = ort.SessionOptions()
    options.log_severity_level = 3  # no warnings about initializers the generator left unused
    try:
        want = ort.InferenceSession(case.model.SerializeToString(), options, providers=["CPUExecutionProvider"]).run(
            None, case.feeds)
    except Exception as e:  # the generator made something ONNX Runtime refuses: not a tilegraph case
        return Outcome("invalid", f"{type(e).__name__}: {str(e)[:120]}")
    orchestration, fuse = case.variant
    try:
        model = tg.compile(case.model, orchestration=orchestration, fuse=fuse)
        got = model.run(case.feeds)
    except TilegraphError as e:
        return Outcome("refused", f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
    except Exception as e:  # an untyped exception is a failure of the contract
        return Outcome("error", f"{type(e).__name__}: {str(e)[:300]}")
    for name, expected in zip(model.output_names, want):
        why = same_values(got[name], expected)
        if why:
            return Outcome("mismatch", f"output {name}: {why}")
    return Outcome("match")


def run_cases(numbers: range, keep: Path | None = None, progress: bool = False) -> dict[str, Any]:
    counts: Counter[str] = Counter()
    refusals: Counter[str] = Counter()
    failures: list[dict[str, Any]] = []
    started = time.perf_counter()
    for n in numbers:
        case = random_case(n)
        outcome = run_case(case)
        counts[outcome.kind] += 1
        if outcome.kind == "refused":
            refusals[outcome.detail.split(":")[0] + ": " + outcome.detail.split(": ", 1)[-1][:70]] += 1
        if outcome.kind in ("mismatch", "error"):
            failures.append({"case": n, "variant": list(case.variant), "ops": case.ops, "kind": outcome.kind,
                             "detail": outcome.detail})
            if keep is not None:
                keep.mkdir(parents=True, exist_ok=True)
                (keep / f"case{n}.onnx").write_bytes(case.model.SerializeToString())
                np.savez(keep / f"case{n}.npz", **case.feeds)
        if progress and (n + 1) % 100 == 0:
            print(f"{n + 1 - numbers.start} cases: {dict(counts)} ({time.perf_counter() - started:.0f} s)",
                  file=sys.stderr, flush=True)
    return {"cases": len(numbers), "first": numbers.start, "counts": dict(counts),
            "refusals": dict(refusals.most_common(20)), "failures": failures,
            "seconds": round(time.perf_counter() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=5000)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--report", default=None, help="write the counts and failures as JSON here")
    parser.add_argument("--keep", default=None, help="a folder for the ONNX model and inputs of each failure")
    args = parser.parse_args(argv)
    report = run_cases(range(args.first, args.first + args.cases), Path(args.keep) if args.keep else None,
                       progress=True)
    text = json.dumps(report, indent=1)
    if args.report:
        Path(args.report).write_text(text)
    print(text)
    return 0 if not report["failures"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
