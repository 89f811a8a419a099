"""python -m benchmarks.cluster: tuning on Ray against tuning here, and a scaling model.

    python -m benchmarks.cluster --workload matmul:128,128,128 --trials 32 --rounds 2 --out DIR

Three configurations tune the same workload with the same strategy, seed and trial budget, each in
a fresh database and a fresh build cache (cold builds), in alternating rounds:
  local    tg.tune here: two builder processes (--build-workers) and one runner process
  ray-1    a one-node Ray cluster on this machine, two CPUs: two build tasks at a time, one runner
           actor (against local: Ray's overhead at the same parallelism)
  ray-1x1  one node, one CPU: one build task at a time, one runner actor
  ray-2    two Ray nodes on this machine, one CPU each: two build tasks at a time, two runner actors
           (against ray-1x1: two builders against one; both runners share this machine's
           measurement lock, so they never time at once).
Reported per configuration: seconds per measured candidate (the search loop's wall time over its
candidates), build throughput (builds per second of waiting for builders), Ray's overhead per
candidate against local, and the best latency found, the winners re-timed here alternately.
The scaling model simulates the search loop's rounds from ray-1x1's per-candidate costs (driver,
Ray's overhead per build, run and transfer) and the measured time of each build (so a round waits
for its slowest builder), and predicts ray-2 (checked against the measurement) and 4, 8 and 64
runners on separate machines.
Build throughput on its own (--throughput-rounds, 0 to skip): the traces the local runs measured,
built again in one batch (warm workers, a fresh build cache) by one and two local builder processes
and by one and two Ray nodes of one CPU each, in alternating rounds: builds per second with no
search loop around them (no rounds of 8 waiting for their slowest build, no driver time). The Ray
nodes' runner actors then measure those builds in one batch: runs per second with one and two
runners. These give the scaling model Ray's per-build overhead with warm workers (the rest of what
the loop waited for its builds is a start-up paid once per run) and how much longer builds and runs
take when two nodes share this machine.
Writes cluster.md and cluster.json to --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIGS = ("local", "ray-1", "ray-1x1", "ray-2")
# (nodes, CPUs per node): a node's CPUs are the build tasks it runs at once
SHAPES = {"ray-1": (1, 2), "ray-1x1": (1, 1), "ray-2": (2, 1)}


def _start_cluster(nodes: int, cpus: int) -> Any:
    """A Ray cluster of `nodes` nodes on this machine, `cpus` CPUs each (ray.cluster_utils)."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": cpus, "include_dashboard": False})
    for _ in range(nodes - 1):
        cluster.add_node(num_cpus=cpus)
    cluster.wait_for_nodes()
    return cluster


def _tune(config: str, wl: Any, args: argparse.Namespace, work: Path, round_: int) -> dict[str, Any]:
    """One tuning run of `config` in a fresh database and build cache; its profile's numbers."""
    import tilegraph as tg

    folder = work / f"{config}-{round_}"
    os.environ["TILEGRAPH_CACHE_DIR"] = str(folder / "cache")  # cold builds; Ray nodes inherit it at start
    cluster = None
    kwargs: dict[str, Any] = {}
    if config != "local":
        import ray

        cluster = _start_cluster(*SHAPES[config])
        ray.init(address=cluster.address, logging_level="error", log_to_driver=False)
        kwargs["cluster"] = cluster.address
    else:
        kwargs["build_workers"] = args.build_workers
    try:
        start = time.monotonic()
        result = tg.tune(wl, strategy=args.strategy, trials=args.trials, seed=args.seed, db=str(folder / "t.db"),
                         progress=False, num_threads=args.threads, batch_size=args.batch, **kwargs)
        wall = time.monotonic() - start
    finally:
        if cluster is not None:
            import ray

            ray.shutdown()
            cluster.shutdown()
    prof = result.profile
    sec = prof.seconds
    built_cpu = sum(v for k, v in sec.items() if k.startswith("build."))
    ran_cpu = sum(v for k, v in sec.items() if k.startswith("run."))
    return {"config": config, "round": round_, "measured": result.measured, "runs": prof.runs, "built": prof.built,
            "wall_s": wall, "loop_s": prof.wall_s, "per_candidate_s": prof.wall_s / max(1, prof.candidates),
            "build_wait_s": sec.get("build", 0.0), "run_wait_s": sec.get("run", 0.0), "build_cpu_s": built_cpu,
            "run_cpu_s": ran_cpu, "best_s": result.latency_s, "stages": dict(sec), "trace": result.trace.to_json(),
            "builds_per_s": prof.built / sec["build"] if sec.get("build") else None}


