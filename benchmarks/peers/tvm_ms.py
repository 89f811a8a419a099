"""TVM MetaSchedule as a peer: tvm_worker.py runs in the TVM venv, in a subprocess, one per workload.

    peer = TvmPeer(budget_s=60, threads=[1, 2], rounds=5, min_sample_s=0.05)
    peer.unavailable()        # None, or why not (no venv: run benchmarks/peers/install_tvm.sh)
    result = peer.run(case)   # TvmResult with per-thread timings, tuning time, trials, relative error

Budget: MetaSchedule takes a trial count, not a time. The count is the budget, less a fixed start-up
cost (builder pool + tensor_intrin import, ~60 s), divided by the measured cost of a trial on the
2-core test machine (~2.2 s, peers_cpu.md §4), at least 8 (8 trials of a 128^3 matmul took 169 s
here); the report shows the real tuning wall time and trial count. The worker is killed after 3 x budget + 240 s (its fixed
builder start-up alone is ~40 s). TVM is timed in its own process, so it is not interleaved with
the in-process systems; its timing follows the same protocol (rounds of >= min_sample_s samples).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any

from benchmarks.peers import PeerSkip

# Budget -> trials for MetaSchedule (it takes a trial count, not a time). Calibrated 2026-11-24 on the
# 2-core Xeon VM: 81 trials took 78-124 s (GMM-4 the longest), so a 240-s budget is ~183 trials;
# the old 60 s + 2.2 s/trial (a slower LLVM build) left TVM half of its budget unused.
SECONDS_PER_TRIAL = 1.2
FIXED_START_S = 20.0
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tvm_worker.py")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TVM_OPS = ("matmul", "batch_matmul", "conv2d_nhwc", "depthwise_conv2d_nhwc", "softmax", "norm")


@dataclass
class TvmResult:
    tuning_time_s: float
    trials: int
    rel_err: float
    timings: list[dict[str, Any]] = field(default_factory=list)
    target: str = ""


def default_venv() -> str:
    return os.environ.get("TILEGRAPH_TVM_VENV", os.path.join(REPO, ".venv-tvm"))


def trials_for_budget(budget_s: float) -> int:
    return max(8, int((budget_s - FIXED_START_S) / SECONDS_PER_TRIAL))


class TvmPeer:
    name = "tvm"

    def __init__(self, budget_s: float, threads: list[int], rounds: int, min_sample_s: float,
                 venv: str | None = None, num_cores: int | None = None):
        self.budget_s = budget_s
        self.threads = threads
        self.rounds = rounds
        self.min_sample_s = min_sample_s
        self.venv = venv or default_venv()
        self.num_cores = num_cores or os.cpu_count() or 1

    @property
    def python(self) -> str:
        return os.path.join(self.venv, "bin", "python")

    def unavailable(self) -> str | None:
        if not os.path.exists(self.python):
            return f"TVM venv not found at {self.venv}; create it with benchmarks/peers/install_tvm.sh"
        return None

    def run(self, case: Any) -> TvmResult:
        if case.op not in TVM_OPS:
            raise PeerSkip(f"op {case.op or case.name!r} has no TVM te definition in tvm_worker.py")
        request = {"op": case.op, "params": case.params, "name": case.name, "trials": trials_for_budget(self.budget_s),
                   "threads": self.threads, "rounds": self.rounds, "min_sample_s": self.min_sample_s,
                   "num_cores": self.num_cores, "seed": 0, "mcpu": os.environ.get("TILEGRAPH_TVM_MCPU")}
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["TVM_NUM_THREADS"] = str(max(self.threads))
        timeout = 3 * self.budget_s + 240
        try:
            proc = subprocess.run([self.python, WORKER, json.dumps(request)], capture_output=True, text=True,
                                  timeout=timeout, env=env, cwd=REPO)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"TVM worker exceeded {timeout:.0f} s and was killed") from exc
        reply = parse_reply(proc.stdout)
        if reply is None:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"TVM worker exited {proc.returncode} without a result: {tail[0][:300]}")
        if not reply.get("ok"):
            raise RuntimeError(f"TVM worker failed: {reply.get('error', 'unknown error')}")
        return TvmResult(tuning_time_s=float(reply["tuning_time_s"]), trials=int(reply.get("records") or reply["trials"]),
                         rel_err=float(reply["rel_err"]), timings=list(reply["timings"]), target=str(reply.get("target", "")))


def parse_reply(stdout: str) -> dict[str, Any] | None:
    """The last JSON object line of the worker's stdout (TVM itself may print before it)."""
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return None


