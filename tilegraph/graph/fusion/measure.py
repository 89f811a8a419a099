"""Costs of fusion candidates for orchestration, measured through the one measurer (TuneSession).

    with candidate_measurer(graph, target, db, threads=2) as measure:
        record = measure(spec, kernel)     # a Record: "ok" with its latency, or why it failed
    bound = roofline_seconds(workload, hardware_for(target), 2, target)  # from below, no measurement

Each built candidate is checked and timed as a tuning candidate is: in the isolated runner
(a crash or a hang is a failed record, never a failed compile), on fresh random inputs with its
outputs poisoned, against a float64 reference, and recorded in the tuning database under its
workload and the target's fingerprint marked "+built-kernels" (beside the schedules, never among
them: database.built_kernels_fingerprint). Its record's trace names the kernel's binary and the
thread count (session.built_kernel_trace), so a second compile of the same model finds every
cost recorded and measures nothing.

The reference is the graph's own meaning: the candidate's nodes evaluated one by one with their
numpy references (graph/reference.py's per-node references), independent of the te lowering and
of fusion, so a fusion that computes something else is caught here and never chosen. Integer
inputs are zeros (a gather's indices stay in range on any shape); floats are random; arguments
that are graph constants (weights, a where's fill value) hold their values.

Records go to the compile's database when it can be written, else to the default tuning
database (a compile that only reads a shipped database still keeps its costs).
"""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tilegraph.errors import DatabaseError
from tilegraph.graph.dims import argument_dims
from tilegraph.graph.ir import Graph
from tilegraph.graph.ops.registry import reference_outputs
from tilegraph.target import Target
from tilegraph.tune.measure import MeasurePolicy, random_inputs

if TYPE_CHECKING:
    from tilegraph.tune.database import Database

# Most candidates run in microseconds: a few samples over 20 ms give a median as steady as the
# choice needs. The warm-up runs 50 ms at most (100 runs): the measurement worker waits between
# candidates, and a large kernel's first runs after a wait were measured up to 2.5x slow (GPT-2's
# LM head: 14-16 ms, then 5.8). The check runs first, as for any tuning candidate.
POLICY = MeasurePolicy(warmup=2, min_time_s=0.02, min_repeats=5, timeout_s=30.0, warmup_s=0.05)
CHECK_SEED = 20_251_126
CONFIRMED = "confirmed"  # a record's meta key: re-measured apart from its first measurement (choose.py)

_runners: dict[tuple[str, int], Any] = {}  # one measurement worker per target and thread count


def _shared_runner(target: Target, threads: int) -> Any:
    """The runner of this process for (target, threads): its worker starts once and serves every
    compile (spawning one per compile would cost more than measuring a small model)."""
    from tilegraph.tune.runner import Runner

    key = (str(target.fingerprint), threads)
    runner = _runners.get(key)
    if runner is None:
        if not _runners:
            atexit.register(_close_runners)
        runner = _runners[key] = Runner(replace(POLICY, num_threads=threads), target=target)
    return runner


def _close_runners() -> None:
    for runner in _runners.values():
        runner.close()
    _runners.clear()


def _costs_database(db: Database | None) -> Database:
    from tilegraph.graph.construct import WithConstructed
    from tilegraph.tune.database import Database, MemoryDatabase, open_database

    if isinstance(db, WithConstructed):  # the compile's own database keeps the costs
        db = db.db
    if isinstance(db, Database) and not getattr(db, "readonly", False):
        return db
    try:
        return open_database(None)
    except DatabaseError:
        return MemoryDatabase()  # nowhere to keep costs: measured again next time, nothing else lost


@contextlib.contextmanager
def candidate_measurer(graph: Graph, target: Target, db: Database | None, threads: int) -> Iterator[Callable[..., Any]]:
    """A function measuring one built candidate (spec, kernel, fresh=False) -> Record, and the
    session behind it (`.session.measured`: the kernels it timed). With fresh=True the kernel is
    timed again whatever is recorded, and its new record, marked CONFIRMED in its meta, replaces
    the old one."""
    from tilegraph.tune.options import TuneOptions
    from tilegraph.tune.session import TuneSession

    session = TuneSession(target, _costs_database(db), TuneOptions(progress=False, num_threads=threads,
                                                                   runner=_shared_runner(target, threads)))

    def measure_candidate(spec: Any, kernel: Any, fresh: bool = False) -> Any:
        def check_data() -> tuple[list[np.ndarray], list[np.ndarray]]:  # only for a kernel not yet recorded
            inputs = with_constants(graph, spec, check_inputs(spec.workload, CHECK_SEED))
            return inputs, group_reference(graph, spec, inputs)

        meta = {"nodes": list(spec.nodes)[:16], **({CONFIRMED: True} if fresh else {})}
        return session.measure_kernel(spec.workload, kernel, check_data, meta=meta, fresh=fresh)

    measure_candidate.session = session  # type: ignore[attr-defined]
    try:
        yield measure_candidate
    finally:
        session.close()


def fits_in_memory(workload: Any) -> bool:
    """Whether checking and timing the workload (its arrays, a float64 reference, the copies sent
    to the measurement worker) takes at most a quarter of the memory available."""
    from tilegraph.testing.data import available_memory

    have = available_memory()
    need = sum(int(np.prod(t.shape, dtype=np.int64)) * 8 for t in (*workload.inputs, *workload.outputs)) * 3
    return have is None or need <= have // 4


