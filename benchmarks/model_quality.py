"""How well the Gensor micro-performance model ranks programs: Spearman(predicted, measured latency).

    python benchmarks/model_quality.py                       # GMM-4 and C2D-2, 100 states each
    python benchmarks/model_quality.py --ids C2D-2 --states 40 --threads 1

For each workload: collect distinct feasible ETIR states by unbiased random walks on the construction
graph (beta = 0: every feasible move equally likely, from the minimal state and Roller's picks),
sample `--states` of them, build each, check it once against the float64 reference, time it
(single thread by default, a few repeats) and report the Spearman rank correlation between the
model's T̂ and the measured median, plus the measured rank of the model's favourite.

A benchmark, not a test: on a shared machine the timings, and so the correlation, are noisy.
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import replace

import numpy as np
from scipy.stats import spearmanr

import tilegraph as tg
from tilegraph import workloads
from tilegraph.testing import random_inputs, reference_outputs
from tilegraph.tune.gensor.markov import MarkovConfig, random_walks
from tilegraph.tune.gensor.policy import SearchSetup, roller_construct
from tilegraph.tune.gensor.state import EtirState
from tilegraph.tune.gensor.to_trace import state_to_schedule
from tilegraph.tune.hardware import HardwareModel, hardware_model


def hardware_for_threads(threads: int) -> HardwareModel:
    """This machine's model restricted to `threads` cores, so predictions match how we time."""
    hw = hardware_model()
    cores = max(1, min(threads, hw.cores))
    return replace(hw, cores=cores, peak_flops_all=hw.peak_flops(cores))


def sample_states(setup: SearchSetup, count: int, seed: int) -> list[EtirState]:
    """`count` distinct feasible states reached by uniform random walks (fewer if the space is small)."""
    uniform = replace(setup.graph.config, beta=0.0, restart=0.02, max_walks=20 * count, time_budget_s=60.0,
                      patience=10 * count, seed=seed)
    setup.graph.config = uniform
    seeds = list(dict.fromkeys([setup.minimal, *roller_construct(setup, 8)]))
    visited = list(random_walks(setup.graph, seeds, uniform).visits)
    random.Random(seed).shuffle(visited)
    return visited[:count]


def measure_state(wl: tg.Workload, setup: SearchSetup, state: EtirState, args: list[np.ndarray],
                  ref: list[np.ndarray], threads: int, repeat: int) -> float | None:
    try:
        kernel = tg.build(state_to_schedule(wl, setup.space, state), target="cpu")
    except tg.TilegraphError:
        return None
    out = kernel(*args, num_threads=threads)
    out = out if isinstance(out, tuple) else (out,)
    for got, want in zip(out, ref):
        if not np.allclose(got, want, rtol=1e-3, atol=1e-3):
            raise AssertionError(f"state {state} computes a wrong result")
    return kernel.time(*args, num_threads=threads, warmup=1, min_time=0.0, repeat=repeat, number=1).median


def evaluate(wid: str, count: int, threads: int, repeat: int, seed: int) -> dict[str, float]:
    wl = workloads.get(wid)
    setup = SearchSetup.create(wl, hardware_for_threads(threads), MarkovConfig())
    states = sample_states(setup, count, seed)
    args = random_inputs(wl, seed=0)
    ref = reference_outputs(wl, args)
    predicted, measured = [], []
    start = time.perf_counter()
    for n, state in enumerate(states):
        seconds = measure_state(wl, setup, state, args, ref, threads, repeat)
        if seconds is None:
            continue
        predicted.append(setup.model.predict(state))
        measured.append(seconds)
        if (n + 1) % 20 == 0:
            print(f"  {wid}: {n + 1}/{len(states)} states measured", flush=True)
    rho = float(spearmanr(predicted, measured).statistic)
    best_predicted = int(np.argmin(predicted))
    rank = int(np.sum(np.array(measured) < measured[best_predicted])) + 1
    return {"states": len(measured), "spearman": rho, "top1_measured_rank": rank,
            "best_measured_ms": min(measured) * 1e3, "model_pick_ms": measured[best_predicted] * 1e3,
            "seconds": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="*", default=["GMM-4", "C2D-2"])
    parser.add_argument("--states", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print("| workload | states | Spearman | model pick: measured rank | model pick (ms) | best (ms) | seconds |")
    print("|---|---|---|---|---|---|---|")
    for wid in args.ids:
        r = evaluate(wid, args.states, args.threads, args.repeat, args.seed)
        print(f"| {wid} | {r['states']} | {r['spearman']:.3f} | {r['top1_measured_rank']} | "
              f"{r['model_pick_ms']:.3f} | {r['best_measured_ms']:.3f} | {r['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
