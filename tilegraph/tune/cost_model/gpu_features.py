"""Per-store features for GPU programs: the CPU columns (features.py) plus how the block is shaped
and how its first warp touches memory (lower/gpu/memory_access.py's coalescing and bank-conflict
analysis, run on the scheduled program, not a lowered one).

    GPU_PER_STORE_FEATURES.extract(sch.func)   # (stores, NUM_FEATURES + len(GPU_COLUMNS)) float32

Per store, beside its CPU row:
- the launch: threads per block, blocks, virtual threads (products of the loops around the store
  bound to threadIdx / blockIdx / vthread), shared and local bytes the program allocates;
- global memory, over the store and its loads: how many accesses, how many uncoalesced (a warp
  touches more 32-byte sectors than its bytes need), the worst and the mean sectors / ideal;
- shared memory: how many accesses, how many with bank conflicts, the worst conflict ways.

An index is flattened row-major after the block bindings are substituted, so the analysis sees
the addresses one warp of the schedule computes: in

    for t in threadIdx.x(64): for k in (48): C[t // 8, t % 8] += A_shared[t // 8, k] * B[k, t % 8]

B[k, t % 8] puts lanes 0..7 on consecutive floats and lanes 8..15 on the same ones again (one
sector, coalesced), A_shared[t // 8, k] is a broadcast within groups of 8 lanes (conflict-free).
Costs a few milliseconds a program (the features are cached per trace by FeatureCache).
"""

from __future__ import annotations

import math

import numpy as np

from tilegraph.loop.ir import BufferStore, For, Func
from tilegraph.lower.gpu.common import BLOCK_KINDS, THREAD_IDX_KINDS
from tilegraph.lower.gpu.memory_access import AccessReport, report_access
from tilegraph.te.expr import BufferLoad, Const, Expr
from tilegraph.te.visit import walk
from tilegraph.tune.cost_model.base import FeatureSet
from tilegraph.tune.cost_model.features import NUM_FEATURES, bound, store_row, store_rows

WARP = 32
GPU_COLUMNS: tuple[str, ...] = (
    "gpu.threads", "gpu.blocks", "gpu.vthreads", "gpu.shared_bytes", "gpu.local_bytes",
    "gpu.global_accesses", "gpu.uncoalesced", "gpu.worst_sectors_ratio", "gpu.mean_sectors_ratio",
    "gpu.shared_accesses", "gpu.conflicted", "gpu.worst_bank_ways",
)
GPU_FEATURE_WIDTH = NUM_FEATURES + len(GPU_COLUMNS)


def _log(x: float) -> float:
    return math.log2(1.0 + max(0.0, float(x)))


def _flat_index(indices: tuple[Expr, ...], shape: tuple[int, ...], binding: dict[str, Expr]) -> Expr:
    flat: Expr = Const(0)
    stride = 1
    for ix, extent in zip(reversed(indices), reversed(shape)):
        flat = flat + bound(ix, binding) * stride if stride > 1 else flat + bound(ix, binding)
        stride *= extent
    return flat


def _reports(st: BufferStore, threads: list[For], binding: dict[str, Expr]) -> list[AccessReport]:
    accesses = [(st.buffer, "store", st.indices)]
    accesses += [(e.buffer, "load", e.indices) for e in walk(st.value) if isinstance(e, BufferLoad)]
    out = []
    for buf, kind, indices in accesses:
        if buf.scope not in ("global", "shared"):
            continue
        flat = _flat_index(indices, buf.shape, binding)
        out.append(report_access(buf, kind, (flat,), threads, None, WARP))
    return out


def gpu_columns(func: Func, st: BufferStore, loops: list[For], binding: dict[str, Expr]) -> list[float]:
    """The GPU_COLUMNS of one store of `func`."""
    threads = [lp for lp in loops if lp.kind in THREAD_IDX_KINDS]
    extent = {kind: math.prod(lp.extent for lp in loops if lp.kind in kinds)
              for kind, kinds in (("threads", THREAD_IDX_KINDS), ("blocks", BLOCK_KINDS), ("vthreads", ("vthread",)))}
    scoped = {scope: sum(math.prod(b.shape) * b.dtype.bits // 8 for b in func.allocs if b.scope == scope)
              for scope in ("shared", "local")}
    reports = _reports(st, threads, binding)
    glob = [r for r in reports if r.scope == "global"]
    shared = [r for r in reports if r.scope == "shared"]
    ratios = [r.sectors / r.ideal for r in glob]
    return [_log(extent["threads"]), _log(extent["blocks"]), _log(extent["vthreads"]),
            _log(scoped["shared"]), _log(scoped["local"]),
            float(len(glob)), float(sum(not r.coalesced for r in glob)),
            _log(max(ratios, default=0.0)), _log(sum(ratios) / len(ratios) if ratios else 0.0),
            float(len(shared)), float(sum(not r.conflict_free for r in shared)),
            _log(max((r.conflict_ways for r in shared), default=0))]


def gpu_program_features(func: Func) -> np.ndarray:
    rows = store_rows(func, lambda st, loops, binding: store_row(st, loops, binding)
                      + gpu_columns(func, st, loops, binding))
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), GPU_FEATURE_WIDTH)


# The feature set of the GPU search (its version changes whenever a column's meaning does).
GPU_PER_STORE_FEATURES = FeatureSet("per-store-gpu", f"per-store-gpu-v1-{GPU_FEATURE_WIDTH}", GPU_FEATURE_WIDTH,
                                    gpu_program_features)

__all__ = ["GPU_COLUMNS", "GPU_FEATURE_WIDTH", "GPU_PER_STORE_FEATURES", "gpu_columns", "gpu_program_features"]