THROUGHPUT = {"local-1": None, "local-2": None, "ray-1x1": (1, 1), "ray-2": (2, 1)}


def _throughput(config: str, wl: Any, traces: list[str], work: Path, round_: int, threads: int) -> dict[str, Any]:
    """Builds per second of `config` building `traces[2:]` in one batch, after `traces[:2]` warmed
    its workers, every build in a fresh cache, and each build's own time (in its worker). On a Ray
    configuration, also runs per second of its runner actors measuring those builds in one batch
    (after two warm-up runs)."""
    from tilegraph.tune.builder import Builder
    from tilegraph.tune.measure import MeasureInput, MeasurePolicy

    os.environ["TILEGRAPH_CACHE_DIR"] = str(work / f"throughput-{config}-{round_}")
    warm, timed = [MeasureInput(wl, t) for t in traces[:2]], [MeasureInput(wl, t) for t in traces[2:]]
    cluster = runner = None
    if THROUGHPUT[config] is None:
        builder: Any = Builder(max_workers=int(config.split("-")[1]), target="cpu")
    else:
        from tilegraph.tune.cluster.builder import RayBuilder
        from tilegraph.tune.cluster.connect import connect
        from tilegraph.tune.cluster.runner import RayRunner

        cluster = _start_cluster(*THROUGHPUT[config])
        conn = connect(cluster.address)
        runner = RayRunner(conn, MeasurePolicy(num_threads=threads), target="cpu")
        builder = RayBuilder(conn, "cpu", timeout_s=60.0, nodes=lambda: runner.nodes)
    out: dict[str, Any] = {}
    try:
        warm_built = builder.build(warm)
        start = time.monotonic()
        built = builder.build(timed)
        out["builds_per_s"] = len(timed) / (time.monotonic() - start)
        out["build_times"] = [b.build_time_s for b in built]
        failed = [b.message for b in built if not b.ok]
        if failed:
            raise RuntimeError(f"{config}: {len(failed)} builds failed: {failed[0]}")
        if runner is not None:
            inputs, references = runner.prepare(wl, 0)
            runner.run_batch([(b, inputs, references, None, None) for b in warm_built])
            start = time.monotonic()
            ran = runner.run_batch([(b, inputs, references, None, None) for b in built])
            out["runs_per_s"] = len(ran) / (time.monotonic() - start)
    finally:
        builder.close()
        if runner is not None:
            runner.close()
        if cluster is not None:
            import ray

            ray.shutdown()
            cluster.shutdown()
    return out


def _retime(wl: Any, traces: dict[str, str], threads: int, rounds: int = 7) -> dict[str, float]:
    """Each configuration's winner, built here and timed in alternating rounds (median of medians)."""
    import numpy as np

    import tilegraph as tg
    from tilegraph.schedule import Schedule

    tg.set_num_threads(threads)
    kernels = {c: tg.build(Schedule.replay(wl, t)) for c, t in traces.items()}
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(tuple(b.shape)).astype(b.dtype.array_numpy) for b in wl.inputs]
    times: dict[str, list[float]] = {c: [] for c in kernels}
    for _ in range(rounds):
        for c, k in kernels.items():
            k(*inputs)
            runs, start = 0, time.perf_counter()
            while time.perf_counter() - start < 0.2:
                k(*inputs)
                runs += 1
            times[c].append((time.perf_counter() - start) / runs)
    return {c: statistics.median(v) for c, v in times.items()}


