"""python -m benchmarks.run SUITE [SUITE ...] [options]: race tilegraph against its peers.

    python -m benchmarks.run transformer-gemm --budget 30 --threads 1,2
    python -m benchmarks.run all --short                    # CI: one small workload per suite, seconds
    python -m benchmarks.run coverage                       # architectures: compile, match, latency
    python -m benchmarks.run precision                      # bf16 models vs ORT and OpenVINO (precision.py)
    python -m benchmarks.run int8                           # QDQ int8 models vs ORT and OpenVINO (int8.py)
    python -m benchmarks.run busy                           # models beside busy processes (busy.py)

Per workload: tilegraph is tuned once per strategy (--budget seconds each), each in-process peer is
prepared (torch.compile compiles), then for each thread count every system is timed interleaved
(benchmarks/protocol.py) and its output checked against the numpy float64 reference. TVM runs in
its own venv and process with the same budget. Results go to benchmarks/results/<date>-<machine>/.

Threading choice (see peers_cpu.md §0): before numpy or torch load, OMP_NUM_THREADS,
OPENBLAS_NUM_THREADS and MKL_NUM_THREADS are set to the largest --threads value (unless the caller
set them), so every pool has the same size; each thread setting then limits the pools at run time
(torch.set_num_threads, threadpoolctl for OpenBLAS, kernel(num_threads=n)), and a settle pause
before each sample lets the previous system's spinning workers go idle.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import socket
import sys
import tempfile
import time

DEFAULT_PEERS = "torch,torch_compile,numpy,tvm"
SHORT_PEERS = "torch,numpy"


# What restricts each system to an ISA (an avx2 measurement on an AVX-512 host): tilegraph's host
# override, PyTorch's ATen kernels and oneDNN, MKL, OpenBLAS (numpy), and TVM's LLVM target CPU.
ISA_ENVIRONMENTS = {
    "avx2": {"TILEGRAPH_HOST_ISA": "avx2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "MKL_ENABLE_INSTRUCTIONS": "AVX2", "OPENBLAS_CORETYPE": "Haswell", "TILEGRAPH_TVM_MCPU": "haswell"},
    "avx512": {"TILEGRAPH_HOST_ISA": "avx512", "ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE",
               "MKL_ENABLE_INSTRUCTIONS": "AVX512", "OPENBLAS_CORETYPE": "SkylakeX", "TILEGRAPH_TVM_MCPU": "skylake-avx512"},
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from benchmarks import SUITES

    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("suites", nargs="+", metavar="SUITE", help=f"one or more of {', '.join(SUITES)}, or all")
    parser.add_argument("--budget", type=float, default=None,
                        help="tuning seconds per workload and system (default 60; 2 with --short)")
    parser.add_argument("--peers", default=None,
                        help=f"comma list (default {DEFAULT_PEERS}; {SHORT_PEERS} with --short); '' for none")
    parser.add_argument("--strategies", default="gensor,roller", help="tilegraph strategies, comma list")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--threads", default="1,2", help="thread counts, comma list")
    parser.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 5; 3 with --short)")
    parser.add_argument("--min-sample", type=float, default=None, help="seconds per sample (default 0.1; 0.02 with --short)")
    parser.add_argument("--settle", type=float, default=None,
                        help="pause before each sample, seconds (default 0.3; 0.02 with --short): lets the previous "
                             "system's spinning threads sleep (OpenBLAS spins ~0.1 s after a call)")
    parser.add_argument("--short", action="store_true", help="one small workload per suite, tiny budgets")
    parser.add_argument("--out", default=None, help="output directory (default benchmarks/results/<date>-<machine>)")
    parser.add_argument("--workloads", default="", help="comma list of workload names to keep (default: the whole suite)")
    parser.add_argument("--tvm-venv", default=None, help="TVM venv (default .venv-tvm or $TILEGRAPH_TVM_VENV)")
    parser.add_argument("--isa", choices=sorted(ISA_ENVIRONMENTS), default=None,
                        help="measure as a machine of this ISA would: tilegraph targets it (TILEGRAPH_HOST_ISA) and the "
                             "peers are restricted to it (oneDNN/MKL/ATen/OpenBLAS dispatch, TVM -mcpu)")
    args = parser.parse_args(argv)
    suites = list(SUITES) if args.suites == ["all"] else args.suites
    for s in suites:
        if s not in SUITES:
            parser.error(f"argument SUITE: unknown suite {s!r}; known: {', '.join(SUITES)}, all")
    args.suites = suites
    try:
        args.threads = sorted({int(t) for t in args.threads.split(",") if t.strip()})
    except ValueError:
        parser.error(f"argument --threads: expected a comma list of integers, got {args.threads!r}")
    if not args.threads or min(args.threads) < 1:
        parser.error("argument --threads: thread counts must be >= 1")
    args.budget = args.budget if args.budget is not None else (2.0 if args.short else 60.0)
    args.rounds = args.rounds if args.rounds is not None else (3 if args.short else 5)
    args.min_sample = args.min_sample if args.min_sample is not None else (0.02 if args.short else 0.1)
    args.settle = args.settle if args.settle is not None else (0.02 if args.short else 0.3)
    if args.budget <= 0 or args.rounds < 1 or args.min_sample <= 0 or args.batch < 1:
        parser.error("arguments --budget, --rounds, --min-sample and --batch must be positive")
    peers = args.peers if args.peers is not None else (SHORT_PEERS if args.short else DEFAULT_PEERS)
    args.peers = [p.strip() for p in peers.split(",") if p.strip()]
    from benchmarks.peers import ALL_PEERS

    for p in args.peers:
        if p not in ALL_PEERS:
            parser.error(f"argument --peers: unknown peer {p!r}; known: {', '.join(ALL_PEERS)}")
    args.strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    return args


def set_thread_environment(max_threads: int) -> str:
    """Size every thread pool alike before numpy/torch are imported; returns the policy text for the report."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(max_threads))
    # a fresh inductor cache per run, so torch.compile's reported compile time is cold
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="tg-bench-inductor-"))
    pools = ", ".join(f"{v}={os.environ[v]}" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
    return (f"{pools}; per setting: torch.set_num_threads(n), threadpoolctl (OpenBLAS), kernel(num_threads=n), "
            "TVM runtime.config_threadpool; settle pause before each sample")


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def software_versions(peers: list[str]) -> str:
    import numpy as np

    parts = [f"python {platform.python_version()}", f"numpy {np.__version__}"]
    try:
        import tilegraph

        parts.append(f"tilegraph {tilegraph.__version__}")
    except Exception:  # noqa: BLE001
        pass
    if any(p.startswith("torch") for p in peers):
        try:
            import torch

            parts.append(f"torch {torch.__version__}")
        except ImportError:
            pass
    return ", ".join(parts)


def default_out_dir(fingerprint: str) -> str:
    date = datetime.date.today().isoformat()
    # the fingerprint's last field is its hash (e.g. cpu-avx512-2c-bf15ac4196bf7a31 -> bf15ac4196)
    machine = fingerprint.rsplit("-", 1)[-1][:10] if fingerprint else socket.gethostname().split(".")[0]
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", f"{date}-{machine}")


def restrict_isa(isa: str | None) -> dict[str, str]:
    """Set the environment that makes tilegraph and every peer use `isa` (before any of them loads)."""
    if isa is None:
        return {}
    loaded = [m for m in ("numpy", "torch", "tilegraph") if m in sys.modules]
    if loaded:
        raise SystemExit(f"--isa must be set before {', '.join(loaded)} load; run `python -m benchmarks.run ... --isa {isa}`")
    env = ISA_ENVIRONMENTS[isa]
    os.environ.update(env)
    return env


def _early_options(argv: list[str] | None) -> tuple[str | None, int]:
    """--isa and the largest --threads, read before anything imports numpy (validating the other
    arguments does): both are environment variables that numpy, torch and tilegraph read at import."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--isa", choices=sorted(ISA_ENVIRONMENTS), default=None)
    early.add_argument("--threads", default="1,2")
    known, _ = early.parse_known_args(argv)
    try:
        threads = max(int(t) for t in known.threads.split(",") if t.strip())
    except ValueError:
        threads = 1  # parse_args reports the bad value
    return known.isa, max(threads, 1)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["busy"]:  # models beside busy processes, thread pool vs libgomp vs peers (benchmarks/busy.py)
        from benchmarks import busy

        return busy.main(argv)
    if argv[:1] == ["generate"]:  # GPT-2 generation with a KV cache vs ORT, eager, torch.compile (generate.py)
        from benchmarks import generate

        return generate.main(argv[1:])
    if argv[:1] == ["int8"]:  # QDQ int8 models against ONNX Runtime and OpenVINO (benchmarks/int8.py)
        from benchmarks import int8

        return int8.main(argv)
    if "precision" in argv:  # bf16 models against ONNX Runtime and OpenVINO (benchmarks/precision.py)
        from benchmarks import precision

        return precision.main(argv)
    if "coverage" in argv:  # architectures compiled from both exporters (benchmarks/coverage.py)
        from benchmarks import coverage

        return coverage.main(argv)
    if "models" in argv:  # whole models: their own harness (benchmarks/models.py)
        from benchmarks import models

        isa, _ = _early_options(argv)
        restrict_isa(isa)  # tilegraph and PyTorch (oneDNN/MKL/ATen); ONNX Runtime's MLAS has no such switch
        others = [a for a in argv if a != "models" and a != isa]
        if any(a in __import__("benchmarks").SUITES for a in others) or "all" in others:
            raise SystemExit("run `models` on its own: python -m benchmarks.run models [options]")
        return models.main(argv)
    isa, max_threads = _early_options(argv)
    isa_env = restrict_isa(isa)
    threading = set_thread_environment(max_threads)
    args = parse_args(argv)
    # Tuning is measured cold: a fresh build cache and one fresh database per strategy, so tuning
    # time includes compilation and no strategy reuses another's (or an earlier run's) measurements.
    cold = tempfile.mkdtemp(prefix="tilegraph-bench-")
    os.environ["TILEGRAPH_CACHE_DIR"] = os.path.join(cold, "cache")
    from benchmarks import report
    from benchmarks.race import RaceConfig, race_suite
    from benchmarks.tilegraph_system import hardware_peaks, machine_fingerprint

    fingerprint = machine_fingerprint()
    peaks, peak_note = hardware_peaks(args.threads)
    config = RaceConfig(budget_s=args.budget, peers=args.peers, strategies=args.strategies, threads=args.threads,
                        rounds=args.rounds, min_sample_s=args.min_sample, settle_s=args.settle, batch=args.batch,
                        short=args.short, peaks=peaks, tvm_venv=args.tvm_venv, workloads=args.workloads,
                        db_dir=cold)
    rows, notes = [], [peak_note] if peak_note else []
    start = time.perf_counter()
    for suite in args.suites:
        suite_rows, suite_notes = race_suite(suite, config, log=lambda msg: print(msg, file=sys.stderr, flush=True))
        rows += suite_rows
        notes += suite_notes
    command = "python -m benchmarks.run " + " ".join(sys.argv[1:] if argv is None else argv)
    now = datetime.datetime.now().isoformat(timespec="seconds")
    meta = {
        "date": now, "fingerprint": fingerprint, "cpu_model": cpu_model(), "cores": os.cpu_count(),
        "hostname": socket.gethostname(), "peaks_gflops": {t: v / 1e9 for t, v in peaks.items()}, "peak_note": peak_note,
        "software": software_versions(args.peers), "threading": threading, "suites": args.suites,
        "isa": args.isa or "host", "isa_environment": isa_env,
        "protocol": (f"{args.rounds} interleaved rounds, samples >= {args.min_sample} s, settle {args.settle} s, "
                     f"median and IQR / min-max spread; tuning budget {args.budget} s per workload and system; "
                     "tuning is cold (fresh build cache, one fresh database per strategy)"),
        "runs": [{"date": now, "suites": args.suites, "command": command, "wall_s": round(time.perf_counter() - start, 1)}],
        "notes": notes,
    }
    out_dir = args.out or default_out_dir(fingerprint)
    paths = report.write_all(out_dir, rows, meta)
    print(f"wrote {', '.join(paths.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
