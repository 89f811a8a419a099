"""`tilegraph compile` and `tilegraph run`: whole models from the command line.

    tilegraph compile MODEL.onnx [-o DIR] [--time S] [--trials N] [--threads N] [--db PATH] [--json]
                      [--input-shape NAME=D0,D1,...] [--value NAME=V0,V1,...] [--dim NAME=LO:HI]
                      [--expect NAME=V0,V1,...]
    tilegraph run DIR|MODEL.onnx [--input NAME=FILE.npy ...] [--bench] [--vs onnxruntime,torch] [--threads N]
                  [--target cpu|opencl|cuda] [--value NAME=V0,V1,...]
    tilegraph compile|run MODEL --precision bf16|int8 [--accuracy 1e-2 | --no-accuracy-check]

A symbolic extent (an ONNX dim_param) is fixed with `--input-shape`, or kept a run-time dim with
`--dim seq=1:512`: one compiled model then takes every length in the range (graph/dims.py);
`--expect seq=32,32,100` spends the tuning on the buckets of the lengths expected (graph/buckets.py).

An input that decides shapes (a reduction's axes, a Reshape's shape given as a graph input) is
bound with `--value NAME=V0,V1,...` (a model compiles to static shapes); without it the command
names the inputs and stops with code 2.

MODEL may also name a reference model (resnet50, mobilenet_v2, bert, gpt2): it is exported to ONNX
first (and PyTorch is then available as a peer). Inputs not given are random (seed 0); `run`
saves nothing unless `--output DIR` names where each output goes as NAME.npy (characters other
than letters, digits, '-', '_' and '.' %-escaped, so distinct outputs never share a file).

`compile --time S` (and/or `--trials N`) tunes the model's tasks first under that budget
(graph/tuning/): progress on stderr, then the per-task table with PyTorch's time for the same
operator where it has one (`--no-vendor` skips that); `--json` prints one JSON line per task and
a last one for the model. A rerun with the same database continues the tuning and re-measures
nothing. Without --db, the default database is used (read-only when not tuning, if it exists).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np

from tilegraph import config
from tilegraph.graph.compile import DEFAULT_ORCHESTRATION, ORCHESTRATIONS, PRECISIONS
from tilegraph.graph.passes import FLOAT32_CPU, OPTIONAL
from tilegraph.graph.precision import random_inputs
from tilegraph.target import Target


def add_commands(sub: Any, parents: dict[str, Any], positive_float: Any, int_at_least: Any,
                 target_spec: Any = str) -> None:
    comp = sub.add_parser("compile", parents=[parents["db"]], help="compile a model (ONNX) into a saved model dir")
    comp.add_argument("model", help="an ONNX file, or a reference model name (resnet50, mobilenet_v2, bert, gpt2)")
    comp.add_argument("-o", "--output", default=None, help="where to save the compiled model (default MODEL.tg)")
    comp.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                      help="fix a symbolic input extent of an ONNX model (repeatable)")
    comp.add_argument("--dim", action="append", default=[], metavar="NAME=LO:HI",
                      help="keep the symbolic extent NAME (an ONNX dim_param) a run-time dim in [LO, HI]: one "
                           "compiled model for every value (repeatable)")
    comp.add_argument("--expect", default=None, metavar="NAME=V0,V1,...",
                      help="the values a run-time dim is expected to take (a value repeated as often as it "
                           "is expected): tuning spends its budget on their buckets")
    comp.add_argument("--value", action="append", default=[], metavar="NAME=V0,V1,...",
                      help="bind an input that decides shapes (a reduction's axes, a Reshape's shape) to these "
                           "values (repeatable)")
    comp.add_argument("--time", type=_budget_seconds, default=0.0,
                      help="whole-model tuning budget, seconds (0: no tuning)")
    comp.add_argument("--trials", type=int_at_least(0), default=None,
                      help="whole-model tuning budget in measurements, earlier runs' included")
    comp.add_argument("--threads", type=int_at_least(1), default=None,
                      help="threads tasks are timed with, as the model will run (default: all cores)")
    comp.add_argument("--cluster", default=None, metavar="ADDRESS",
                      help="tune on a Ray cluster: auto (the one `ray start` runs here), ray://HOST:PORT, or local; "
                           "needs tilegraph[ray]")
    comp.add_argument("--no-vendor", action="store_true", help="skip timing PyTorch's kernel for each task")
    comp.add_argument("--json", action="store_true", help="one JSON object describing the compiled model")
    comp.add_argument("--no-fuse", action="store_true", help="one kernel per graph node (to measure fusion)")
    comp.add_argument("--no-construct", action="store_true",
                      help="plain default schedules for tasks without a tuning record (not Gensor's constructed ones)")
    comp.add_argument("--no-prepack", action="store_true",
                      help="keep packing weights inside the kernels at every call (not once at compile time; "
                      "saves the packed copies' memory)")
    comp.add_argument("--orchestration", choices=ORCHESTRATIONS, default=DEFAULT_ORCHESTRATION,
                      help="greedy fusion, or the kernels a binary linear program picks from measured candidates "
                           f"(default {DEFAULT_ORCHESTRATION})")
    comp.add_argument("--rewrite", action="append", default=[], choices=sorted(OPTIONAL),
                      help="an optional graph rewrite to apply (repeatable)")
    comp.add_argument("--no-rewrite", action="append", default=[], choices=sorted(FLOAT32_CPU),
                      help="a rewrite float32 CPU models get by default, left out (repeatable)")
    _precision_options(comp)
    run = sub.add_parser("run", parents=[parents["db"]], help="run a compiled model dir or an ONNX model")
    run.add_argument("model", help="a saved model dir, an ONNX file, or a reference model name")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="an input array")
    run.add_argument("--input-shape", action="append", default=[], metavar="NAME=D0,D1,...",
                     help="fix a symbolic input extent of an ONNX model (repeatable)")
    run.add_argument("--dim", action="append", default=[], metavar="NAME=LO:HI",
                     help="keep the symbolic extent NAME a run-time dim in [LO, HI] (repeatable)")
    run.add_argument("--value", action="append", default=[], metavar="NAME=V0,V1,...",
                     help="bind an input that decides shapes to these values (repeatable)")
    run.add_argument("--output", default=None, help="a folder to write each output to as NAME.npy")
    run.add_argument("--bench", action="store_true", help="time the model (warm-up, alternating rounds, medians)")
    run.add_argument("--profile", action="store_true",
                     help="time every kernel inside the running model (with --vs onnxruntime: ORT's profile beside it)")
    run.add_argument("--top", type=int_at_least(1), default=20, help="--profile: the slowest steps shown")
    run.add_argument("--vs", default="", help="peers to race and check against: onnxruntime,openvino,torch,torch.compile")
    run.add_argument("--threads", type=int_at_least(1), default=None, help="threads (default: all cores)")
    run.add_argument("--time", type=positive_float, default=2.0, help="seconds of timing per contender")
    run.add_argument("--json", action="store_true")
    run.add_argument("--target", type=target_spec, default="cpu",
                     help="where an ONNX or reference model runs: cpu, or opencl / cuda (tensors stay in device "
                          "memory between kernels)")
    run.add_argument("--no-fuse", action="store_true", help="compile an ONNX model with one kernel per node")
    run.add_argument("--no-construct", action="store_true",
                     help="plain default schedules for tasks without a tuning record (not Gensor's constructed ones)")
    run.add_argument("--no-prepack", action="store_true",
                     help="keep packing weights inside the kernels at every call (not once at compile time; "
                     "saves the packed copies' memory)")
    run.add_argument("--orchestration", choices=ORCHESTRATIONS, default=DEFAULT_ORCHESTRATION,
                     help=f"how an ONNX model's kernels are chosen (default {DEFAULT_ORCHESTRATION})")
    _precision_options(run)


def _precision_options(parser: Any) -> None:
    parser.add_argument("--precision", choices=PRECISIONS, default="fp32",
                        help="bf16: matmuls and convolutions read bfloat16 and accumulate in float32, the rest stays "
                             "float32; int8: their weights int8, their activations quantized per call, summed in "
                             "int32; both behind an accuracy gate (default fp32)")
    parser.add_argument("--accuracy", type=_relative_error, default=None, metavar="ERROR",
                        help="--precision bf16|int8: the largest relative error the gate accepts (default: bf16 3x "
                             "the error of the bf16-rounded reference, int8 5e-2)")
    parser.add_argument("--no-accuracy-check", action="store_true",
                        help="--precision bf16|int8: skip the accuracy gate")


def _relative_error(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a relative error such as 1e-2, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite relative error > 0, got {text}")
    return value


def _budget_seconds(text: str) -> float:
    """A finite number of seconds >= 0 (nan and inf are refused, not read as 'no tuning' or 'forever')."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, got {text}")
    return value


