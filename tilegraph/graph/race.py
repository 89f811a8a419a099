"""Racing whole models: contenders timed alternately in one process (warm-up, rounds, medians).

    times = race({"tilegraph": lambda: model(x), "onnxruntime": ort_run}, rounds=5, seconds=0.5)
    times["tilegraph"].median_s, .spread          # median of the per-round medians; spread = (max-min)/median

Contenders run one after another, never at once (on a 2-core machine two would share the cores).
`peer(name, ...)` makes the callable of ONNX Runtime (ORT_ENABLE_ALL), OpenVINO (CPU plugin, latency
hint, one stream, fp32: `OPENVINO_PRECISION`; "openvino.bf16" asks for bf16, its default on CPUs with
AVX512_BF16, where a CPU without it computes f32) or
PyTorch eager / torch.compile with a thread count, or raises PeerUnavailable with the reason.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tilegraph.runtime.timer import measure

PEERS = ("onnxruntime", "openvino", "openvino.bf16", "torch", "torch.compile")
OPENVINO_PRECISION = "f32"  # "openvino": the fp32 comparison; "openvino.bf16" hints bf16 (its CPU default with AVX512_BF16)


class PeerUnavailable(ValueError):
    pass


@dataclass(frozen=True)
class RaceResult:
    median_s: float
    rounds_s: tuple[float, ...]

    @property
    def spread(self) -> float:
        return (max(self.rounds_s) - min(self.rounds_s)) / self.median_s if self.median_s else 0.0


def race(contenders: Mapping[str, Callable[[], Any]], rounds: int = 5, seconds: float = 0.5) -> dict[str, RaceResult]:
    for run in contenders.values():  # warm-up (first calls page weights in, fill caches, JIT)
        run()
    per_round: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, run in contenders.items():
            per_round[name].append(measure(run, warmup=1, min_time=seconds / rounds, repeat=3).median)
    return {name: RaceResult(statistics.median(ts), tuple(ts)) for name, ts in per_round.items()}


def peer(name: str, onnx_path: str | None, torch_module: Any, inputs: Mapping[str, np.ndarray],
         threads: int) -> tuple[Callable[[], Any], Callable[[], Sequence[np.ndarray]]]:
    """(timed callable, a callable returning the outputs as numpy) for peer `name`."""
    if name == "onnxruntime":
        if onnx_path is None:
            raise PeerUnavailable("onnxruntime needs the model as an ONNX file")
        try:
            import onnxruntime as ort
        except ImportError:
            raise PeerUnavailable("onnxruntime is not installed (pip install 'tilegraph[models]')") from None
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        try:
            session = ort.InferenceSession(str(onnx_path), options, providers=["CPUExecutionProvider"])
        except Exception as e:  # ORT refuses the model (an operator or type its CPU provider lacks): one line
            reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
            raise PeerUnavailable(f"onnxruntime cannot run this model: {reason[:200]}") from None
        feeds = {i.name: inputs[i.name] for i in session.get_inputs()}
        return (lambda: session.run(None, feeds)), (lambda: session.run(None, feeds))
    if name in ("openvino", "openvino.bf16"):
        return _openvino(onnx_path, inputs, threads, "bf16" if name == "openvino.bf16" else OPENVINO_PRECISION)
    if name in ("torch", "torch.compile"):
        if torch_module is None:
            raise PeerUnavailable(f"{name} needs the model's PyTorch definition (a reference model name such as "
                                  "resnet50, not an ONNX file)")
        import torch

        torch.set_num_threads(threads)
        args = tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in inputs.values())
        module = torch_module
        if name == "torch.compile":
            import torch._inductor.config as inductor_config

            inductor_config.freezing = True
            module = torch.compile(torch_module)

        def call() -> Any:
            with torch.inference_mode():
                return module(*args)

        def outputs() -> list[np.ndarray]:
            out = call()
            return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]

        return call, outputs
    raise PeerUnavailable(f"unknown peer {name!r}; known peers: {', '.join(PEERS)}")


def _openvino(onnx_path: str | None, inputs: Mapping[str, np.ndarray], threads: int,
              precision: str = OPENVINO_PRECISION) -> tuple[Callable[[], Any], Callable[[], Sequence[np.ndarray]]]:
    if onnx_path is None:
        raise PeerUnavailable("openvino needs the model as an ONNX file")
    try:
        import openvino as ov
    except ImportError:
        raise PeerUnavailable("openvino is not installed (pip install 'tilegraph[bench]')") from None
    config = {"INFERENCE_PRECISION_HINT": precision, "INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
              "PERFORMANCE_HINT": "LATENCY"}
    try:
        core = ov.Core()
        compiled = core.compile_model(core.read_model(str(onnx_path)), "CPU", config)
    except Exception as e:  # OpenVINO refuses the model (an operator its CPU plugin lacks): one line
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        raise PeerUnavailable(f"openvino cannot run this model: {reason[:200]}") from None
    request = compiled.create_infer_request()
    feeds = {port.get_any_name(): inputs[port.get_any_name()] for port in compiled.inputs}

    def outputs() -> list[np.ndarray]:
        request.infer(feeds)
        return [np.array(request.get_output_tensor(i).data, copy=True) for i in range(len(compiled.outputs))]

    return (lambda: request.infer(feeds)), outputs


__all__ = ["race", "peer", "RaceResult", "PeerUnavailable", "PEERS", "OPENVINO_PRECISION"]
