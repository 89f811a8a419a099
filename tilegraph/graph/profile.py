"""In-situ profile of a compiled model: every step timed inside the running model, not alone.

    prof = model.profile({"x": x})            # or profile_model(model, inputs, seconds=2.0)
    print(prof.table(top=15))                 # per step: time, share, GFLOP/s, % of peak, nodes
    prof.end_to_end_s, prof.kernel_sum_s, prof.gap_s
    ort = onnxruntime_profile("m.onnx", feeds, threads=2)   # ONNX Runtime's own profile, by op type
    print(compare_by_op(prof, ort))

A kernel timed alone runs with warm caches and its operands where the previous run left them; in
the model it follows other kernels, so its inputs may be in cache or evicted, and its threads start
from wherever the previous kernel left them. The profile times the model as it runs: calls of the
model are alternated, plain (the end-to-end time a user sees) and instrumented (each launch timed
with the monotonic clock around its ctypes call), for `seconds` after a warm-up; each step's time is
its median over the instrumented calls. The gap is the plain end-to-end median minus the sum of
the step medians: input and output copies, Python between launches, thread wake-ups not inside a
launch. `instrumented_s` (the median instrumented call) against `end_to_end_s` shows what timing
itself costs.

GFLOP/s count each step's nodes' floating-point operations (graph/kernels.py's one-node workloads,
2 per multiply-add); % of peak is against the machine's measured fp32 peak at the model's threads.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

MIN_CALLS = 5


@dataclass(frozen=True)
class StepProfile:
    index: int
    kernel: str                   # the kernel's entry point
    nodes: tuple[str, ...]        # graph nodes it computes
    ops: tuple[str, ...]          # their op types, in node order
    seconds: float                # median over the instrumented calls
    flops: float | None           # of its nodes; None when a node's count is unknown

    @property
    def op(self) -> str:
        """The step's leading op: the first reduction-like op it covers, else its first op."""
        for name in ("matmul", "conv2d", "conv", "gemm", "softmax", "layer_norm", "reduce", "pool", "gather"):
            for op in self.ops:
                if name in op:
                    return op
        return self.ops[0] if self.ops else "?"


