"""python -m benchmarks.onnx_conformance: ONNX's own backend node cases through tilegraph.

    python -m benchmarks.onnx_conformance                       # the table, and a JSON of every case
    python -m benchmarks.onnx_conformance --only test_resize    # cases whose names start so
    python -m benchmarks.onnx_conformance --write-passing       # refresh the suite's list of must-pass cases
    python -m benchmarks.onnx_conformance --operator-table      # the operator table of docs/graph.md

Each case of `onnx.backend.test.case.node.collect_testcases()` (generated from the installed onnx)
is compiled with `tg.compile(case.model)` and run on each of its data sets; outputs must match in
dtype and within the case's rtol/atol (NaNs equal), as ONNX's backend runner checks. Outcomes:
pass; refused (a TilegraphError naming what is missing: an operator, a dtype, a data-dependent
shape), split into deliberate refusals (DELIBERATE: what tilegraph does not set out to compile, with
the reason) and the rest; crash (any other exception); wrong (an output that does not match).
tests/graph/test_onnx_conformance.py runs every case in the default suite.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PASSING_FILE = Path(__file__).resolve().parent.parent / "tests" / "graph" / "onnx_conformance_passing.txt"

# What tilegraph does not set out to compile, by operator (domain-qualified outside ai.onnx).
TRAINING = "training (tilegraph compiles inference graphs)"
SEQUENCES = "sequences and optionals (tilegraph compiles tensor graphs)"
DELIBERATE_OPS = {
    TRAINING: {
        "ai.onnx.preview.training.Adagrad", "ai.onnx.preview.training.Adam", "ai.onnx.preview.training.Momentum",
        "ai.onnx.preview.training.Gradient"},
    SEQUENCES: {
        "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceErase", "SequenceInsert", "SequenceLength",
        "SequenceMap", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalGetElement",
        "OptionalHasElement"},
    "strings and text (no string tensors)": {
        "StringConcat", "StringNormalizer", "StringSplit", "RegexFullMatch", "TfIdfVectorizer"},
    "classical ML domain ai.onnx.ml (not a deep-learning operator set)": {
        "ai.onnx.ml.LabelEncoder", "ai.onnx.ml.TreeEnsemble", "ai.onnx.ml.ArrayFeatureExtractor",
        "ai.onnx.ml.Binarizer"},
    "random sampling (no reproducible reference)": {
        "Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"},
    "output shape depends on the data (tilegraph compiles static shapes; the dynamic-shapes issue)": {
        "NonZero", "Unique", "Compress", "NonMaxSuppression"},
    "image file decoding (not a tensor operator)": {"ImageDecoder"},
}
# Cases whose expected outputs tilegraph deliberately does not reproduce, each checked by hand:
# the reference's own rounding outside the case's tolerance of a more exact answer, or a reading of
# the spec that ONNX Runtime and PyTorch do not share (the `differs` outcome).
KNOWN_DIFFERENCES = dict.fromkeys(
    ("test_attention_4d_causal_fp16", "test_attention_4d_causal_fp16_expanded"),
    "the reference rounds every step to float16 (softmax's max, exp, sum and division); tilegraph rounds per "
    "operator as ONNX Runtime's CPU kernels do: 2 float16 ulps apart on 2 of 192 values (rtol 1e-3), tilegraph "
    "nearer the float64 answer (3.96e-4 vs 4.91e-4 at most); ONNX Runtime misses the first case too")
_BF16_ATTENTION = ("3d_causal", "4d_attn_mask_causal", "4d_causal", "4d_causal_padded_kv", "4d_padded_kv")
KNOWN_DIFFERENCES.update(dict.fromkeys(
    [f"test_attention_{c}_bf16{x}" for c in _BF16_ATTENTION for x in ("", "_expanded")],
    "the reference rounds every numpy step to bfloat16; tilegraph computes each operator in float32 and rounds "
    "once (correctly rounded for the fused operator: at most 1.95e-3 from the float64 answer, the reference "
    "4.98e-3; mean 3.9e-4..8.1e-4 vs 7.7e-4..1.2e-3): the case's rtol 1e-3 is below bfloat16's half-ulp "
    "(2e-3 at 0.5), so no correctly rounded answer passes it"))
KNOWN_DIFFERENCES["test_maxunpool_export_with_output_shape"] = (
    "with an output_shape larger than the attributes infer, the reference scatters the indices into the inferred "
    "shape and pads it; ONNX Runtime and PyTorch's max_unpool read them as flat indices into output_shape (as "
    "MaxPool over an input of that shape makes them), and tilegraph matches them (tests/graph/test_onnx_frontend.py)")
KNOWN_DIFFERENCES.update(dict.fromkeys(
    ("test_dft_inverse", "test_dft_inverse_opset19"),
    "the expected imaginary parts that are 0 in float64 hold the reference's float32 rounding (1.9e-7, above "
    "atol 1e-7); tilegraph gives 5.5e-15 there and is within 3.8e-6 of the float64 answer everywhere (the "
    "reference 1.5e-6, ONNX Runtime 1.9e-5, which misses these cases too)"))
# ONNX element types tilegraph does not hold (8-bit and 4-bit floats, 4-bit and 2-bit integers, strings).
DELIBERATE_TYPES = {8: "string", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2", 20: "float8e5m2fnuz",
                    21: "uint4", 22: "int4", 23: "float4e2m1", 24: "float8e8m0", 25: "uint2", 26: "int2"}


@dataclass(frozen=True)
class Outcome:
    name: str
    status: str  # pass | refused | deliberate | crash | wrong | differs (KNOWN_DIFFERENCES)
    detail: str = ""


def cases(prefix: str = "") -> list[Any]:
    """The backend node cases of the installed onnx, by name."""
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            found = collect_testcases(None)
    return sorted((c for c in found if c.name.startswith(prefix)), key=lambda c: c.name)


def _element_types(model: Any) -> set[int]:
    types = set()
    for value_info in [*model.graph.input, *model.graph.output]:
        which = value_info.type.WhichOneof("value")
        if which == "tensor_type":
            types.add(value_info.type.tensor_type.elem_type)
        elif which is not None:
            types.add(-1)  # a sequence, map or optional
    types.update(t.data_type for t in model.graph.initializer)
    return types


def deliberate_reason(model: Any) -> str | None:
    """Why tilegraph refuses `model` on purpose, or None."""
    ops = {n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}" for n in model.graph.node}
    for reason, members in DELIBERATE_OPS.items():
        if ops & members:
            return reason
    types = _element_types(model)
    if -1 in types:
        return SEQUENCES
    odd = sorted(DELIBERATE_TYPES[t] for t in types if t in DELIBERATE_TYPES)
    if odd:
        return f"element types tilegraph does not hold ({', '.join(odd)})"
    return None


def _deliberate_message(message: str) -> str | None:
    """The deliberate reason a refusal's message shows (found while converting), or None."""
    if "training mode" in message:  # BatchNormalization or Dropout asked to train
        return TRAINING
    if "sequences or optionals" in message:  # an If branch that returns one
        return SEQUENCES
    return None


