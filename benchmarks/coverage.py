"""python -m benchmarks.run coverage: do real architectures compile, and do they match?

    python -m benchmarks.run coverage                     # all of coverage_models.ARCHITECTURES
    python -m benchmarks.run coverage --only whisper_encoder,segformer --out DIR

For each architecture (reduced `transformers` configs and small hand-written models, random weights)
and each ONNX exporter (torch.onnx legacy/TorchScript at opset 17, and dynamo): export, compile with
`tg.compile` (untuned, timed), run on the example inputs and compare with ONNX Runtime on the same
file (max |difference| / max |reference| <= 1e-4); then race the two (untuned tilegraph against
ONNX Runtime, alternating rounds, medians). Then `torch.compile(module, backend="tilegraph")`
against eager PyTorch, counting the subgraphs tilegraph took. Writes coverage.md and coverage.json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

import numpy as np

TOLERANCE = 1e-4


def _relative_error(got: np.ndarray, want: np.ndarray) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return float("inf")
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
    return float(np.max(np.abs(got - want))) / scale if want.size else 0.0


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def export(module: Any, inputs: tuple, path: Path, exporter: str) -> None:
    import torch

    names = [f"input{i}" for i in range(len(inputs))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            program = torch.onnx.export(module, inputs, dynamo=True, input_names=names, output_names=["output"],
                                        verbose=False)
            program.save(str(path))
        else:
            torch.onnx.export(module, inputs, str(path), dynamo=False, opset_version=17, input_names=names,
                              output_names=["output"])


def onnx_row(module: Any, inputs: tuple, exporter: str, workdir: Path, threads: int, rounds: int) -> dict:
    import onnx

    import tilegraph as tg
    from tilegraph.errors import TilegraphError
    from tilegraph.graph.race import peer, race

    path = workdir / f"model-{exporter}.onnx"
    try:
        export(module, inputs, path, exporter)
    except Exception as e:  # noqa: BLE001 (the exporter's failure, not ours: reported as such)
        return {"status": "export failed", "detail": _one_line(e)}
    proto = onnx.load(str(path))
    names = [i.name for i in proto.graph.input if i.name not in {t.name for t in proto.graph.initializer}]
    feeds = {n: x.detach().numpy() for n, x in zip(names, inputs)}
    ops = sorted({n.op_type for n in proto.graph.node})
    start = time.perf_counter()
    try:
        model = tg.compile(str(path))
    except TilegraphError as e:
        return {"status": "refused", "detail": _one_line(e), "ops": ops}
    except Exception as e:  # noqa: BLE001
        return {"status": "crash", "detail": _one_line(e) + "\n" + traceback.format_exc(limit=3), "ops": ops}
    compile_s = time.perf_counter() - start
    ort_run, ort_outputs = peer("onnxruntime", str(path), None, feeds, threads)
    want = ort_outputs()[0]
    got = model.run(feeds)[model.output_names[0]]
    error = _relative_error(got, want)
    row = {"status": "match" if error <= TOLERANCE else "wrong", "error": error, "compile_s": compile_s,
           "ops": ops, "kernels": len(model.kernels) if hasattr(model, "kernels") else None}
    times = race({"tilegraph": lambda: model.run(feeds), "onnxruntime": ort_run}, rounds=rounds, seconds=0.5)
    row.update(tilegraph_ms=times["tilegraph"].median_s * 1e3, onnxruntime_ms=times["onnxruntime"].median_s * 1e3,
               spread=max(times["tilegraph"].spread, times["onnxruntime"].spread))
    return row


def torch_compile_row(module: Any, inputs: tuple) -> dict:
    import torch

    from tilegraph.graph.frontends.torch_backend import tilegraph_backend

    handed: list[int] = []  # subgraphs dynamo handed to tilegraph (it runs some modules, nn.LSTM, itself)

    def backend(gm: Any, example_inputs: list[Any]) -> Any:
        handed.append(len(gm.graph.nodes))
        return tilegraph_backend(gm, example_inputs)

    with torch.no_grad():
        want = module(*inputs)
        torch._dynamo.reset()
        compiled = torch.compile(module, backend=backend)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                got = compiled(*inputs)
            except Exception as e:  # noqa: BLE001
                return {"status": "crash", "detail": _one_line(e)}
    eager = [str(w.message) for w in caught if "in eager PyTorch" in str(w.message)]
    error = _relative_error(got.numpy(), want.numpy())
    detail = eager[0][:300] if eager else "" if handed else "dynamo handed tilegraph no subgraph (it ran the module eagerly)"
    return {"status": "match" if error <= TOLERANCE else "wrong", "error": error, "subgraphs": len(handed),
            "eager_subgraphs": len(eager), "detail": detail}


def markdown(rows: list[dict], command: str) -> str:
    lines = [f"Command: `{command}`", "",
             "| architecture | exporter | result | compile s | tilegraph ms | ONNX Runtime ms | ratio | note |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for exporter in ("legacy", "dynamo"):
            e = r[exporter]
            if e["status"] == "match":
                ratio = e["onnxruntime_ms"] / e["tilegraph_ms"]
                lines.append(f"| {r['name']} | {exporter} | match ({e['error']:.1e}) | {e['compile_s']:.1f} | "
                             f"{e['tilegraph_ms']:.2f} | {e['onnxruntime_ms']:.2f} | {ratio:.2f}x | |")
            else:
                lines.append(f"| {r['name']} | {exporter} | {e['status']} | | | | | {e.get('detail', '')[:120]} |")
        t = r["torch.compile"]
        note = f"{t.get('eager_subgraphs', 0)} subgraph(s) in eager: {t.get('detail', '')[:100]}" if t.get(
            "eager_subgraphs") else t.get("detail", "")[:120]
        result = f"{t['status']} ({t['error']:.1e})" if "error" in t else t["status"]
        lines.append(f"| {r['name']} | torch.compile | {result} | | | | | {note} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    from benchmarks.coverage_models import ARCHITECTURES, build

    parser = argparse.ArgumentParser(prog="python -m benchmarks.run coverage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma list of architectures (default all)")
    parser.add_argument("--threads", type=int, default=None, help="threads for both (default: all cores)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default="", help="folder for coverage.md and coverage.json")
    args = parser.parse_args([a for a in (argv or []) if a != "coverage"])
    import os

    import torch

    threads = args.threads or os.cpu_count() or 1
    torch.set_num_threads(threads)
    chosen = [n for n in args.only.split(",") if n] or list(ARCHITECTURES)
    unknown = sorted(set(chosen) - set(ARCHITECTURES))
    if unknown:
        print(f"unknown architectures {unknown}; known: {', '.join(ARCHITECTURES)}", file=sys.stderr)
        return 2
    rows = []
    for name in chosen:
        module, inputs = build(name)
        row: dict[str, Any] = {"name": name}
        with tempfile.TemporaryDirectory() as workdir, torch.no_grad():
            for exporter in ("legacy", "dynamo"):
                row[exporter] = onnx_row(module, inputs, exporter, Path(workdir), threads, args.rounds)
        row["torch.compile"] = torch_compile_row(module, inputs)
        rows.append(row)
        summary = ", ".join(f"{k}: {row[k]['status']}" for k in ("legacy", "dynamo", "torch.compile"))
        print(f"{name}: {summary}", flush=True)
    command = "python -m benchmarks.run coverage" + (f" --only {args.only}" if args.only else "")
    text = markdown(rows, command)
    print(text)
    out = Path(args.out) if args.out else Path("benchmarks/results") / f"{datetime.date.today()}-coverage"
    out.mkdir(parents=True, exist_ok=True)
    (out / "coverage.md").write_text(text)
    (out / "coverage.json").write_text(json.dumps({"machine": platform.processor() or platform.machine(),
                                                   "threads": threads, "rows": rows}, indent=1, default=str))
    print(f"wrote {out}/coverage.md")
    return 0
