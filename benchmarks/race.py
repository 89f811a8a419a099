"""One suite, raced: tune tilegraph, prepare peers, time all interleaved per thread count, check outputs.

    rows, notes = race_suite("transformer-gemm", RaceConfig(budget_s=30, peers=["torch", "numpy"]))

Inputs: ansor-cpu workloads use tilegraph.testing's inputs and float64 references (peers get them
reshaped into the canonical layouts); the other suites use the harness's canonical inputs and
references, which tilegraph gets too when its workload's input shapes fit (else its own, noted).
Any system that is missing, cannot express the op or fails becomes a row with a note, never an error.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmarks import protocol, suites
from benchmarks.peers import PeerSkip, Prepared, load_peer
from benchmarks.report import REL_ERR_TOLERANCE, Row
from benchmarks.tilegraph_system import (
    TilegraphSystem,
    fit_inputs,
    resolve_workload,
    tilegraph_inputs,
    workload_input_shapes,
)


@dataclass
class RaceConfig:
    budget_s: float = 60.0
    peers: Sequence[str] = ("torch", "numpy")
    strategies: Sequence[str] = ("gensor", "roller")
    threads: Sequence[int] = (1, 2)
    rounds: int = 5
    min_sample_s: float = 0.1
    settle_s: float = 0.02
    batch: int = 1
    short: bool = False
    seed: int = 0
    peaks: dict[int, float] = field(default_factory=dict)  # threads -> FLOP/s
    tvm_venv: str | None = None
    workloads: Sequence[str] = ()  # keep only these case names (empty: the whole suite)
    db_dir: str | None = None  # one fresh tuning database per strategy here (None: tilegraph's default database)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


@dataclass
class _Candidate:
    """A system ready to be timed at one thread count."""

    name: str
    prepared: Prepared
    refs: list[np.ndarray]
    rel_err: float = math.nan


def _row(case: suites.BenchCase, flops: int, system: str, threads: int = 0, **kw: Any) -> Row:
    return Row(suite=case.suite, workload=case.name, system=system, threads=threads, op=case.op or "",
               params=case.describe(), flops=flops, **kw)


def race_case(case: suites.BenchCase, config: RaceConfig, peers: Sequence[Any], tg_systems: Sequence[TilegraphSystem],
              tvm: Any, log: Callable[[str], None]) -> list[Row]:
    rows: list[Row] = []
    resolved = resolve_workload(case)
    wl = resolved.workload
    flops = int(wl.flops()) if wl is not None else case.flops()

    primary: tuple[list[np.ndarray], list[np.ndarray]] | None = None
    primary_note = ""
    if case.workload_id is not None and wl is not None:
        try:
            primary = tilegraph_inputs(wl, config.seed)
        except Exception as exc:  # noqa: BLE001
            primary_note = f"tilegraph.testing inputs unavailable ({_error(exc)})"
    elif case.op is not None:
        inputs = suites.canonical_inputs(case, config.seed)
        primary = (inputs, suites.reference(case, inputs))
    if primary is None:
        for name in [s.name for s in tg_systems] + [p.name for p in peers]:
            rows.append(_row(case, flops, name, status="skipped", note=primary_note or resolved.note or "no inputs"))
        return rows

    # tilegraph: tune once per strategy; the kernel is then timed at every thread count
    tuned: list[tuple[TilegraphSystem, Any, list[np.ndarray], list[np.ndarray], str]] = []
    for system in tg_systems:
        if wl is None:
            rows.append(_row(case, flops, system.name, status="skipped", note=resolved.note))
            continue
        args = fit_inputs(primary[0], workload_input_shapes(wl))
        refs, note = primary[1], ""
        try:
            if args is None:
                args, refs = tilegraph_inputs(wl, config.seed)
                note = "tilegraph's input shapes differ from the canonical op: checked against tilegraph.testing"
            log(f"  tuning {system.name} ({config.budget_s:g} s)")
            result = system.tune(wl)
        except Exception as exc:  # noqa: BLE001
            rows.append(_row(case, flops, system.name, status="failed", note=_error(exc)))
            continue
        tuned.append((system, result, args, refs, note))

    peer_inputs = None
    if case.op is not None:
        peer_inputs = fit_inputs(primary[0], suites.input_shapes(case.op, case.params))

    for threads in config.threads:
        candidates: list[_Candidate] = []
        notes: dict[str, str] = {}
        for system, result, args, refs, note in tuned:
            system.set_threads(threads)
            try:
                candidates.append(_Candidate(system.name, system.prepare_tuned(result, args), refs))
                notes[system.name] = note
            except PeerSkip as exc:
                rows.append(_row(case, flops, system.name, threads, status="skipped", note=str(exc)))
        for peer in peers:
            try:
                if peer_inputs is None:
                    raise PeerSkip("the workload's op is not one the peers express" if case.op is None
                                   else "the workload's inputs do not fit the canonical op's layout")
                peer.set_threads(threads)
                candidates.append(_Candidate(peer.name, peer.prepare(case, peer_inputs), primary[1]))
            except PeerSkip as exc:
                rows.append(_row(case, flops, peer.name, threads, status="skipped", note=str(exc)))
            except Exception as exc:  # noqa: BLE001
                rows.append(_row(case, flops, peer.name, threads, status="failed", note=_error(exc)))
        checked = []
        for c in candidates:
            try:
                c.rel_err = suites.relative_error(c.prepared.outputs(), c.refs)
                checked.append(c)
            except Exception as exc:  # noqa: BLE001
                rows.append(_row(case, flops, c.name, threads, status="failed", note=_error(exc)))
        log(f"  timing {threads} thread(s): {', '.join(c.name for c in checked)}")
        timings = protocol.measure_interleaved([protocol.System(c.name, c.prepared.call) for c in checked],
                                               rounds=config.rounds, min_sample_s=config.min_sample_s,
                                               settle_s=config.settle_s) if checked else {}
        for c in checked:
            t = timings[c.name]
            note = "; ".join(n for n in (notes.get(c.name, ""), c.prepared.note) if n)
            if not t.ok:
                rows.append(_row(case, flops, c.name, threads, status="failed", note=t.error or "no samples"))
                continue
            rows.append(_timed_row(case, flops, c.name, threads, t.median_s, t.iqr_pct, t.minmax_pct, len(t.samples),
                                   t.inner, c.prepared.tuning_time_s, c.prepared.measurements, c.rel_err, note, config,
                                   t.foreign_cores))
    if tvm is not None:
        rows += _race_tvm(case, flops, config, tvm, log)
    return rows


def _timed_row(case: suites.BenchCase, flops: int, name: str, threads: int, median_s: float, iqr: float, minmax: float,
               rounds: int, inner: int, tuning_s: float, measurements: int | None, rel_err: float, note: str,
               config: RaceConfig, foreign_cores: float = math.nan) -> Row:
    gflops = flops / median_s / 1e9 if median_s > 0 and flops else math.nan
    peak = config.peaks.get(threads)
    wrong = not (rel_err <= REL_ERR_TOLERANCE)  # NaN counts as wrong
    if wrong:
        note = "; ".join(n for n in (note, f"output differs from the float64 reference (rel. error {rel_err:.2e})") if n)
    return _row(case, flops, name, threads, status="wrong" if wrong else "ok", median_s=median_s, iqr_pct=iqr,
                minmax_pct=minmax, rounds=rounds, inner=inner, gflops=gflops,
                peak_fraction=gflops * 1e9 / peak if peak else math.nan, tuning_time_s=tuning_s,
                measurements=measurements, rel_err=rel_err, foreign_cores=foreign_cores, note=note)


def _race_tvm(case: suites.BenchCase, flops: int, config: RaceConfig, tvm: Any, log: Callable[[str], None]) -> list[Row]:
    try:
        log(f"  tuning tvm ({config.budget_s:g} s budget, subprocess)")
        result = tvm.run(case)
    except PeerSkip as exc:
        return [_row(case, flops, "tvm", status="skipped", note=str(exc))]
    except Exception as exc:  # noqa: BLE001
        return [_row(case, flops, "tvm", status="failed", note=_error(exc))]
    rows = []
    for t in result.timings:
        samples = t.get("samples") or []
        if t.get("error") or not samples:
            rows.append(_row(case, flops, "tvm", int(t["threads"]), status="failed", note=t.get("error") or "no samples"))
            continue
        note = "; ".join(n for n in ("timed in its own process (not interleaved)", t.get("note", "")) if n)
        rows.append(_timed_row(case, flops, "tvm", int(t["threads"]), float(t["median_s"]), float(t["iqr_pct"]),
                               float(t["minmax_pct"]), len(samples), int(t.get("inner", 0)), result.tuning_time_s,
                               result.trials, result.rel_err, note, config, float(t.get("foreign_cores", math.nan))))
    return rows


def race_suite(suite: str, config: RaceConfig, log: Callable[[str], None] = lambda msg: None) -> tuple[list[Row], list[str]]:
    cases, notes = suites.build_suite(suite, config.batch, config.short)
    if config.workloads:
        cases = [c for c in cases if c.name in config.workloads]
    peers = []
    for name in config.peers:
        if name == "tvm":
            continue
        peer = load_peer(name)
        why = peer.unavailable()
        if why:
            notes.append(f"{suite}: peer {name} skipped: {why}")
        else:
            peers.append(peer)
    tg_systems = []
    for strategy in config.strategies:
        db = None if config.db_dir is None else os.path.join(config.db_dir, f"tuning-{strategy}.db")
        system = TilegraphSystem(strategy, config.budget_s, seed=config.seed, db=db)
        why = system.unavailable()
        if why:
            notes.append(f"{suite}: {system.name} skipped: {why}")
        else:
            tg_systems.append(system)
    tvm = None
    if "tvm" in config.peers:
        from benchmarks.peers.tvm_ms import TvmPeer

        tvm = TvmPeer(config.budget_s, list(config.threads), config.rounds, config.min_sample_s, venv=config.tvm_venv)
        why = tvm.unavailable()
        if why:
            notes.append(f"{suite}: peer tvm skipped: {why}")
            tvm = None
    rows: list[Row] = []
    for i, case in enumerate(cases):
        log(f"[{suite} {i + 1}/{len(cases)}] {case.name}: {case.describe()}")
        rows += race_case(case, config, peers, tg_systems, tvm, log)
    return rows, notes