@dataclass(frozen=True)
class ModelProfile:
    model: str
    steps: tuple[StepProfile, ...]
    end_to_end_s: float           # median of the plain calls
    instrumented_s: float         # median of the instrumented calls
    calls: int                    # instrumented calls (as many plain ones)
    threads: int
    peak_flops: float | None      # fp32 FLOP/s of `threads` cores; None when unknown
    spread: float = 0.0           # (p90 - p10) / median of the plain calls

    @property
    def kernel_sum_s(self) -> float:
        return sum(s.seconds for s in self.steps)

    @property
    def gap_s(self) -> float:
        """End-to-end time no step explains (glue: copies, Python, threads between launches)."""
        return self.end_to_end_s - self.kernel_sum_s

    @property
    def flops(self) -> float | None:
        counts = [s.flops for s in self.steps]
        return None if any(c is None for c in counts) else float(sum(counts))  # type: ignore[arg-type]

    def by_op(self) -> dict[str, float]:
        """Seconds per leading op type, largest first."""
        out: dict[str, float] = {}
        for s in self.steps:
            out[s.op] = out.get(s.op, 0.0) + s.seconds
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def table(self, top: int | None = 20) -> str:
        e2e = self.end_to_end_s
        rows = sorted(self.steps, key=lambda s: -s.seconds)
        shown = rows if top is None else rows[:top]
        lines = [f"in-situ profile of {self.model}: {len(self.steps)} steps, {self.calls} instrumented calls, "
                 f"{self.threads} threads" + (f", peak {self.peak_flops / 1e9:.0f} GFLOP/s" if self.peak_flops else ""),
                 f"{'#':>4} {'ms':>8} {'share':>6} {'GFLOP/s':>8} {'%peak':>6}  kernel / nodes"]
        for s in shown:
            gflops = s.flops / s.seconds / 1e9 if s.flops is not None and s.seconds > 0 else None
            peak = 100 * s.flops / s.seconds / self.peak_flops if gflops is not None and self.peak_flops else None
            nodes = ", ".join(s.nodes[:3]) + (f" +{len(s.nodes) - 3}" if len(s.nodes) > 3 else "")
            lines.append(f"{s.index:>4} {s.seconds * 1e3:>8.3f} {100 * s.seconds / e2e:>5.1f}% "
                         f"{_f(gflops, 8, 1)} {_f(peak, 6, 1)}  {s.kernel} [{'+'.join(dict.fromkeys(s.ops))}] {nodes}")
        if top is not None and len(rows) > top:
            rest = sum(s.seconds for s in rows[top:])
            lines.append(f"{'':>4} {rest * 1e3:>8.3f} {100 * rest / e2e:>5.1f}%  ({len(rows) - top} more steps)")
        flops = self.flops
        model_rate = f", {flops / e2e / 1e9:.1f} GFLOP/s" if flops else ""
        model_peak = f" ({100 * flops / e2e / self.peak_flops:.1f}% of peak)" if flops and self.peak_flops else ""
        lines += [f"end to end {e2e * 1e3:.3f} ms (spread {self.spread:.2f}){model_rate}{model_peak}; "
                  f"steps sum to {self.kernel_sum_s * 1e3:.3f} ms ({100 * self.kernel_sum_s / e2e:.1f}%); "
                  f"gap {self.gap_s * 1e3:.3f} ms ({100 * self.gap_s / e2e:.1f}%: input/output copies, Python "
                  f"between launches, thread start-up outside the kernels); timing each step cost "
                  f"{(self.instrumented_s - e2e) * 1e3:+.3f} ms a call"]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "end_to_end_s": self.end_to_end_s, "instrumented_s": self.instrumented_s,
                "kernel_sum_s": self.kernel_sum_s, "gap_s": self.gap_s, "calls": self.calls, "threads": self.threads,
                "peak_flops": self.peak_flops, "spread": self.spread, "flops": self.flops,
                "steps": [{"index": s.index, "kernel": s.kernel, "nodes": list(s.nodes), "ops": list(s.ops),
                           "seconds": s.seconds, "flops": s.flops} for s in self.steps]}


def _f(value: float | None, width: int, digits: int) -> str:
    return f"{value:>{width}.{digits}f}" if value is not None else f"{'-':>{width}}"


def node_flops(graph: Any, node: Any, dims: Mapping[str, int] | None = None) -> float | None:
    """Floating-point operations of one graph node (its one-node workload's, at the run-time dims'
    values `dims` where it has some), None if it has none."""
    from tilegraph.graph.kernels import kernel_spec

    try:
        workload = kernel_spec(graph, node).workload
        if dims and workload.dims:
            workload = workload.at({d.name: dims[d.name] for d in workload.dims})
        return float(workload.flops())
    except Exception:  # a node with no kernel of its own (a view, an op lowered only inside a group)
        return None


def _peak(model: Any, threads: int) -> float | None:
    try:
        from tilegraph.tune.hardware import hardware_model

        return hardware_model(model.target).peak_flops(cores=threads)
    except Exception:  # no compiler to measure with, a foreign target: the table leaves % of peak out
        return None