def _graph_inputs(model: Any) -> list[str]:
    initializers = {t.name for t in model.graph.initializer}
    return [v.name for v in model.graph.input if v.name not in initializers]


def _array(value: Any) -> Any:
    """A data set's value as numpy (a few cases keep theirs as TensorProtos, as ONNX's runner reads)."""
    if hasattr(value, "data_type"):
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    return value


def _compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    """'' when `got` matches `want` as ONNX's backend runner checks, else what differs."""
    got, want = np.asarray(got), np.asarray(_array(want))
    if want.dtype == object:  # a few cases store integers as Python objects: compare the values
        try:
            want = want.astype(got.dtype)
        except (TypeError, ValueError, OverflowError):
            return f"expected values of {got.dtype} as objects do not convert"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if want.dtype.name == "bfloat16":  # ml_dtypes' type: numpy's comparisons see no float in it
        got, want = got.astype(np.float32), want.astype(np.float32)
    try:
        if want.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(got, want)
    except AssertionError as e:
        return " ".join(str(e).split())[:300]
    return ""


def run_case(case: Any) -> Outcome:
    """Compile and run one backend case as a user would (tg.compile on the model, run on each data
    set: a model whose shapes depend on input values specialises on them); never raises."""
    return _run(case, case.model, case.data_sets, deliberate_reason(case.model))