def _resolve(spec: str) -> tuple[Path | None, Any, str]:
    """(ONNX path or None for a saved dir, torch module or None, kind) of a model argument."""
    from tilegraph.graph import zoo

    path = Path(spec)
    if path.is_dir():
        return None, None, "saved"
    if path.exists():
        return path, None, "onnx"
    if spec in zoo.MODELS:
        out = config.cache_dir() / "models" / f"{spec}.onnx"
        out.parent.mkdir(parents=True, exist_ok=True)
        if not out.exists():
            print(f"exporting {spec} to {out} ...", file=sys.stderr)
            zoo.export_onnx(spec, out.with_suffix(".tmp.onnx"))
            out.with_suffix(".tmp.onnx").replace(out)
        return out, spec, "onnx"
    raise ValueError(f"{spec}: no such file or saved model dir, and not a reference model "
                     f"({', '.join(zoo.MODELS)})")


def cmd_compile(args: argparse.Namespace) -> int:
    from tilegraph.graph.compile import compile_model

    onnx_path, _, kind = _resolve(args.model)
    if kind == "saved":
        raise ValueError(f"{args.model} is already a compiled model dir; pass the ONNX file")
    output = Path(args.output) if args.output else onnx_path.with_suffix(".tg")
    tuning = args.time > 0 or bool(args.trials)
    db = args.db
    if db is None and not tuning:
        from tilegraph.tune.database import default_path

        db = str(default_path()) if default_path().exists() else None
    if args.threads:  # tasks are timed, and BLP candidates too, at the threads the model will run with
        from tilegraph.runtime import threads

        threads.set_num_threads(args.threads)
    from tilegraph.graph.compile_progress import CompileProgress
    from tilegraph.graph.tuning.progress import TuningProgress

    with TuningProgress(onnx_path.stem, args.time or None, enabled=tuning) as show, \
            CompileProgress(onnx_path.stem, enabled=not args.json) as steps:
        model = compile_model(str(onnx_path), db=db, time_budget=args.time, fuse=not args.no_fuse,
                              orchestration=args.orchestration, extra_rewrites=tuple(args.rewrite),
                              skip_rewrites=tuple(args.no_rewrite),
                              construct=not args.no_construct, prepack=not args.no_prepack,
                              trials=args.trials, num_threads=args.threads, tune_progress=show,
                              input_shapes=input_shapes(args.input_shape), values=input_values(args.value),
                              progress=steps, precision=args.precision, accuracy=args.accuracy,
                              accuracy_check=not args.no_accuracy_check, cluster=args.cluster,
                              dims=dims_option(args.dim), expected=expected_option(args.expect))
    _require_static(model, args.model)
    model.save(output)
    described = {"model": str(onnx_path), "output": str(output), "nodes": len(model.graph.nodes),
                 "kernel_launches": len(model.steps), "kernels": len(model.kernel_objects),
                 "tuned_kernels": sum(model.tuned), "constructed_kernels": len(getattr(model, "constructed", ())),
                 "prepacked_weights": len(getattr(model, "prepacked", ())),
                 "arena_bytes": model.arena_bytes,
                 "arena_lower_bound_bytes": model.lower_bound_bytes, "compile_s": round(model.compile_seconds, 3),
                 "rewrites": len(model.rewrites), "fused_groups": sum(len(s.covers) > 1 for s in model.steps),
                 "fallbacks": list(model.fallbacks), "target": str(model.target),
                 "orchestration": args.orchestration if not args.no_fuse else "none",
                 "precision": model.precision}
    if model.precision_report is not None:
        described["accuracy_gate"] = model.precision_report.to_json()
    report = model.orchestration
    if report is not None:
        described.update(blp_candidates=report.candidates, blp_measured_sum_s=report.result.objective_s,
                         greedy_measured_sum_s=report.result.greedy_s, blp_solver_s=round(report.result.solver_s, 3),
                         blp_failed=report.failed, blp_measured_now=report.measured)
    tuned = model.tuning
    if tuned is not None:
        if not args.no_vendor:
            tuned.add_vendor_times(args.threads)
        described["tuning"] = tuned.to_json()["model"]
    if args.json:
        for task in tuned.to_json()["tasks"] if tuned is not None else []:
            print(json.dumps({"task": task}))
        print(json.dumps(described))
        return 0
    text = f"{model.summary()}\n" + (f"{report.summary()}\n" if report is not None else "")
    if tuned is not None:
        text += f"{tuned.table()}\n"
    print(f"{text}compiled in {model.compile_seconds:.1f} s; saved to {output}")
    return 0


