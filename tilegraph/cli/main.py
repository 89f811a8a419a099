"""The `tilegraph` console script.

    tilegraph tune GMM-4 matmul:512,256,384 --time 60 [--strategy auto] [--trials N] [--target opencl]
                    [--db PATH] [--json] [--profile]
    tilegraph bench GMM-4 --vs numpy,torch [--target cpu] [--db PATH] [--json]
    tilegraph db list | best | distill | export FILE | import FILE | merge OTHER.db   [--db PATH]
    tilegraph info [--json] [--remeasure] [--target "cpu -isa=avx2"]
    tilegraph compile MODEL.onnx [-o DIR] [--time S] [--db PATH] [--json]
    tilegraph run DIR|MODEL.onnx [--input NAME=FILE.npy ...] [--bench] [--vs onnxruntime,torch] [--json]
    tilegraph generate gpt2 [--prompt-len 32] [--new-tokens 64] [--time S] [--vs onnxruntime]

Bad input (unknown workload, malformed shape, negative budget, unusable database, missing
compiler) prints one line `tilegraph: error: ...` on stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from tilegraph.errors import TilegraphError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with errors on one line (no usage dump), so scripts can read them."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a positive finite number, got {text}")
    return value


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def _target_spec(text: str) -> str:
    """A target string ("cpu", "opencl", "cpu -cores=2") that Target.from_string accepts."""
    from tilegraph.target import Target

    try:
        Target.from_string(text)
    except (ValueError, TypeError) as e:
        raise argparse.ArgumentTypeError(str(e).strip().splitlines()[0]) from None
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tilegraph", description="tilegraph: build and tune tensor kernels")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    db_opt = _Parser(add_help=False)
    db_opt.add_argument("--db", default=None, help="tuning database file (default: the user data folder's tuning.db)")
    target_opt = _Parser(add_help=False)
    target_opt.add_argument("--target", type=_target_spec, default="cpu",
                            help="what the kernels run on: cpu (default), opencl, cuda, or e.g. 'cpu -cores=2'")

    tune = sub.add_parser("tune", parents=[db_opt, target_opt], help="tune workloads and store every measurement")
    tune.add_argument("workloads", nargs="+", metavar="WORKLOAD", help="suite id (GMM-4) or op:shape spec")
    tune.add_argument("--batch", type=_int_at_least(1), default=1, help="batch size for suite workloads")
    tune.add_argument("--strategy", default="auto",
                      help="search strategy: auto (Gensor, then evolutionary search while time remains), gensor, "
                           "evolutionary, tlm (a language model writes the decisions; needs tilegraph[tlm]), roller, random")
    tune.add_argument("--time", type=_positive_float, default=None, help="time budget per workload, seconds")
    tune.add_argument("--trials", type=_int_at_least(0), default=None, help="candidates to measure per workload")
    tune.add_argument("--threads", type=_int_at_least(1), default=None, help="threads the kernels run with")
    tune.add_argument("--seed", type=int, default=0)
    tune.add_argument("--cluster", default=None, metavar="ADDRESS",
                      help="build and measure on a Ray cluster: auto (the one `ray start` runs here), ray://HOST:PORT, "
                           "or local (Ray on this machine); needs tilegraph[ray]")
    tune.add_argument("--json", action="store_true", help="one JSON object per workload on stdout")
    tune.add_argument("--profile", action="store_true",
                      help="where the tuning time went, per candidate and stage (sampling, build, reference, run, ...)")
    tune.add_argument("--buckets", default=None, metavar="UPPERS",
                      help="a workload with a run-time dim (an extent LO..HI, e.g. matmul:1..512,768,768): tune one "
                           "kernel per bucket, cut at these comma-separated upper bounds (e.g. 1,16,64), or 'auto' "
                           "(powers of two from 16); without it, one kernel tuned at the dim's upper bound")

    bench = sub.add_parser("bench", parents=[db_opt, target_opt], help="time the best known kernel against numpy/torch")
    bench.add_argument("workloads", nargs="+", metavar="WORKLOAD")
    bench.add_argument("--vs", default="numpy", help="comma-separated peers: numpy,torch")
    bench.add_argument("--batch", type=_int_at_least(1), default=1)
    bench.add_argument("--threads", type=_int_at_least(1), default=None)
    bench.add_argument("--time", type=_positive_float, default=1.0, help="seconds of timing per contender")
    bench.add_argument("--json", action="store_true")

    db = sub.add_parser("db", help="inspect and maintain the tuning database")
    db_sub = db.add_subparsers(dest="db_command", required=True, parser_class=_Parser)
    db_sub.add_parser("list", parents=[db_opt], help="workloads and their record counts")
    best = db_sub.add_parser("best", parents=[db_opt], help="the best record per workload for this machine")
    best.add_argument("--json", action="store_true")
    db_sub.add_parser("distill", parents=[db_opt], help="keep only the best record per workload and target")
    for name, what in (("export", "write every record to a JSON-lines file"),
                       ("import", "add the records of a JSON-lines export"),
                       ("merge", "add the records of another tuning database")):
        p = db_sub.add_parser(name, parents=[db_opt], help=what)
        p.add_argument("path")

    from tilegraph.cli.models import add_commands

    add_commands(sub, {"db": db_opt}, _positive_float, _int_at_least, _target_spec)
    from tilegraph.cli.generate import add_command as add_generate

    add_generate(sub, {"db": db_opt}, _positive_float, _int_at_least)

    info = sub.add_parser("info", parents=[db_opt], help="target fingerprint, ISA, cores, caches, compiler, paths")
    info.add_argument("--json", action="store_true")
    info.add_argument("--target", default="cpu",
                      help='a target string: "cpu -isa=avx2" (an AVX2 machine), "cpu -arch=aarch64 -uarch=neoverse-n1"')
    info.add_argument("--remeasure", action="store_true",
                      help="measure the peaks again instead of using the cached measurement (do it on a quiet machine)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(COMMANDS[args.command](args) or 0)
    except _UsageError as e:
        return _fail(str(e))
    except (TilegraphError, ValueError, TypeError, OSError, LookupError) as e:
        return _fail(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
    except KeyboardInterrupt:
        print("tilegraph: interrupted", file=sys.stderr)
        return 130


MAX_MESSAGE = 300  # an error line never echoes a whole (possibly huge) input back


def _fail(message: str) -> int:
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 20] + f"... ({len(message)} characters)"
    print(f"tilegraph: error: {message}", file=sys.stderr)
    return EXIT_USAGE


# ---------------------------------------------------------------------------- commands
def _cmd_tune(args: argparse.Namespace) -> int:
    from tilegraph.tune import open_database, tune
    from tilegraph.tune.strategy import get_strategy
    from tilegraph.tune.tune import resolve_workload

    get_strategy(args.strategy)  # fail on a bad name before any work
    workloads = [resolve_workload(spec, batch=args.batch) for spec in args.workloads]
    _require_toolchain(args.target)
    db = open_database(args.db)
    rows = []
    with contextlib.ExitStack() as stack:
        if args.cluster is not None:  # one connection for every workload
            from tilegraph.tune.cluster import connect

            stack.enter_context(connect(args.cluster))
        for spec, wl in zip(args.workloads, workloads):
            rows.append(_tune_one(args, spec, wl, db, tune))
    if not args.json:
        _table("tuning results", ["workload", "strategy", "best latency", "GFLOP/s", "measured/failed", "tuning time"],
               [[r["workload"], r["strategy"], _us(r["latency_s"]) + ("" if r["timed"] else " predicted (emulated: not timed)"),
                 f"{r['gflops']:.2f}", f"{r['measured']}/{r['failed']}",
                 f"{r['tuning_time_s']:.1f} s"] for r in rows])
    return 0


def _tune_one(args: argparse.Namespace, spec: str, wl: Any, db: Any, tune: Any) -> dict[str, Any]:
    """Tune one workload of `tilegraph tune`; its summary row (printed at once with --json)."""
    if args.buckets is not None:
        return _tune_buckets(args, spec, wl, db)
    result = tune(wl, target=args.target, strategy=args.strategy, time_budget=args.time, trials=args.trials,
                  db=db, seed=args.seed, progress=not args.json, num_threads=args.threads, cluster=args.cluster)
    row = {"workload": spec, **{k: v for k, v in result.summary().items()}}
    if args.profile and result.profile is None:  # checked under an emulator: no search loop ran
        print(f"tilegraph: {spec}: no profile: {args.target} kernels were only checked here, not timed",
              file=sys.stderr)
    elif args.profile:
        row["profile"] = result.profile.to_json()
        if not args.json:
            print(f"{spec}: {result.profile.format()}\n", flush=True)
    if args.json:
        print(json.dumps(row), flush=True)
    return row


def _tune_buckets(args: argparse.Namespace, spec: str, wl: Any, db: Any) -> dict[str, Any]:
    """`tilegraph tune SPEC --buckets ...`: one kernel per bucket (tune/buckets.py); the row of the
    whole, with one row per bucket under "buckets" (each printed at once with --json)."""
    from tilegraph.tune.buckets import tune_buckets

    if len(wl.dims) != 1:
        raise ValueError(f"--buckets needs a workload with one run-time dim (an extent LO..HI); {spec} has "
                         f"{len(wl.dims)}")
    uppers = None if args.buckets.strip() == "auto" else _int_list(args.buckets, "--buckets")
    kernel = tune_buckets(wl, wl.dims[0].name, uppers, target=args.target, db=db, strategy=args.strategy,
                          time_budget=args.time, trials=args.trials, seed=args.seed, progress=not args.json,
                          num_threads=args.threads, cluster=args.cluster)
    buckets = [{"bucket": f"[{lo}, {hi}]", **r.summary()} for (lo, hi), r in zip(kernel.ranges, kernel.results)]
    first = kernel.results[0].summary()
    row = {"workload": spec, "strategy": first["strategy"], "timed": all(b["timed"] for b in buckets),
           "latency_s": buckets[-1]["latency_s"], "gflops": buckets[-1]["gflops"],
           "measured": sum(b["measured"] for b in buckets), "failed": sum(b["failed"] for b in buckets),
           "tuning_time_s": sum(b["tuning_time_s"] for b in buckets), "buckets": buckets}
    if args.json:
        print(json.dumps(row), flush=True)
    else:
        _table(f"{spec}: one kernel per bucket of {wl.dims[0].name}", ["bucket", "best latency at its upper bound",
               "GFLOP/s", "measured/failed"], [[b["bucket"], _us(b["latency_s"]), f"{b['gflops']:.2f}",
                                                f"{b['measured']}/{b['failed']}"] for b in buckets])
    return row


def _int_list(text: str, option: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{option} takes comma-separated integers or 'auto', got {text!r}") from None


def _cmd_bench(args: argparse.Namespace) -> int:
    from tilegraph.cli.bench import bench_workload
    from tilegraph.tune import open_database
    from tilegraph.tune.database import MemoryDatabase, default_path
    from tilegraph.tune.tune import resolve_workload

    peers = [p.strip() for p in args.vs.split(",") if p.strip()]
    from tilegraph.testing.peers import PEERS

    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        raise ValueError(f"unknown peer(s) {', '.join(unknown)} for --vs; known peers: {', '.join(PEERS)}")
    if args.target.strip() != "cpu":
        raise ValueError(f"bench --target {args.target!r}: only the default cpu target can be benchmarked so far")
    workloads = [resolve_workload(spec, batch=args.batch) for spec in args.workloads]
    _require_toolchain(args.target)
    db_path = Path(args.db) if args.db is not None else default_path()
    # bench only reads: an absent database has no records (and is not created)
    db = open_database(db_path, readonly=True) if db_path.exists() else MemoryDatabase()
    rows = []
    for spec, wl in zip(args.workloads, workloads):
        row = {"workload": spec, **bench_workload(wl, db, peers, args.time, args.threads)}
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            for note in row["notes"]:
                print(f"note: {note}", file=sys.stderr)
    if not args.json:
        headers = ["workload", "schedule", "tilegraph", "GFLOP/s", *[f"{p} (ratio)" for p in peers]]
        body = []
        for r in rows:
            cells = [r["workload"], r["schedule"], _us(r["latency_s"]), f"{r['gflops']:.2f}"]
            for p in peers:
                lat = r.get(f"{p}_latency_s")
                cells.append("skipped" if lat is None else f"{_us(lat)} ({r[f'ratio_{p}']:.2f}x)")
            body.append(cells)
        _table("benchmark (ratio = peer latency / tilegraph latency)", headers, body)
    return 0


def _cmd_db(args: argparse.Namespace) -> int:
    from tilegraph.tune import open_database
    from tilegraph.tune.measure import target_fingerprint

    cmd = args.db_command
    db = open_database(args.db, readonly=cmd in ("list", "best", "export"))
    if cmd == "list":
        rows = []
        for w in db.workloads():
            recs = db.records(w.key)
            ok = [r for r in recs if r.ok]
            best = min((r.latency_s for r in ok), default=None)
            rows.append([w.op_name, w.key, json.dumps(w.shapes), str(len(recs)), str(len(ok)), _us(best)])
        _table(f"tuning database {getattr(db, 'path', '')}", ["op", "key", "shapes", "records", "ok", "best"], rows)
    elif cmd == "best":
        fp = target_fingerprint("cpu")
        rows = []
        for w in db.workloads():
            rec = db.best(w.key, fp)
            if rec is None:
                continue
            row = {"op": w.op_name, "workload_key": w.key, "latency_s": rec.latency_s, "spread": rec.spread,
                   "trace_hash": rec.trace_hash}
            rows.append(row)
            if args.json:
                print(json.dumps(row))
        if not args.json:
            _table(f"best records for {fp}", ["op", "key", "latency", "spread", "trace"],
                   [[r["op"], r["workload_key"], _us(r["latency_s"]), f"{(r['spread'] or 0):.2%}", r["trace_hash"]]
                    for r in rows])
    elif cmd == "distill":
        print(f"removed {db.distill()} records; kept the best per workload and target")
    elif cmd == "export":
        print(f"exported {db.export_jsonl(args.path)} records to {args.path}")
    elif cmd == "import":
        print(f"imported {db.import_jsonl(args.path)} new records from {args.path}")
    elif cmd == "merge":
        print(f"merged {db.merge(args.path)} new records from {args.path}")
    return 0


def _measured_peaks(target: Any, remeasure: bool = False) -> dict[str, Any]:
    """The hardware model's peaks (measured once by micro-benchmarks, cached under the fingerprint)."""
    from tilegraph.target import host_supports
    from tilegraph.tune.hardware import hardware_model

    runs_here = host_supports(target)
    hw = hardware_model(target, measure=runs_here, remeasure=remeasure)
    source = ("measured" if hw.measured else "nominal (no compiler to measure with)" if runs_here
              else "nominal (this machine cannot run the target's ISA)")
    peaks: dict[str, Any] = {
        "fma_units": hw.fma_units, "fma_latency_cycles": hw.fma_latency_cycles, "vector_registers": hw.vector_registers,
        "peak_gflops_1_thread": round(hw.peak_flops_1t / 1e9, 1),
        f"peak_gflops_{hw.cores}_threads": round(hw.peak_flops_all / 1e9, 1),
        "nominal_peak_gflops_1_thread": round(hw.nominal_peak_flops_1t / 1e9, 1),
    }
    for level, bw in hw.bandwidth_bytes.items():
        peaks[f"bandwidth_{level}_gb_s"] = round(bw / 1e9, 1)
    peaks["peaks_source"] = source
    if hw.peak_warning:
        peaks["warning"] = hw.peak_warning
    return peaks