def scaling_model(one: dict[str, float], batch: int, build_times: list[float], warm_overhead_s: float | None = None,
                  build_contention: float = 1.0, run_contention: float = 1.0, samples: int = 4000) -> dict[str, Any]:
    """Seconds per candidate for B builders and R runners on M machines, simulated from a one-runner,
    one-builder cluster run (`one`) and the measured time of each build (`build_times`).

    A round of the search loop proposes n = max(batch, R) candidates, builds them (each build goes
    to the first free builder: the builder's dispatch), measures them (one at a time per machine:
    its measurement lock), then commits. A build costs its own time (drawn from `build_times`) plus
    Ray's per-task overhead; a round's builds end with its slowest builder (Monte Carlo over
    `samples` rounds, seeded). Per candidate, in a long run: driver + E[build makespan] / n +
    ceil(n/M) * (run + transfer) * runs per candidate / n. The driver and transfer times are what
    the one-builder run spent beyond its builds' and runs' own times.

    Ray's per-build overhead is `warm_overhead_s` where the build throughput was measured with warm
    workers; what the one-builder run waited for its builds beyond that and their own time is a
    start-up paid once per run (the nodes' workers starting and importing, in parallel on every
    node), not per build. Without a warm measurement all of it counts per build. Where two builders
    or two runners share one machine, a build or a run takes `build_contention` or `run_contention`
    times as long (measured: two nodes on this machine against one, with nothing else running).
    The model reproduces the one-builder run: steady cost + start-up / candidates."""
    import heapq
    import random

    n = one["measured"]
    build = one["build_cpu_s"] / max(1, one["built"])
    waited = max(0.0, one["build_wait_s"] - one["build_cpu_s"])
    overhead = waited / max(1, one["built"]) if warm_overhead_s is None else min(warm_overhead_s, waited / max(1, one["built"]))
    start_s = waited - overhead * one["built"]
    run = one["run_cpu_s"] / max(1, one["runs"])
    # what waiting for the runner costs beyond the actor's own stages: Ray's calls and transfers
    transfer = max(0.0, one["run_wait_s"] - one["run_cpu_s"]) / max(1, one["runs"])
    runs_per_candidate = one["runs"] / max(1, n)
    driver = max(0.0, one["loop_s"] - one["build_wait_s"] - one["run_wait_s"]) / max(1, n)
    times = [t * build / statistics.mean(build_times) for t in build_times] if build_times else [build]

    def makespan(size: int, builders: int, slowdown: float, rng: random.Random) -> float:
        free = [0.0] * min(builders, size)
        for _ in range(size):
            heapq.heapreplace(free, free[0] + (rng.choice(times) + overhead) * slowdown)
        return max(free)

    def costs(builders: int, runners: int, machines: int) -> tuple[float, float]:
        """(building, measuring) seconds per candidate in a long run."""
        size = max(batch, runners)
        rng = random.Random(0)
        slow_build = build_contention if builders > machines else 1.0
        slow_run = run_contention if runners > machines else 1.0
        build_s = statistics.mean(makespan(size, builders, slow_build, rng) for _ in range(samples)) / size
        return build_s, math.ceil(size / machines) * (run + transfer) * slow_run * runs_per_candidate / size

    base = driver + sum(costs(1, 1, 1))
    rows = []
    for r, m, b in ((1, 1, 1), (2, 1, 2), (2, 2, 2), (4, 4, 4), (8, 8, 8), (64, 64, 64)):
        building, measuring = costs(b, r, m)
        cost = driver + building + measuring
        rows.append({"runners": r, "machines": m, "builders": b, "per_candidate_s": cost, "speedup": base / cost,
                     "build_share": building / cost, "driver_share": driver / cost,
                     "run_of_n_s": cost + start_s / max(1, n)})  # per candidate in a run as long as `one`
    return {"driver_s": driver, "build_s": build, "build_overhead_s": overhead, "start_s": start_s, "run_s": run,
            "transfer_s": transfer, "runs_per_candidate": runs_per_candidate, "build_contention": build_contention,
            "run_contention": run_contention, "build_time_max_over_mean": max(times) / build, "rows": rows}


