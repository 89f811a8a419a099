"""python -m benchmarks.run int8: QDQ int8 models against ONNX Runtime and OpenVINO on the same file.

    python -m benchmarks.run int8                           # resnet50, bert
    python -m benchmarks.run int8 --only resnet50 --threads 2 --out DIR

Each reference model's ONNX file is quantized once as users do it (onnxruntime.quantization's
quant_pre_process, then quantize_static: QDQ format, per-channel int8 weights, int8 activations,
16 random calibration inputs; cached beside the model as NAME_qdq.onnx; `--format dynamic`:
quantize_dynamic's file, NAME_dynamic.onnx, instead; `--format precision`: tilegraph compiles the
float32 file with precision="int8", its own dynamic quantization, the peers run NAME_dynamic.onnx).
tilegraph compiles the QDQ
file (`--budget S` seconds of tuning per model, default none: Gensor's constructed kernels;
convolutions and GEMMs on the integers,
frontends/onnx_qdq.py) and the float32 file; raced in one process (graph/race.py: alternating
rounds, medians) against ONNX Runtime on both files and OpenVINO on the QDQ file (its int8).
Errors are against ONNX Runtime's output on the same QDQ file, and against float32.
Writes int8.md and int8.json.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from pathlib import Path

import numpy as np

MODELS = ("resnet50", "bert")
CALIBRATION = 16


def qdq_file(name: str) -> Path:
    """The reference model quantized by onnxruntime.quantization (cached)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from tilegraph.cli.models import _resolve
    from tilegraph.graph.compile import as_graph
    from tilegraph.graph.precision import random_inputs

    source, _, _ = _resolve(name)
    out = source.with_name(f"{source.stem}_qdq.onnx")
    if out.exists():
        return out
    graph = as_graph(str(source))

    class Calibration(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter([random_inputs(graph, seed) for seed in range(CALIBRATION)])

        def get_next(self) -> dict | None:
            return next(self.items, None)

    prepared = out.with_name(f"{source.stem}_prepared.tmp.onnx")
    quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
    partial = out.with_suffix(".tmp.onnx")
    quantize_static(str(prepared), str(partial), Calibration(), quant_format=QuantFormat.QDQ, per_channel=True)
    prepared.unlink()
    partial.replace(out)
    return out


def dynamic_file(name: str) -> Path:
    """The reference model quantized by onnxruntime.quantization.quantize_dynamic (int8 weights;
    DynamicQuantizeLinear -> MatMulInteger, the activations' scales computed per call; cached)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from tilegraph.cli.models import _resolve

    source, _, _ = _resolve(name)
    out = source.with_name(f"{source.stem}_dynamic.onnx")
    if not out.exists():
        partial = out.with_suffix(".tmp.onnx")
        quantize_dynamic(str(source), str(partial), weight_type=QuantType.QInt8)
        partial.replace(out)
    return out


# the peers' int8 file; "precision": tilegraph quantizes the float32 file itself (precision="int8",
# graph/passes/gemms_read_int8.py), the peers run quantize_dynamic's file of the same model
FORMATS = {"qdq": qdq_file, "dynamic": dynamic_file, "precision": dynamic_file}


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run int8")
    p.add_argument("suite", choices=["int8"])
    p.add_argument("--only", default=",".join(MODELS), help="comma-separated reference models")
    p.add_argument("--threads", type=int, default=None, help="threads for every system (default: all cores)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--seconds", type=float, default=2.0, help="timing per system and model")
    p.add_argument("--orchestration", choices=["blp", "greedy"], default="blp",
                   help="how tilegraph picks its fused kernels (tg.compile's orchestration=)")
    p.add_argument("--format", choices=sorted(FORMATS), default="qdq",
                   help="qdq: quantize_static's QDQ file (default); dynamic: quantize_dynamic's; precision: "
                        "tilegraph's precision='int8' on the float32 file, the peers on quantize_dynamic's")
    p.add_argument("--budget", type=float, default=0.0,
                   help="tuning seconds per tilegraph model (tg.compile's time_budget; int8 and float32 alike; "
                        "default 0: Gensor's constructed kernels)")
    p.add_argument("--out", default=None, help="folder for int8.md / int8.json")
    return p.parse_args(argv)


def _error(got: np.ndarray, want: np.ndarray) -> float:
    return float(np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-30))


def _row(name: str, threads: int, rounds: int, seconds: float, orchestration: str, fmt: str = "qdq",
         budget: float = 0.0) -> dict:
    import tilegraph as tg
    from tilegraph.cli.models import _resolve
    from tilegraph.graph.precision import random_inputs
    from tilegraph.graph.race import PeerUnavailable, peer, race

    float_path, _, _ = _resolve(name)
    qdq_path = FORMATS[fmt](name)
    notes: list[str] = []
    start = time.perf_counter()
    if fmt == "precision":
        int8 = tg.compile(str(float_path), orchestration=orchestration, precision="int8", time_budget=budget)
        notes.append(int8.precision_report.line())
    else:
        int8 = tg.compile(str(qdq_path), orchestration=orchestration, time_budget=budget)
    compile_s = time.perf_counter() - start
    fp32 = tg.compile(str(float_path), orchestration=orchestration, time_budget=budget)
    inputs = random_inputs(fp32.graph, seed=1)
    contenders, outputs = {}, {}
    for label, model in (("tilegraph int8", int8), ("tilegraph fp32", fp32)):
        contenders[label] = (lambda m=model: m.run(inputs))
        outputs[label] = [model.run(inputs)[o] for o in model.output_names]
    for label, system, path in (("onnxruntime int8", "onnxruntime", qdq_path), ("onnxruntime fp32", "onnxruntime", float_path),
                                ("openvino int8", "openvino", qdq_path)):
        try:
            call, outs = peer(system, str(path), None, inputs, threads)
        except PeerUnavailable as e:
            notes.append(f"{label}: {e}")
            continue
        contenders[label], outputs[label] = call, list(outs())
    times = race(contenders, rounds=rounds, seconds=seconds)
    errors = {}
    for reference in ("onnxruntime int8", "onnxruntime fp32"):
        if reference in outputs:
            errors[reference] = {k: max(_error(a, b) for a, b in zip(v, outputs[reference])) for k, v in outputs.items()}
    integer = sum(n.op in ("conv2d", "matmul") and n.attr("accumulate", None) == "int32" for n in int8.graph.nodes)
    products = sum(n.op in ("conv2d", "matmul") for n in int8.graph.nodes)
    return {"model": name, "compile_int8_s": round(compile_s, 1), "integer_products": f"{integer}/{products}",
            "ms": {k: round(v.median_s * 1e3, 3) for k, v in times.items()},
            "spread": {k: round(v.spread, 3) for k, v in times.items()}, "errors": errors, "notes": notes}


SYSTEMS = ("tilegraph int8", "tilegraph fp32", "onnxruntime int8", "onnxruntime fp32", "openvino int8")


def _markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"Command: `{meta['command']}`  ", f"{meta['cpu']}, {meta['threads']} threads, {meta['date']}", "",
             "| model | " + " | ".join(f"{s} ms" for s in SYSTEMS) + " | int8 vs ORT int8 | int8 vs OV int8 | "
             "int8 vs own fp32 | error vs ORT int8 | error vs fp32 | integer products |",
             "|---" * (len(SYSTEMS) + 7) + "|"]
    for r in rows:
        ms = r["ms"]

        def ratio(peer: str, ms: dict = ms) -> str:
            return f"{ms[peer] / ms['tilegraph int8']:.2f}x" if peer in ms else "-"

        e_int8 = r["errors"].get("onnxruntime int8", {}).get("tilegraph int8", float("nan"))
        e_fp32 = r["errors"].get("onnxruntime fp32", {}).get("tilegraph int8", float("nan"))
        lines.append(f"| {r['model']} | " + " | ".join(f"{ms[s]:.2f}" if s in ms else "-" for s in SYSTEMS)
                     + f" | {ratio('onnxruntime int8')} | {ratio('openvino int8')} | {ratio('tilegraph fp32')} | "
                     + f"{e_int8:.1e} | {e_fp32:.1e} | {r['integer_products']} |")
    notes = [f"- {r['model']}: {note}" for r in rows for note in r.get("notes", ())]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def main(argv: list[str]) -> int:
    args = _parse(argv)
    import tilegraph as tg

    if args.threads:
        tg.set_num_threads(args.threads)
    threads = args.threads or tg.Target("cpu").num_cores
    rows = []
    for name in [m.strip() for m in args.only.split(",") if m.strip()]:
        print(f"int8: {name} ...", file=sys.stderr, flush=True)
        rows.append(_row(name, threads, args.rounds, args.seconds, args.orchestration, args.format, args.budget))
    from benchmarks.report import write_table_report
    from benchmarks.run import cpu_model

    meta = {"command": "python -m benchmarks.run " + " ".join(argv), "cpu": cpu_model(), "threads": threads,
            "format": args.format, "budget_s": args.budget, "date": datetime.datetime.now().isoformat(timespec="seconds")}
    text = _markdown(rows, meta)
    print(text)
    write_table_report(args.out, "int8", text, meta, rows)
    return 0