def _run(case: Any, onnx_model: Any, data_sets: Any, deliberate: str | None) -> Outcome:
    import tilegraph as tg
    from tilegraph.errors import TilegraphError

    try:
        model = tg.compile(onnx_model, orchestration="greedy")
    except TilegraphError as e:
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        deliberate = deliberate or _deliberate_message(message)
        return Outcome(case.name, "deliberate" if deliberate else "refused", deliberate or message)
    except Exception as e:  # noqa: BLE001 (anything else is a crash, which the suite reports)
        return Outcome(case.name, "crash", f"compile: {type(e).__name__}: {e}"[:400])
    names = _graph_inputs(onnx_model)
    outputs = [o.name for o in onnx_model.graph.output]
    for inputs, expected in data_sets:
        inputs = [_array(i) for i in inputs]
        try:
            got = model.run(dict(zip(names, inputs)))
        except TilegraphError as e:
            message = str(e).splitlines()[0]
            if _deliberate_message(message):  # a specialised model compiles at its first run
                return Outcome(case.name, "deliberate", _deliberate_message(message))
            return Outcome(case.name, "refused", f"run: {message}")
        except Exception as e:  # noqa: BLE001
            return Outcome(case.name, "crash", f"run: {type(e).__name__}: {e}"[:400])
        for name, want in zip(outputs, expected):
            difference = _compare(got[name], want, case.rtol, case.atol)
            if difference and case.name in KNOWN_DIFFERENCES:
                return Outcome(case.name, "differs", f"{name}: {difference}; known: {KNOWN_DIFFERENCES[case.name]}")
            if difference:
                return Outcome(case.name, "wrong", f"{name}: {difference}")
    return Outcome(case.name, "pass")


def opset_of(case: Any) -> int | None:
    versions = [o.version for o in case.model.opset_import if o.domain in ("", "ai.onnx")]
    return versions[0] if versions else None


def summary(outcomes: list[Outcome], opsets: dict[str, int | None]) -> str:
    counts = collections.Counter(o.status for o in outcomes)
    mid = [o for o in outcomes if opsets.get(o.name) is not None and 13 <= opsets[o.name] <= 21]
    mid_pass = sum(o.status == "pass" for o in mid)
    return (f"ONNX backend node cases: {counts['pass']} of {len(outcomes)} pass, {counts['refused']} refused, "
            f"{counts['deliberate']} refused on purpose, {counts['crash']} crash, {counts['wrong']} wrong, "
            f"{counts['differs']} differ from the reference for a listed reason (KNOWN_DIFFERENCES); "
            f"opsets 13-21: {mid_pass} of {len(mid)} pass")


TABLE_BEGIN = "<!-- onnx operator table: python -m benchmarks.onnx_conformance --operator-table -->"
TABLE_END = "<!-- end of the onnx operator table -->"