def _cmd_info(args: argparse.Namespace) -> int:
    from tilegraph.config import cache_dir
    from tilegraph.target import Target
    from tilegraph.tune.database import default_path

    t = Target.from_string(args.target)
    info: dict[str, Any] = {
        "fingerprint": t.fingerprint, "arch": t.arch, "isa": t.isa, "vector_bits": t.vector_bits,
        "cores": t.num_cores, "cpu_model": t.cpu_model, "uarch": t.uarch, "l1d_bytes": t.l1d_bytes, "l2_bytes": t.l2_bytes,
        "l3_bytes": t.l3_bytes, "compiler": t.cc, "compiler_version": t.compiler_version,
        "cflags": " ".join(t.cflags or ()), "cache_dir": str(cache_dir()), "database": str(args.db or default_path()),
    }
    info.update(_measured_peaks(t, args.remeasure))
    if args.json:
        print(json.dumps(info))
    else:
        _table("tilegraph info", ["field", "value"], [[k, "-" if v is None else str(v)] for k, v in info.items()])
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "tune": _cmd_tune, "bench": _cmd_bench, "db": _cmd_db, "info": _cmd_info,
    "compile": lambda args: _models().cmd_compile(args), "run": lambda args: _models().cmd_run(args),
    "generate": lambda args: __import__("tilegraph.cli.generate", fromlist=["cmd_generate"]).cmd_generate(args),
}


def _models() -> Any:
    from tilegraph.cli import models

    return models


# ---------------------------------------------------------------------------- helpers
def _require_toolchain(target: str) -> None:
    """Fail before any work when the target's compiler or device is missing."""
    from tilegraph.build.toolchain import resolve_compiler
    from tilegraph.runtime.backends import backend_for, require_runnable
    from tilegraph.target import Target

    tgt = Target.from_string(target)
    if backend_for(tgt).needs_compiler:
        resolve_compiler(tgt.cc or "cc")  # BuildError: which compiler is missing and how to install it
    require_runnable(tgt)


def _us(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.1f} us" if seconds < 1e-2 else f"{seconds * 1e3:.2f} ms"


def _table(title: str, headers: list[str], rows: list[list[str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for h in headers:
        table.add_column(h)
    for r in rows:
        table.add_row(*r)
    Console().print(table)


if __name__ == "__main__":
    sys.exit(main())