def check_inputs(workload: Any, seed: int) -> list[np.ndarray]:
    """Random floats (positive where the workload takes a log or a root of an input), booleans at
    random, integers zero; the run-time dims at their upper bounds (where the kernel computes what
    the graph's nodes do on its shapes)."""
    arrays = random_inputs(workload, seed)
    dims = workload.dims_input
    return [a if t is dims else np.zeros_like(a) if a.dtype.kind in "iu" else a for t, a in zip(workload.inputs, arrays)]


def with_constants(graph: Graph, spec: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """`inputs` with each argument that is a graph constant holding its own value: a kernel may
    read a constant both as an argument and folded into its code (a size-1 zero point is a literal
    of an add and an argument of a where), and the two must agree."""
    return [np.ascontiguousarray(graph.constants[name], dtype=a.dtype).reshape(a.shape) if name in graph.constants
            else a for name, a in zip(spec.arguments, inputs)]


def group_reference(graph: Graph, spec: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The float64 outputs of `spec`'s nodes evaluated one by one with their numpy references, its
    arguments bound to `inputs` (in the workload's shapes, as the kernel sees them)."""
    env: dict[str, Any] = {}
    for name, array in zip(spec.arguments, inputs):
        if argument_dims(name) is None:  # the dims input holds every dim's upper bound: the graph's shapes
            env[name] = array.reshape(graph.type_of(name).shape)
    nodes = {n.name: n for n in graph.nodes}
    for name in spec.nodes:
        node = nodes[name]
        args = [None if not t else env[t] if t in env else graph.constants[t] for t in node.inputs]
        outs = reference_outputs(node, args, [graph.type_of(o) for o in node.outputs])
        env.update(zip(node.outputs, outs))
    return [np.asarray(env[o], dtype=np.float64).reshape(t.shape)
            for o, t in zip(spec.outputs, spec.workload.outputs)]


def hardware_for(target: Target) -> Any:
    """The hardware model the roofline reads: the CPU's, or the GPU's for a GPU target."""
    from tilegraph.runtime.backends import backend_for

    if backend_for(target).is_gpu:
        from tilegraph.tune.hardware_gpu import gpu_hardware

        return gpu_hardware(target)
    from tilegraph.tune.hardware import hardware_model

    return hardware_model(target)


def roofline_seconds(workload: Any, hw: Any, threads: int, target: Target | None = None) -> float:
    """An estimate from below of a workload's time: its arguments' bytes moved once at the
    bandwidth of the level they fit in (a GPU: its DRAM), or its FLOPs at peak, whichever is larger
    (the peak of the target's dot-product instructions for narrow operands: dot_speedup)."""
    from tilegraph.tune.hardware_gpu import GpuHardware

    nbytes = sum(int(np.prod(t.shape)) * (t.dtype.bits // 8) for t in (*workload.inputs, *workload.outputs))
    if isinstance(hw, GpuHardware):
        return max(nbytes / hw.dram_bandwidth, workload.flops() / hw.peak_flops)
    level = "l2" if nbytes <= hw.cache_bytes("l2") * threads else "l3" if nbytes <= hw.cache_bytes("l3") else "dram"
    peak = hw.peak_flops(cores=threads) * dot_speedup(workload, target)
    return max(nbytes / hw.bandwidth(level, cores=threads), workload.flops() / peak)


def dot_speedup(workload: Any, target: Target | None) -> float:
    """How many times the float32 FMA peak a workload's products may reach: 16 with bfloat16
    operands and 32 with 8-bit ones on a target with matrix tiles (AMX: tdpbf16ps does 512
    multiply-adds a cycle, tdpbusd 1,024, two AVX-512 FMAs 32), 2 with bfloat16 operands on a target
    with vdpbf16ps, 4 with 8-bit ones and vpdpbusd, 2 with 8-bit ones and AVX2's vpmaddwd steps (16
    multiply-adds a ymm instruction against an FMA's 8), else 1. (Without it the roofline, an
    estimate from below, priced a bf16 GEMM above its measured time and pruned it: BERT-base's
    768 x 3072 projections then ran unpaired, 2.2 ms instead of 0.9.)"""
    from tilegraph.target import has_bf16_dot, has_int8_dot, has_matrix_tiles, int8_dot_lanes

    dtypes = {t.dtype.name for t in workload.inputs}
    if target is None:  # unknown: the best any target reaches (the estimate stays one from below)
        return 32.0 if dtypes & {"uint8", "int8"} else 16.0 if "bfloat16" in dtypes else 1.0
    if dtypes & {"uint8", "int8"} and has_matrix_tiles(target, "int8"):
        return 32.0
    if "bfloat16" in dtypes and has_matrix_tiles(target, "bfloat16"):
        return 16.0
    if dtypes & {"uint8", "int8"} and has_int8_dot(target):
        return 4.0
    if dtypes & {"uint8", "int8"} and int8_dot_lanes(target):
        return 2.0
    if "bfloat16" in dtypes and has_bf16_dot(target):
        return 2.0
    return 1.0


__all__ = ["POLICY", "candidate_measurer", "check_inputs", "dot_speedup", "fits_in_memory", "group_reference",
           "hardware_for", "roofline_seconds"]