def operator_table() -> str:
    """Markdown: every default-domain ONNX operator tilegraph converts, with the versions the
    installed onnx defines for it from opset 7 on (all read: older models upgrade to 13), and the
    deliberate refusals. Generated from the converter table (CONVERTERS), never typed by hand."""
    import onnx

    from tilegraph.graph.frontends.onnx import OLDEST_OPSET, newest_opset
    from tilegraph.graph.frontends.onnx_ops import CONVERTERS

    versions: dict[str, set[int]] = {}
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain in ("", "ai.onnx") and not schema.deprecated:
            versions.setdefault(schema.name, set()).add(schema.since_version)
    lines = [TABLE_BEGIN, "", f"{len(CONVERTERS)} operator types, opsets {OLDEST_OPSET} to {newest_opset()} "
             f"(onnx {onnx.__version__}); listed per operator: the definition in force at opset {OLDEST_OPSET} "
             "and every later change", "",
             "| operator | versions read |", "|---|---|"]
    for name in sorted(CONVERTERS):
        known = sorted(versions.get(name, ()))
        at_oldest = [v for v in known if v <= OLDEST_OPSET][-1:]  # the definition in force at the oldest opset
        changed = at_oldest + [v for v in known if v > OLDEST_OPSET]
        lines.append(f"| {name} | {', '.join(map(str, changed))} |")
    deliberate = set().union(*DELIBERATE_OPS.values())
    functions = sorted({f"{sc.domain}.{sc.name}" if sc.domain not in ("", "ai.onnx") else sc.name
                        for sc in onnx.defs.get_all_schemas_with_history()
                        if not sc.deprecated and (sc.has_function or sc.has_context_dependent_function)
                        and sc.domain in ("", "ai.onnx", "ai.onnx.preview")} - set(CONVERTERS) - deliberate)
    lines += ["", f"{len(functions)} more operator types have ONNX function bodies and no converter: they are "
              "expanded into their bodies (graph/frontends/onnx_functions.py) and compile when the operators "
              "those use do: " + ", ".join(functions) + "."]
    lines += ["", "Refused on purpose (the conformance runner's list, `benchmarks/onnx_conformance.py`):", ""]
    for reason, members in DELIBERATE_OPS.items():
        lines.append(f"- {reason}: {', '.join(sorted(members))}")
    lines.append(f"- element types: {', '.join(sorted(set(DELIBERATE_TYPES.values())))}")
    lines += ["", TABLE_END]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.onnx_conformance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="run the cases whose names start with this")
    parser.add_argument("--out", default="", help="write every outcome to this JSON file")
    parser.add_argument("--write-passing", action="store_true", help=f"rewrite {PASSING_FILE.name} from this run")
    parser.add_argument("--operator-table", action="store_true", help="print the supported-operator table (docs/graph.md)")
    args = parser.parse_args(argv)
    if args.operator_table:
        print(operator_table(), end="")
        return 0
    import onnx

    chosen = cases(args.only)
    start = time.perf_counter()
    outcomes = [run_case(c) for c in chosen]
    seconds = time.perf_counter() - start
    opsets = {c.name: opset_of(c) for c in chosen}
    reasons = collections.Counter(o.detail for o in outcomes if o.status in ("refused", "deliberate"))
    print(f"onnx {onnx.__version__}, {len(chosen)} cases in {seconds:.0f} s")
    print(summary(outcomes, opsets))
    for o in outcomes:
        if o.status in ("crash", "wrong"):
            print(f"  {o.status}: {o.name}: {o.detail}")
    print("most frequent refusals:")
    for reason, n in reasons.most_common(25):
        print(f"  {n:4d}  {reason[:150]}")
    if args.out:
        Path(args.out).write_text(json.dumps({"onnx": onnx.__version__, "summary": summary(outcomes, opsets),
                                              "cases": [o.__dict__ | {"opset": opsets[o.name]} for o in outcomes]},
                                             indent=1))
    if args.write_passing:
        if args.only:
            print("--write-passing needs the full run (no --only)", file=sys.stderr)
            return 2
        PASSING_FILE.write_text("".join(f"{o.name} {o.status}\n" for o in outcomes if o.status == "pass"))
        print(f"wrote {PASSING_FILE}")
    return 1 if any(o.status in ("crash", "wrong") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