def _measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every configuration's tuning runs, the build throughputs and the winners re-timed."""
    from tilegraph import workloads

    wl = workloads.from_spec(args.workload)
    work = Path(tempfile.mkdtemp(prefix="tilegraph-cluster-"))
    runs = [_tune(c, wl, args, work, r) for r in range(args.rounds) for c in CONFIGS]
    traces: list[str] = []
    if args.throughput_rounds:
        from tilegraph.tune.database import open_database

        db = open_database(str(work / "local-0" / "t.db"), readonly=True)
        traces = [r.trace_json for r in db.records()]
        db.close()
    throughput: dict[str, list[float]] = {c: [] for c in THROUGHPUT}
    run_throughput: dict[str, list[float]] = {c: [] for c, shape in THROUGHPUT.items() if shape is not None}
    build_times: list[float] = []  # each build's own time on one Ray node, for the scaling model
    for r in range(args.throughput_rounds):
        for c in THROUGHPUT:
            got = _throughput(c, wl, traces, work, r, args.threads)
            throughput[c].append(got["builds_per_s"])
            if "runs_per_s" in got:
                run_throughput[c].append(got["runs_per_s"])
            if c == "ray-1x1":
                build_times += got["build_times"]
    best = {c: min((x for x in runs if x["config"] == c), key=lambda x: x["best_s"])["trace"] for c in CONFIGS}
    return {"workload": args.workload, "strategy": args.strategy, "trials": args.trials, "rounds": args.rounds,
            "batch": args.batch, "cpus": os.cpu_count(), "runs": runs, "retimed_s": _retime(wl, best, args.threads),
            "throughput_builds_per_s": throughput, "throughput_runs_per_s": run_throughput,
            "throughput_builds": max(0, len(traces) - 2), "build_times_s": build_times}


