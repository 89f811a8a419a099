"""GPU benchmark: tilegraph (Gensor GPU states, CUDA) against torch (cuBLAS / cuDNN), fp32, TF32 off.

    python -m benchmarks.gpu_bench                 # build, check, time; print a table; append to docs/performance.md
    python -m benchmarks.gpu_bench --top-k 4 --reps 50 --no-append

Per case: the default GPU schedule and Gensor's top-k GPU states; all are built with nvcc in parallel, each is checked
against torch's float64 result (outputs NaN-filled first) and timed with CUDA events; the fastest
correct one then races torch's kernel for the same computation in alternating rounds (medians).
Needs an NVIDIA GPU, nvcc and torch with CUDA.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CASES = {
    "GMM-4": "GMM-4",                                          # batch_matmul 1x1024x1024x1024
    "GPT-2 GEMM": "matmul:128,768,3072",                        # 128 tokens x d_model @ d_model x 4 d_model
    "ResNet-50 conv3x3 56": "conv2d_nhwc:1,56,56,64,64,3,1,1",  # the four 3x3 convolutions of ResNet-50
    "ResNet-50 conv3x3 28": "conv2d_nhwc:1,28,28,128,128,3,1,1",
    "ResNet-50 conv3x3 14": "conv2d_nhwc:1,14,14,256,256,3,1,1",
    "ResNet-50 conv3x3 7": "conv2d_nhwc:1,7,7,512,512,3,1,1",
    "GPT-2 softmax": "softmax:1536,128",                        # 12 heads x 128 queries, 128 keys
    "GPT-2 layer norm": "layer_norm:128,768",
    "ResNet-50 FC head": "matmul:1,2048,1000",                 # batch 1: a matrix-vector product
}
PERFORMANCE_MD = Path(__file__).resolve().parent.parent / "docs" / "performance.md"


@dataclass(frozen=True)
class Row:
    case: str
    spec: str
    tilegraph_ms: float | None
    torch_ms: float | None
    max_error: float | None
    candidates_ok: int
    candidates: int
    tune_s: float | None = None       # Gensor's proposal, builds, checks and timings of every candidate
    spearman: float | None = None     # rank correlation of the hardware model's predictions with the times
    spread: float | None = None       # (max - min) / median of our kernel's alternating rounds
    torch_spread: float | None = None

    @property
    def speedup(self) -> float | None:
        if self.tilegraph_ms is None or self.torch_ms is None or self.tilegraph_ms <= 0:
            return None
        return self.torch_ms / self.tilegraph_ms


def _fmt(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _pct(spread: float | None) -> str:
    return "" if spread is None else f" ({spread:.0%})"


def format_table(rows: list[Row], device: str) -> str:
    """A Markdown table (also readable in a terminal)."""
    lines = [f"GPU benchmark on {device}: fp32, TF32 off; ms per call (CUDA events over back-to-back launches, "
             "median of 5 alternating rounds; spread = (max - min) / median)", "",
             "| case | workload | tilegraph | torch | torch/tilegraph | max abs error | candidates ok | tuning s "
             "| Spearman(predicted, measured) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.case} | `{r.spec}` | {_fmt(r.tilegraph_ms, 4)}{_pct(r.spread)} | "
                     f"{_fmt(r.torch_ms, 4)}{_pct(r.torch_spread)} | {_fmt(r.speedup, 2)} | "
                     f"{_fmt(r.max_error, 6) if r.max_error is not None else '-'} | {r.candidates_ok}/{r.candidates} | "
                     f"{_fmt(r.tune_s, 1)} | {_fmt(r.spearman, 2)} |")
    return "\n".join(lines) + "\n"


def append_report(table: str, path: Path = PERFORMANCE_MD, when: _dt.datetime | None = None) -> None:
    when = when or _dt.datetime.now(_dt.timezone.utc)
    path.parent.mkdir(parents=True, exist_ok=True)
    header = "" if path.exists() else "# Performance\n"
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(f"{header}\n## GPU benchmark, {when:%Y-%m-%d %H:%M} UTC\n\n{table}")


def resolve(spec: str) -> Any:
    from tilegraph import workloads

    return workloads.get(spec) if ":" not in spec else workloads.from_spec(spec)


def _torch_fn(wl: Any, torch: Any) -> Any:
    """The same computation in torch on NHWC/row-major tensors, inputs in workload order."""
    op = wl.reference_spec["op"]
    params = wl.reference_spec["params"]
    if op in ("matmul", "batch_matmul"):
        return torch.matmul
    if op == "conv2d_nhwc":
        stride, pad = params["stride"], params["pad"]

        def conv(x: Any, w: Any) -> Any:  # x NHWC, w (KH, KW, CI, CO)
            y = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2), w.permute(3, 2, 0, 1), stride=stride, padding=pad)
            return y.permute(0, 2, 3, 1).contiguous()

        return conv
    if op == "softmax":
        return lambda x: torch.softmax(x, dim=-1)
    if op == "layer_norm":
        return lambda x, gamma, beta: torch.nn.functional.layer_norm(x, gamma.shape, gamma, beta, eps=1e-5)
    raise ValueError(f"no torch peer for op {op!r}")


def _time_events(fn: Any, args: list[Any], torch: Any, reps: int) -> float:
    """Milliseconds per call of `fn(*args)`: `reps` back-to-back launches between two CUDA events
    (the same way for torch and for our kernels, so launch overheads are counted alike)."""
    fn(*args)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn(*args)
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) / reps


def _alternate(contenders: dict[str, Any], torch: Any, reps: int, rounds: int = 5) -> dict[str, tuple[float, float]]:
    """(median ms, spread) per contender over `rounds` alternating rounds (one warm-up each first)."""
    for fn in contenders.values():
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            times[name].append(_time_events(fn, [], torch, reps))
    out = {}
    for name, ts in times.items():
        median = statistics.median(ts)
        out[name] = (median, (max(ts) - min(ts)) / median if median else 0.0)
    return out


def _build(wl: Any, trace: Any, target: Any) -> Any:
    """A CudaKernel of one candidate (nvcc runs in a subprocess: threads build in parallel)."""
    import tilegraph as tg
    from tilegraph.codegen.cuda import codegen_cuda
    from tilegraph.lower.gpu.pipeline import lower_gpu
    from tilegraph.runtime.cuda import CudaKernel

    program = lower_gpu(tg.Schedule.replay(wl, trace).func, target)
    return CudaKernel(program, codegen_cuda(program), len(wl.inputs), target)


def run_case(name: str, spec: str, top_k: int, reps: int) -> Row:
    import numpy as np
    import torch

    import tilegraph as tg
    from tilegraph.schedule.defaults import default_gpu_schedule
    from tilegraph.tune.gensor.gpu_state import gpu_candidates

    target = tg.Target("cuda")
    wl = resolve(spec)
    rng = np.random.default_rng(0)
    host = [rng.standard_normal(t.shape).astype(np.float32) for t in wl.inputs]
    if wl.reference_spec["op"] == "layer_norm":
        host[1] = np.abs(host[1]) + 0.5
    dev = [torch.from_numpy(a).cuda() for a in host]
    fn = _torch_fn(wl, torch)
    expected = fn(*[d.double() for d in dev]).float()
    out = torch.empty_like(expected)
    ok = 0
    started = time.perf_counter()
    # the default GPU schedule first (a row or matrix-vector kernel where the workload is one; the
    # tuner measures it as its seed too), then Gensor's states
    default = (default_gpu_schedule(wl).trace.to_json(), None, {"default": True})
    cands = [default, *gpu_candidates(wl, target, top_k=top_k)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        futures = [pool.submit(_build, wl, trace, target) for trace, _, _ in cands]
    timed: list[tuple[float, float]] = []  # (predicted s, measured ms) of the correct candidates
    best: tuple[float, Any, float] | None = None  # (ms, kernel, max error)
    for (_, predicted, _), future in zip(cands, futures):
        try:
            kernel = future.result()
            out.fill_(float("nan"))
            kernel(*dev, out=out)
            torch.cuda.synchronize()
            err = float((out - expected).abs().max())
            if not err <= 1e-3 * max(1.0, float(expected.abs().max())):
                print(f"{name}: candidate wrong (max error {err:.3g})", file=sys.stderr)
                continue
            ok += 1
            ms = _time_events(lambda k=kernel: k(*dev, out=out), [], torch, reps)
            if predicted is not None:
                timed.append((predicted, ms))
            if best is None or ms < best[0]:
                best = (ms, kernel, err)
        except (tg.TilegraphError, RuntimeError) as e:
            print(f"{name}: candidate failed: {str(e).splitlines()[0][:300]}", file=sys.stderr)
    tune_s = time.perf_counter() - started
    contenders = {"torch": lambda: fn(*dev)}
    if best is not None:
        kernel = best[1]
        contenders["tilegraph"] = lambda: kernel(*dev, out=out)
    result = _alternate(contenders, torch, reps)
    ours = result.get("tilegraph")
    return Row(name, spec, ours[0] if ours else None, result["torch"][0], best[2] if best else None, ok, len(cands),
               tune_s, _spearman(timed), ours[1] if ours else None, result["torch"][1])


def _spearman(pairs: list[tuple[float, float]]) -> float | None:
    if len(pairs) < 3:
        return None
    from scipy.stats import spearmanr

    rho = spearmanr([p for p, _ in pairs], [m for _, m in pairs]).statistic
    return None if rho != rho else float(rho)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--reps", type=int, default=50, help="launches per timing")
    parser.add_argument("--no-append", action="store_true", help="do not append to docs/performance.md")
    parser.add_argument("--cases", nargs="*", default=list(CASES), help=f"subset of {list(CASES)}")
    args = parser.parse_args(argv)
    unknown = [c for c in args.cases if c not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; known: {list(CASES)}")
    try:
        import torch
    except ImportError:
        print("gpu_bench: torch is not installed", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_bench: no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    rows = [run_case(c, CASES[c], args.top_k, args.reps) for c in args.cases]
    table = format_table(rows, torch.cuda.get_device_name())
    print(table)
    if not args.no_append:
        append_report(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
