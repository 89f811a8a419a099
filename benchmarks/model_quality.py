"""How well the Gensor micro-performance model ranks programs: Spearman(predicted, measured latency).

    python benchmarks/model_quality.py                       # GMM-4 and C2D-2, 100 states each
    python benchmarks/model_quality.py --ids C2D-2 --states 40 --threads 1

For each workload: collect distinct feasible ETIR states by unbiased random walks on the construction
graph (beta = 0: every feasible move equally likely, from the minimal state and Roller's picks),
sample `--states` of them, build each, check it once against the float64 reference, time it
(single thread by default, a few repeats) and report the Spearman rank correlation between the
model's T̂ and the measured median, plus the measured rank of the model's favourite.

With `--save DIR` the measurements are written to DIR/<id>.json ({"state", "measured_s"} per
state); `--load DIR` re-scores stored measurements with the current model (no building, no timing),
and `--worst N` lists the N states whose predicted rank is furthest from their measured rank, with
the model's breakdown: the loop for calibrating the model.

A benchmark, not a test: on a shared machine the timings, and so the correlation, are noisy.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import replace
from pathlib import Path

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


def measure_states(wid: str, count: int, threads: int, repeat: int, seed: int) -> list[tuple[EtirState, float]]:
    """Sample, build, check and time `count` states of `wid`: (state, measured seconds) per built state."""
    wl = workloads.get(wid)
    setup = SearchSetup.create(wl, hardware_for_threads(threads), MarkovConfig())
    states = sample_states(setup, count, seed)
    args = random_inputs(wl, seed=0)
    ref = reference_outputs(wl, args)
    out = []
    for n, state in enumerate(states):
        seconds = measure_state(wl, setup, state, args, ref, threads, repeat)
        if seconds is not None:
            out.append((state, seconds))
        if (n + 1) % 20 == 0:
            print(f"  {wid}: {n + 1}/{len(states)} states measured", flush=True)
    return out


def save_measurements(path: Path, rows: list[tuple[EtirState, float]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps([{"state": s.to_dict(), "measured_s": t} for s, t in rows], indent=0))


def load_measurements(path: Path) -> list[tuple[EtirState, float]]:
    return [(EtirState.from_dict(r["state"]), float(r["measured_s"])) for r in json.loads(path.read_text())]


def score(wid: str, rows: list[tuple[EtirState, float]], threads: int, worst: int = 0) -> dict[str, float]:
    """Spearman and the model pick's measured rank of stored measurements under the current model."""
    setup = SearchSetup.create(workloads.get(wid), hardware_for_threads(threads), MarkovConfig())
    predicted = [setup.model.predict(s) for s, _ in rows]
    measured = [t for _, t in rows]
    if worst:
        show_worst(setup, rows, predicted, worst)
    rho = float(spearmanr(predicted, measured).statistic)
    best_predicted = int(np.argmin(predicted))
    rank = int(np.sum(np.array(measured) < measured[best_predicted])) + 1
    return {"states": len(measured), "spearman": rho, "top1_measured_rank": rank,
            "best_measured_ms": min(measured) * 1e3, "model_pick_ms": measured[best_predicted] * 1e3}


def show_worst(setup: SearchSetup, rows: list[tuple[EtirState, float]], predicted: list[float], n: int) -> None:
    measured = np.array([t for _, t in rows])
    p_rank = np.argsort(np.argsort(predicted))
    m_rank = np.argsort(np.argsort(measured))
    for i in np.argsort(-np.abs(p_rank - m_rank))[:n]:
        s = rows[i][0]
        b = setup.model.breakdown(s)
        print(f"  rank pred {p_rank[i]:3d} meas {m_rank[i]:3d}  pred {predicted[i] * 1e3:8.2f} ms  "
              f"meas {measured[i] * 1e3:8.2f} ms  comp {b.t_comp * 1e3:7.2f} mem {b.t_mem * 1e3:7.2f} eff {b.kernel_eff:.2f}"
              f"  reg={s.reg} l2={s.l2} unroll={s.unroll} par={s.parallel} pack={s.pack}")


def evaluate(wid: str, count: int, threads: int, repeat: int, seed: int, save: Path | None = None,
             worst: int = 0) -> dict[str, float]:
    start = time.perf_counter()
    rows = measure_states(wid, count, threads, repeat, seed)
    if save is not None:
        save_measurements(save / f"{wid}.json", rows)
    return {**score(wid, rows, threads, worst), "seconds": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", nargs="*", default=["GMM-4", "C2D-2"])
    parser.add_argument("--states", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--save", type=Path, default=None, help="write the measurements to DIR/<id>.json")
    parser.add_argument("--load", type=Path, default=None, help="re-score DIR/<id>.json, measuring nothing")
    parser.add_argument("--worst", type=int, default=0, help="list the N most mispredicted states")
    args = parser.parse_args(argv)
    print("| workload | states | Spearman | model pick: measured rank | model pick (ms) | best (ms) | seconds |")
    print("|---|---|---|---|---|---|---|")
    for wid in args.ids:
        if args.load is not None:
            start = time.perf_counter()
            rows = load_measurements(args.load / f"{wid}.json")
            r = {**score(wid, rows, args.threads, args.worst), "seconds": time.perf_counter() - start}
        else:
            r = evaluate(wid, args.states, args.threads, args.repeat, args.seed, args.save, args.worst)
        print(f"| {wid} | {r['states']} | {r['spearman']:.3f} | {r['top1_measured_rank']} | "
              f"{r['model_pick_ms']:.3f} | {r['best_measured_ms']:.3f} | {r['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