def profile_model(model: Any, inputs: Mapping[str, np.ndarray], seconds: float = 2.0,
                  min_calls: int = MIN_CALLS) -> ModelProfile:
    """The in-situ profile of a CompiledModel on `inputs` (module docstring); a model on a GPU target
    (DeviceModel) has each step synchronized on the device (_device_execute)."""
    from tilegraph.graph.device_model import DeviceModel
    from tilegraph.runtime import threads as thread_config

    device = isinstance(model, DeviceModel)
    execute = _device_execute(model) if device else model._execute
    model.run(inputs)  # warm-up: binds, pages the weights in (a device model: captures its graph)
    model.run(inputs)
    plain: list[float] = []
    timed: list[float] = []
    per_step: list[list[int]] = []
    clock = time.perf_counter
    deadline = clock() + seconds
    while len(plain) < min_calls or clock() < deadline:
        began = clock()
        model.run(inputs)
        plain.append(clock() - began)
        step_ns: list[int] = []
        began = clock()
        execute(inputs, step_ns)
        timed.append(clock() - began)
        per_step.append(step_ns)
    used = 1 if device else thread_config.configured_num_threads() or model.target.num_cores or 1
    values = model._dims_values(inputs) if getattr(model.graph, "dims", None) else {}  # this call's run-time dims
    nodes = {n.name: n for n in model.graph.nodes}
    flops_of: dict[str, float | None] = {}
    steps = []
    for i, step in enumerate(model.steps):
        covers = step.covers
        for name in covers:
            if name not in flops_of:
                flops_of[name] = node_flops(model.graph, nodes[name], values) if name in nodes else None
        counts = [flops_of[n] for n in covers]
        ops = tuple(nodes[n].op if n in nodes else "?" for n in covers)
        median_ns = statistics.median(run[i] for run in per_step)
        steps.append(StepProfile(i, model.kernel_objects[step.kernel].entry, tuple(covers), ops, median_ns / 1e9,
                                 None if any(c is None for c in counts) else float(sum(counts))))  # type: ignore[arg-type]
    e2e = statistics.median(plain)
    p10, p90 = np.percentile(plain, [10, 90])
    return ModelProfile(model.graph.name, tuple(steps), e2e, statistics.median(timed), len(timed), int(used),
                        None if device else _peak(model, int(used)),  # the hardware model measures CPUs
                        float((p90 - p10) / e2e) if e2e else 0.0)


def _device_execute(model: Any) -> Any:
    """A device model's instrumented call: inputs uploaded, then each step launched and the device
    synchronized before the clock is read again, so a step's time is its kernel's on the device
    (plus one launch and one synchronization, a few microseconds); the outputs downloaded. Device
    launches are asynchronous: without the synchronization every step would time its launch only."""
    def execute(inputs: Mapping[str, np.ndarray], step_ns: list[int]) -> None:
        memory = model._bind_device()
        for name in model.graph.inputs:
            memory.upload(model._handle(name), model._checked(name, inputs[name]))
        memory.synchronize()
        clock = time.perf_counter_ns
        for step in model._device_steps:
            began = clock()
            step()
            memory.synchronize()
            step_ns.append(clock() - began)
        for name in model.graph.outputs:
            t = model.graph.type_of(name)
            memory.download(model._handle(name), np.empty(t.shape, dtype=t.dtype))

    return execute


# ------------------------------------------------------------------------------ ONNX Runtime's side
@dataclass(frozen=True)
class PeerProfile:
    name: str
    by_op: dict[str, float]       # seconds per call, per op type (ONNX names), largest first
    end_to_end_s: float           # median session.run of the profiled calls
    calls: int

    @property
    def kernel_sum_s(self) -> float:
        return sum(self.by_op.values())