def _inputs(model: Any, given: list[str]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    for item in given:
        if "=" not in item:
            raise ValueError(f"--input {item!r}: expected NAME=FILE.npy")
        name, file = item.split("=", 1)
        if name not in model.input_names:
            raise ValueError(f"--input {name!r}: the model's inputs are {', '.join(model.input_names)}")
        if name in arrays:
            raise ValueError(f"--input {name!r} is given twice")
        try:
            loaded = np.load(file, allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise ValueError(f"--input {name}={file}: cannot read a .npy array ({e or type(e).__name__})") from None
        if not isinstance(loaded, np.ndarray):  # an .npz archive holds several arrays
            raise ValueError(f"--input {name}={file}: is an .npz archive of {len(loaded.files)} arrays; pass one .npy")
        arrays[name] = loaded
    return {**random_inputs(model.graph, seed=0), **arrays}  # the inputs not given: seeded random ones


def input_shapes(given: list[str]) -> dict[str, tuple[int, ...]] | None:
    """--input-shape NAME=D0,D1,... options as from_onnx's input_shapes."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in given:
        name, _, dims = item.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split(",") if d.strip())
        except ValueError:
            shape = ()
        if not name or not shape or any(d < 0 for d in shape):
            raise ValueError(f"--input-shape {item!r}: expected NAME=D0,D1,... with non-negative integers")
        if name in shapes:
            raise ValueError(f"--input-shape {name!r} is given twice")
        shapes[name] = shape
    return shapes or None


def dims_option(given: list[str]) -> dict[str, tuple[int, int]] | None:
    """--dim NAME=LO:HI (or NAME=HI, from 1) options as compile_model's dims."""
    dims: dict[str, tuple[int, int]] = {}
    for item in given:
        name, _, text = item.partition("=")
        low, _, high = text.rpartition(":")
        try:
            bounds = (int(low) if low else 1, int(high))
        except ValueError:
            bounds = (0, 0)
        if not name.isidentifier() or not 1 <= bounds[0] <= bounds[1]:
            raise ValueError(f"--dim {item!r}: expected NAME=LO:HI with 1 <= LO <= HI (a dim_param of the model)")
        if name in dims:
            raise ValueError(f"--dim {name!r} is given twice")
        dims[name] = bounds
    return dims or None


def expected_option(given: str | None) -> dict[str, list[int]] | None:
    """--expect NAME=V0,V1,... as compile_model's expected (checked against the dim's range there)."""
    if given is None:
        return None
    name, _, text = given.partition("=")
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not name.isidentifier() or not values:
        raise ValueError(f"--expect {given!r}: expected NAME=V0,V1,... (integers a run-time dim takes)")
    return {name: values}


def input_values(given: list[str]) -> dict[str, list[float]] | None:
    """--value NAME=V0,V1,... options as compile_model's values (converted to each input's dtype)."""
    values: dict[str, list[float]] = {}
    for item in given:
        name, _, text = item.partition("=")
        try:
            numbers = [float(v) if any(c in v for c in ".eEn") else int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            numbers = []
        if not name or not numbers:
            raise ValueError(f"--value {item!r}: expected NAME=V0,V1,... with numbers")
        if name in values:
            raise ValueError(f"--value {name!r} is given twice")
        values[name] = numbers
    return values or None


def _bound_values(onnx_path: Path | None, given: list[str]) -> dict[str, np.ndarray]:
    """The --value inputs as the arrays compiling bound (the input's dtype and shape)."""
    values = input_values(given)
    if not values or onnx_path is None:
        return {}
    from onnx import numpy_helper

    from tilegraph.graph.frontends.onnx import bind_inputs

    bound = bind_inputs(str(onnx_path), values)
    return {t.name: numpy_helper.to_array(t) for t in bound.graph.initializer if t.name in values}


def _require_static(model: Any, spec: str) -> None:
    """The CLI compiles one model: inputs that decide shapes must be bound with --value."""
    from tilegraph.graph.specialize import SpecializedModel

    if isinstance(model, SpecializedModel):
        flags = " ".join(f"--value {n}=..." for n in model.value_inputs)
        raise ValueError(f"{spec}: inputs {', '.join(model.value_inputs)} decide shapes ({model.reason}); "
                         f"pass {flags}")


def output_file_name(name: str) -> str:
    """A file name for output `name`, distinct for distinct names: characters other than letters,
    digits, '-', '_' and '.' are %-escaped (so 'a/b' and 'a_b' never meet), and names of dots alone
    are escaped entirely."""
    encoded = quote(name, safe="-_.")
    if not encoded.strip("."):
        encoded = encoded.replace(".", "%2E")
    if len(encoded) > 200:
        encoded = encoded[:180] + "-" + hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{encoded}.npy"


def output_difference(got: np.ndarray, expected: np.ndarray) -> tuple[float, int]:
    """(max |got - expected| / max |expected| over elements finite in both, elements that disagree
    in NaN or infinity): a NaN where the peer has a number is a disagreement, not a NaN error."""
    g = np.asarray(got).astype(np.float64)
    e = np.asarray(expected).astype(np.float64)
    if g.shape != e.shape:
        raise ValueError(f"an output has shape {g.shape}, the peer's has {e.shape}")
    both = np.isfinite(g) & np.isfinite(e)
    special = ~np.isfinite(g) | ~np.isfinite(e)
    mismatched = int(np.count_nonzero(special & ~((g == e) | (np.isnan(g) & np.isnan(e)))))
    if not both.any():
        return 0.0, mismatched
    scale = max(float(np.abs(e[both]).max()), 1e-30)
    return float(np.abs(g[both] - e[both]).max()) / scale, mismatched


def cmd_run(args: argparse.Namespace) -> int:
    from tilegraph.graph import zoo
    from tilegraph.graph.compile import compile_model
    from tilegraph.graph.race import PEERS, peer, race
    from tilegraph.graph.serialize import load_model
    from tilegraph.runtime import threads

    peers = [p.strip() for p in args.vs.split(",") if p.strip()]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise ValueError(f"unknown peer(s) {', '.join(unknown)} for --vs; known peers: {', '.join(PEERS)}")
    onnx_path, zoo_name, kind = _resolve(args.model)
    if args.threads:  # before compiling: orchestration times candidates at this thread count
        threads.set_num_threads(args.threads)
    if kind == "saved" and args.target != "cpu":
        raise ValueError(f"--target {args.target}: a saved model runs on the target it was compiled for; "
                         "pass the ONNX file or the reference model name instead")
    if kind == "saved" and args.input_shape:
        raise ValueError("--input-shape: a saved model's shapes are fixed; pass the ONNX file instead")
    if kind == "saved" and args.dim:
        raise ValueError("--dim: a saved model's dims were fixed when it was compiled; pass the ONNX file instead")
    if kind == "saved" and args.value:
        raise ValueError("--value: a saved model's values are bound already; pass the ONNX file instead")
    if kind == "saved" and (args.precision != "fp32" or args.accuracy is not None or args.no_accuracy_check):
        raise ValueError("--precision/--accuracy: a saved model's precision was fixed when it was compiled; "
                         "pass the ONNX file instead")
    from tilegraph.graph.compile_progress import CompileProgress

    if kind == "saved":
        model = load_model(args.model)
    else:
        with CompileProgress(onnx_path.stem, enabled=not args.json) as steps:
            model = compile_model(str(onnx_path), target=args.target, db=args.db, fuse=not args.no_fuse,
                                  construct=not args.no_construct, prepack=not args.no_prepack,
                                  orchestration=args.orchestration, input_shapes=input_shapes(args.input_shape),
                                  values=input_values(args.value), progress=steps, precision=args.precision,
                                  accuracy=args.accuracy, accuracy_check=not args.no_accuracy_check,
                                  dims=dims_option(args.dim))
    _require_static(model, args.model)
    # peers run on the host's cores, also when the model runs on a device
    thread_count = args.threads or model.target.num_cores or threads.configured_num_threads() or Target().num_cores
    inputs = _inputs(model, args.input)
    outputs = model.run(inputs)
    report: dict[str, Any] = {"model": args.model, "outputs": {k: list(v.shape) for k, v in outputs.items()},
                              "precision": getattr(model, "precision", "fp32")}
    gate = getattr(model, "precision_report", None)
    if gate is not None:
        report["accuracy_gate"] = gate.to_json()
    contenders = {"tilegraph": lambda: model.run(inputs)}
    torch_module = zoo.torch_model(zoo_name)[0] if zoo_name and any(p.startswith("torch") for p in peers) else None
    peer_inputs = {**inputs, **_bound_values(onnx_path, args.value)}  # a peer reads the bound inputs too
    for name in peers:
        call, outs = peer(name, str(onnx_path) if onnx_path else None, torch_module, peer_inputs, thread_count)
        try:
            expected = outs()
        except Exception as e:  # the peer refused these inputs (ORT's InvalidArgument, an IndexError): one line
            raise ValueError(f"{name} refused the inputs: {type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}"
                             ) from None
        compared = [output_difference(outputs[o], e) for o, e in zip(model.output_names, expected)]
        report[f"{name}_relative_error"] = max(c[0] for c in compared)
        report[f"{name}_nonfinite_mismatches"] = sum(c[1] for c in compared)
        contenders[name] = call
    if args.bench:
        times = race(contenders, seconds=args.time)
        report["latency_s"] = {k: v.median_s for k, v in times.items()}
        report["spread"] = {k: round(v.spread, 3) for k, v in times.items()}
        for name in peers:
            report[f"ratio_{name}"] = times[name].median_s / times["tilegraph"].median_s
    profile_lines: list[str] = []
    if args.profile:
        profile_lines = _profile(model, inputs, args, report, onnx_path, peers, thread_count)
    if args.output:
        out_dir = Path(args.output)
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
            for name, array in outputs.items():
                np.save(out_dir / output_file_name(name), array)
        except OSError as e:
            raise ValueError(f"--output {out_dir}: cannot write there ({e.strerror or e})") from None
    if args.json:
        print(json.dumps(report, allow_nan=False))
        return 0
    if gate is not None:
        print(f"precision {gate.line()}")
    for name, array in outputs.items():
        print(f"output {name}: {array.dtype}{list(array.shape)}  mean {float(array.mean()):.6g}  "
              f"max|.| {float(np.abs(array).max()):.6g}")
    for name in peers:
        mismatches = report[f"{name}_nonfinite_mismatches"]
        extra = f"; {mismatches} elements differ in NaN or infinity" if mismatches else ""
        print(f"vs {name}: max relative error {report[f'{name}_relative_error']:.2e}{extra}")
    if args.bench:
        for name, seconds in report["latency_s"].items():
            ratio = "" if name == "tilegraph" else f"  ({report[f'ratio_{name}']:.2f}x: {name} time / tilegraph time)"
            print(f"{name:>14}: {seconds * 1e3:9.3f} ms  spread {report['spread'][name]:.1%}{ratio}")
    for line in profile_lines:
        print(line)
    return 0


def _profile(model: Any, inputs: dict[str, np.ndarray], args: argparse.Namespace, report: dict[str, Any],
             onnx_path: Path | None, peers: list[str], thread_count: int) -> list[str]:
    """--profile: the in-situ profile (and ONNX Runtime's by op type with --vs onnxruntime) into the
    report; the lines to print."""
    from tilegraph.graph.profile import compare_by_op, onnxruntime_profile

    prof = model.profile(inputs, seconds=args.time)  # a device model: each step synchronized on the device
    report["profile"] = prof.to_json()
    lines = ["", prof.table(top=args.top)]
    if "onnxruntime" in peers and onnx_path is not None:
        peer_inputs = {**inputs, **_bound_values(onnx_path, args.value)}
        ort = onnxruntime_profile(str(onnx_path), peer_inputs, threads=thread_count)
        report["onnxruntime_profile"] = {"by_op_s": ort.by_op, "end_to_end_s": ort.end_to_end_s, "calls": ort.calls}
        lines += ["", compare_by_op(prof, ort)]
    return lines


__all__ = ["add_commands", "cmd_compile", "cmd_run", "input_values"]