def _model_inputs(measured: dict[str, Any], built_at_once: int) -> dict[str, Any]:
    """What the throughput phases give the scaling model: Ray's per-build overhead with warm workers
    (one node's wall time per build minus its builds' own mean, median over rounds) and how much
    longer a build and a measured candidate take when two nodes share this machine (none: {})."""
    builds = measured.get("throughput_builds_per_s", {})
    runs = measured.get("throughput_runs_per_s", {})
    times = measured.get("build_times_s", [])
    if not builds.get("ray-1x1") or not times or not built_at_once:
        return {}
    rounds = [times[i:i + built_at_once] for i in range(0, len(times), built_at_once)]
    out = {"warm_overhead_s": max(0.0, statistics.median(1 / per_s - statistics.mean(own)
                                                         for per_s, own in zip(builds["ray-1x1"], rounds)))}
    if builds.get("ray-2"):  # two builds at once: each takes 2 / throughput
        out["build_contention"] = 2 * statistics.median(builds["ray-1x1"]) / statistics.median(builds["ray-2"])
    if runs.get("ray-1x1") and runs.get("ray-2"):  # runs on two runner actors against one
        out["run_contention"] = statistics.median(runs["ray-1x1"]) / statistics.median(runs["ray-2"])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="matmul:128,128,128")
    ap.add_argument("--strategy", default="random")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--build-workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--throughput-rounds", type=int, default=3)
    ap.add_argument("--from-json", help="report the measurements of an earlier run's cluster.json again")
    ap.add_argument("--out", default=f"benchmarks/results/{time.strftime('%Y-%m-%d')}-cluster")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    measured = json.loads(Path(args.from_json).read_text()) if args.from_json else _measure(args)
    runs = measured["runs"]
    # a run from before build throughput was measured has neither
    throughput = measured.get("throughput_builds_per_s", {c: [] for c in THROUGHPUT})
    build_times = measured.get("build_times_s", [])
    retimed, batch = measured["retimed_s"], measured.get("batch", args.batch)
    built_at_once = measured.get("throughput_builds", len(build_times) // max(1, len(throughput["ray-1x1"])))
    by = {c: [x for x in runs if x["config"] == c] for c in CONFIGS}
    med = {c: {k: statistics.median(x[k] for x in rows) for k in ("per_candidate_s", "build_wait_s", "built",
                                                                    "measured", "best_s")}
           for c, rows in by.items()}
    for c, rows in by.items():
        waits = [x["build_wait_s"] for x in rows]
        med[c]["builds_per_s"] = sum(x["built"] for x in rows) / sum(waits) if sum(waits) else None
        per = [x["per_candidate_s"] for x in rows]
        med[c]["spread"] = (max(per) - min(per)) / statistics.median(per)
    ray1 = {k: statistics.median(x[k] for x in by["ray-1x1"]) for k in
            ("measured", "built", "runs", "loop_s", "build_wait_s", "run_wait_s", "build_cpu_s", "run_cpu_s")}
    model = scaling_model(ray1, batch, build_times, **_model_inputs(measured, built_at_once))
    predicted_2 = next(r for r in model["rows"] if r["runners"] == 2 and r["machines"] == 1)["run_of_n_s"]
    report = {**measured, "medians": med, "model": model, "ray2_predicted_s": predicted_2,
              "ray2_measured_s": med["ray-2"]["per_candidate_s"]}
    (out / "cluster.json").write_text(json.dumps(report, indent=1))
    lines = [f"# Tuning on Ray vs here: {report['workload']}, {report['strategy']}, {report['trials']} trials, "
             f"{report['rounds']} alternating rounds, {report['cpus']} cores", "",
             "| config | s / candidate (spread) | overhead vs local | builds / s | best found (re-timed) |",
             "|---|---|---|---|---|"]
    local = med["local"]["per_candidate_s"]
    for c in CONFIGS:
        m = med[c]
        bps = "-" if m["builds_per_s"] is None else f"{m['builds_per_s']:.2f}"
        lines.append(f"| {c} | {m['per_candidate_s']:.3f} ({m['spread']:.2f}) | {m['per_candidate_s'] / local - 1:+.1%} "
                     f"| {bps} | {retimed[c] * 1e6:.1f} us |")
    lines += ["", f"ray-2 builds/s over ray-1x1 (two builders against one): "
              f"{med['ray-2']['builds_per_s'] / med['ray-1x1']['builds_per_s']:.2f}x",
              "", "## Scaling model (from ray-1x1's per-candidate costs)", "",
              f"driver {model['driver_s'] * 1e3:.1f} ms, build {model['build_s'] * 1e3:.1f} ms "
              f"(slowest {model['build_time_max_over_mean']:.1f}x the mean) + {model['build_overhead_s'] * 1e3:.1f} ms "
              "of Ray per build, "
              f"run {model['run_s'] * 1e3:.1f} ms, transfer {model['transfer_s'] * 1e3:.1f} ms per candidate; "
              f"{model['runs_per_candidate']:.2f} runs per candidate; start-up {model['start_s']:.2f} s a run; "
              f"two nodes on one machine: builds x{model['build_contention']:.2f}, runs x{model['run_contention']:.2f}",
              "", "Seconds per candidate in a long run (no start-up):", "",
              "| runners | machines | builders | s / candidate | speed-up | building | driver |",
              "|---|---|---|---|---|---|---|"]
    for r in model["rows"]:
        lines.append(f"| {r['runners']} | {r['machines']} | {r['builders']} | {r['per_candidate_s']:.3f} "
                     f"| {r['speedup']:.2f}x | {r['build_share']:.0%} | {r['driver_share']:.0%} |")
    lines += ["", f"ray-2 on this machine ({med['ray-2']['measured']:.0f} candidates, start-up included): "
              f"predicted {predicted_2:.3f} s / candidate, measured "
              f"{med['ray-2']['per_candidate_s']:.3f} ({predicted_2 / med['ray-2']['per_candidate_s'] - 1:+.1%})"]
    if any(throughput.values()):
        bmed = {c: statistics.median(v) for c, v in throughput.items()}
        lines += ["", f"## Build throughput: {built_at_once} builds in one batch, warm workers, "
                  f"{len(throughput['ray-1x1'])} alternating rounds", "",
                  "| builders | builds / s (median) | spread |", "|---|---|---|"]
        for c, v in throughput.items():
            lines.append(f"| {c} | {bmed[c]:.2f} | {(max(v) - min(v)) / bmed[c]:.2f} |")
        lines += ["", f"two Ray nodes over one: {bmed['ray-2'] / bmed['ray-1x1']:.2f}x; "
                  f"two local builder processes over one: {bmed['local-2'] / bmed['local-1']:.2f}x"]
    run_throughput = measured.get("throughput_runs_per_s", {})
    if any(run_throughput.values()):
        rmed = {c: statistics.median(v) for c, v in run_throughput.items()}
        lines += ["", "## Measurement throughput: those builds measured in one batch by the nodes' runner actors "
                  "(after two warm-up runs; one measurement lock on this machine)", "",
                  "| runners | runs / s (median) | spread |", "|---|---|---|"]
        for c, v in run_throughput.items():
            lines.append(f"| {c} | {rmed[c]:.2f} | {(max(v) - min(v)) / rmed[c]:.2f} |")
        lines += ["", f"two runner actors over one: {rmed['ray-2'] / rmed['ray-1x1']:.2f}x"]
    (out / "cluster.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