def onnxruntime_profile(onnx_path: str, feeds: Mapping[str, np.ndarray], threads: int, calls: int = 20) -> PeerProfile:
    """ONNX Runtime's own per-node profile (SessionOptions.enable_profiling): per op type, the median
    over `calls` timed calls of that call's node times; ORT_ENABLE_ALL, `threads` intra-op threads,
    as graph/race.py runs it. Profiling costs ORT time too: its end_to_end_s is the profiled call's."""
    import os
    import tempfile

    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "ort")
        session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        feed = {i.name: feeds[i.name] for i in session.get_inputs()}
        for _ in range(3):
            session.run(None, feed)
        # the warm-up calls' events are dropped below: only the last `calls` runs count
        times = []
        for _ in range(calls):
            began = time.perf_counter()
            session.run(None, feed)
            times.append(time.perf_counter() - began)
        path = session.end_profiling()
        events = json.loads(Path(path).read_text())
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"][-calls:]
    kernels = [e for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")]
    per_run: list[dict[str, float]] = []
    for run in runs:  # each timed call's node events, summed per op type
        begin, end = run["ts"], run["ts"] + run["dur"]
        sums: dict[str, float] = {}
        for e in kernels:
            if begin <= e.get("ts", -1) <= end:
                op = e.get("args", {}).get("op_name", "?")
                sums[op] = sums.get(op, 0.0) + float(e.get("dur", 0)) / 1e6
        per_run.append(sums)
    ops = {op for sums in per_run for op in sums}
    # the median over calls, per op type: one descheduled call does not move the table
    by_op = {op: statistics.median(sums.get(op, 0.0) for sums in per_run) for op in ops}
    return PeerProfile("onnxruntime", dict(sorted(by_op.items(), key=lambda kv: -kv[1])), statistics.median(times),
                       len(per_run))


# tilegraph's op names (graph/ops/registry.py) for ONNX Runtime's op types, to put rows side by side
_ORT_GROUPS = {"Conv": "conv2d", "FusedConv": "conv2d", "NchwcConv": "conv2d", "QLinearConv": "conv2d",
               "MatMul": "matmul", "FusedMatMul": "matmul", "Gemm": "matmul", "FusedGemm": "matmul",
               "Attention": "matmul", "MultiHeadAttention": "matmul",
               "Softmax": "softmax", "LayerNormalization": "layer_norm", "SkipLayerNormalization": "layer_norm",
               "SimplifiedLayerNormalization": "layer_norm", "MaxPool": "max_pool2d", "GlobalAveragePool": "global_avg_pool",
               "AveragePool": "avg_pool2d", "Gather": "gather", "BiasGelu": "gelu", "Gelu": "gelu", "FastGelu": "gelu",
               "Add": "add", "Mul": "mul", "Relu": "relu", "Transpose": "transpose", "Reshape": "reshape",
               "ReorderInput": "layout", "ReorderOutput": "layout", "Flatten": "reshape", "Squeeze": "reshape",
               "Unsqueeze": "reshape"}


def _snake(op: str) -> str:
    """ReduceMean -> reduce_mean: an ONNX op type as the graph level names it."""
    return "".join(("_" + c.lower()) if c.isupper() and i else c.lower() for i, c in enumerate(op))


def compare_by_op(ours: ModelProfile, peer: PeerProfile) -> str:
    """tilegraph's in-situ time per leading op beside ONNX Runtime's per op type (mapped to our names)."""
    theirs: dict[str, float] = {}
    for op, secs in peer.by_op.items():
        key = _ORT_GROUPS.get(op) or _snake(op)
        theirs[key] = theirs.get(key, 0.0) + secs
    mine = ours.by_op()
    keys = sorted(set(mine) | set(theirs), key=lambda k: -max(mine.get(k, 0.0), theirs.get(k, 0.0)))
    lines = [f"{'op':<18} {'tilegraph ms':>13} {peer.name + ' ms':>15} {'ratio':>7}"]
    for k in keys:
        a, b = mine.get(k), theirs.get(k)
        ratio = f"{b / a:>7.2f}" if a and b else f"{'-':>7}"
        lines.append(f"{k:<18} {_f(a * 1e3 if a else None, 13, 3)} {_f(b * 1e3 if b else None, 15, 3)} {ratio}")
    lines.append(f"{'kernels':<18} {ours.kernel_sum_s * 1e3:>13.3f} {peer.kernel_sum_s * 1e3:>15.3f} "
                 f"{peer.kernel_sum_s / ours.kernel_sum_s:>7.2f}")
    lines.append(f"{'end to end':<18} {ours.end_to_end_s * 1e3:>13.3f} {peer.end_to_end_s * 1e3:>15.3f} "
                 f"{peer.end_to_end_s / ours.end_to_end_s:>7.2f}")
    lines.append("ratio = the peer's time / tilegraph's (above 1: tilegraph is faster); op rows group ONNX "
                 "Runtime's fused ops under the op they lead (FusedConv as conv2d, ...)")
    return "\n".join(lines)


__all__ = ["ModelProfile", "PeerProfile", "StepProfile", "compare_by_op", "node_flops", "onnxruntime_profile",
           "profile_model"]
