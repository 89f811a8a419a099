"""ETIR states for GPU targets: what Gensor walks over when the target is CUDA or OpenCL.

    space = GpuSpace.from_workload(wl)                 # the anchor block's spatial / reduce extents
    s = minimal_gpu_state(space)                       # one element per thread, rstep 1
    s.block, s.thread, s.vthread, s.rstep, s.pad       # frozen and hashable: equal programs, one node
    sch = gpu_schedule(wl, s)                           # public primitives only (replayable trace)
    states = gpu_search(wl, target, top_k=8)            # model-weighted random walks, best first

The anchor (the last block with a reduction, else the last block) is tiled, per spatial axis a, as
[grid, vthread v_a, threads, c_a] with block tile B_a = v_a * threads_a * c_a and thread tile
t_a = v_a * c_a (Gensor 1.7: thread ti owns v chunks of c contiguous elements, t*c apart), and per
reduce axis as [outer, rstep]. Loops: grid (fused, blockIdx.x) / threads (fused, threadIdx.x) /
reduce outers / reduce inners / vthreads / c (unrolled). Inputs are copied to shared memory at the
innermost reduce outer loop (cooperatively, see lower/gpu/cooperative_fetch.py; four elements per
thread as float4 where rows stay aligned), padded by `pad` (0, 1 or 4) elements per row against
bank conflicts; the result accumulates in a local (register) tile. With
vthread > 1 the strided tile has no contiguous write-back region for cache_write, so the schedule
accumulates in place and lowering keeps the tile in registers (lower/gpu/register_accumulators.py).
Other blocks: pure producers are inlined, the rest get one element per thread over their fused
spatial loops (reductions stay serial inside a thread).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from tilegraph.errors import TilegraphError
from tilegraph.loop.ir import Block, BufferStore
from tilegraph.loop.visit import find_block, walk_stmts
from tilegraph.schedule.defaults import GPU_FLAT_THREADS, default_gpu_schedule, flat_gpu_schedule, gpu_anchor, inline_producers
from tilegraph.schedule.gpu_rows import ROW_LANES, ROWS_PER_BLOCK, is_row_operator, row_count, row_gpu_schedule
from tilegraph.schedule.schedule import Schedule
from tilegraph.te.expr import BufferLoad, Var
from tilegraph.te.visit import free_vars, walk
from tilegraph.te.workload import Workload
from tilegraph.tune.hardware_gpu import GpuHardware

FLAT_THREADS = GPU_FLAT_THREADS
MAX_REGISTER_TILE = 64
# Shared-tile row padding: 0 keeps rows 16-byte aligned (float4 copies, lower/gpu/vectorize_copies.py)
# but lets column reads collide in banks; 1 removes the collisions but breaks the alignment; 4 keeps
# the alignment and spreads the rows over banks four at a time.
PADS = (0, 1, 4)
BYTES = 4


@dataclass(frozen=True)
class GpuSpace:
    anchor: str
    spatial: tuple[int, ...]
    reduce: tuple[int, ...]
    operands: tuple[tuple[frozenset[int], int], ...]   # (axes an input's index uses, its element count)
    naive: bool                                          # the anchor's loops are its own axes, in order

    @staticmethod
    def from_workload(wl: Workload) -> GpuSpace:
        sch = Schedule(wl)
        anchor = gpu_anchor(sch)
        blk = find_block(sch.func, anchor)
        loops = sch.loops(anchor)
        naive = len(loops) == len(blk.iter_vars) and all(b == Var(lp) for b, lp in zip(blk.bindings, loops))
        order = [iv for iv in blk.iter_vars if iv.kind == "spatial"] + [iv for iv in blk.iter_vars if iv.kind == "reduce"]
        naive = naive and [iv.kind for iv in blk.iter_vars] == [iv.kind for iv in order]
        index = {iv.var.name: n for n, iv in enumerate(order)}
        operands = []
        for load in _loads(blk):
            used = frozenset(index[v.name] for i in load.indices for v in free_vars(i) if v.name in index)
            operands.append((used, math.prod(load.buffer.shape)))
        return GpuSpace(anchor, tuple(iv.extent for iv in order if iv.kind == "spatial"),
                        tuple(iv.extent for iv in order if iv.kind == "reduce"), tuple(operands), naive)


def _loads(blk: Block) -> list[BufferLoad]:
    out = []
    for s in walk_stmts(blk.body):
        if isinstance(s, BufferStore):
            out += [x for x in walk(s.value) if isinstance(x, BufferLoad) and x.buffer.name != s.buffer.name]
    return out


@dataclass(frozen=True)
class GpuState:
    block: tuple[int, ...]
    thread: tuple[int, ...]
    vthread: tuple[int, ...]
    rstep: tuple[int, ...]
    pad: int = 0
    shared: bool = True

    def threads(self) -> int:
        return math.prod(b // t for b, t in zip(self.block, self.thread))

    def to_dict(self) -> dict[str, object]:
        return {"block": list(self.block), "thread": list(self.thread), "vthread": list(self.vthread),
                "rstep": list(self.rstep), "pad": self.pad, "shared": self.shared}


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def minimal_gpu_state(space: GpuSpace) -> GpuState:
    """Block tiles of up to 16 along the last axis (one element per thread), rstep 1."""
    block = [1] * len(space.spatial)
    if space.spatial:
        block[-1] = max(d for d in _divisors(space.spatial[-1]) if d <= 16)
    return GpuState(tuple(block), tuple(1 for _ in space.spatial), tuple(1 for _ in space.spatial),
                    tuple(1 for _ in space.reduce), 0, bool(space.reduce))


def shared_bytes(space: GpuSpace, s: GpuState) -> int:
    if not s.shared or not space.reduce:
        return 0
    total = 0
    tiles = (*s.block, *s.rstep)
    for used, _ in space.operands:
        total += math.prod(tiles[a] for a in used) + s.pad * 8
    return total * BYTES


def registers(s: GpuState) -> int:
    return math.prod(s.thread) + 24


def feasible(space: GpuSpace, s: GpuState, hw: GpuHardware) -> bool:
    """Tiles divide their extents and the block fits the device (threads, shared memory, registers)."""
    if not space.naive:
        return len(s.block) == len(space.spatial)
    for e, b, t, v in zip(space.spatial, s.block, s.thread, s.vthread):
        if e % b or b % t or t % v:
            return False
    if any(r % k for r, k in zip(space.reduce, s.rstep)):
        return False
    threads = s.threads()
    if not 1 <= threads <= hw.max_threads_per_block or math.prod(s.thread) > MAX_REGISTER_TILE:
        return False
    regs = registers(s)
    return shared_bytes(space, s) <= hw.shared_memory_per_block and regs <= 255 and regs * threads <= 65536


def transitions(space: GpuSpace, s: GpuState) -> list[GpuState]:
    """Neighbouring states: one tile factor moved to the next larger or smaller divisor."""
    out: list[GpuState] = []

    def moved(values: tuple[int, ...], axis: int, limit: int) -> list[tuple[int, ...]]:
        ds = _divisors(limit)
        k = ds.index(values[axis]) if values[axis] in ds else 0
        res = []
        for j in (k - 1, k + 1):
            if 0 <= j < len(ds):
                res.append((*values[:axis], ds[j], *values[axis + 1:]))
        return res

    for a, e in enumerate(space.spatial):
        out += [replace(s, block=b) for b in moved(s.block, a, e)]
        out += [replace(s, thread=t) for t in moved(s.thread, a, s.block[a])]
        out += [replace(s, vthread=v) for v in moved(s.vthread, a, s.thread[a])]
    for r, e in enumerate(space.reduce):
        out += [replace(s, rstep=k) for k in moved(s.rstep, r, e)]
    if s.shared:
        out += [replace(s, pad=p) for p in PADS if p != s.pad]
    return out


def predict(space: GpuSpace, s: GpuState, hw: GpuHardware) -> float:
    """Seconds, from a roofline over DRAM, shared memory and FMA throughput with wave quantisation,
    a bank-conflict penalty (contiguous per-thread chunks without padding) and an occupancy term."""
    blocks = math.prod(-(-e // b) for e, b in zip(space.spatial, s.block))
    threads = s.threads()
    work = math.prod(space.spatial) * max(1, math.prod(space.reduce))
    flops = 2.0 * work
    tiles_full = (*s.block, *space.reduce)
    dram = sum(min(n, math.prod(tiles_full[a] for a in used)) for used, n in space.operands) * blocks * BYTES
    dram += math.prod(space.spatial) * BYTES
    per_thread = sum(math.prod((*s.thread, *([1] * len(space.reduce))[:0])[a] if a < len(s.thread) else 1
                               for a in used) for used, _ in space.operands)
    smem = (work / max(1, math.prod(s.thread))) * per_thread * BYTES if s.shared and space.reduce else 0.0
    active = max(1, hw.active_blocks(threads, shared_bytes(space, s), registers(s)))
    slots = hw.num_sms * active
    waves = -(-blocks // slots)
    utilisation = blocks / (waves * slots)
    warp_fill = min(1.0, threads / hw.warp_size)
    compute = flops / (hw.peak_flops * utilisation * warp_fill)
    t = max(compute, dram / hw.dram_bandwidth, smem / hw.smem_bandwidth)
    contiguous = s.thread[-1] // s.vthread[-1] if s.thread else 1
    if s.shared and s.pad != 1 and contiguous > 1:
        t *= 1.0 + (0.05 if s.pad == 0 else 0.025) * min(contiguous, 8)
    return t + 2e-6


# ------------------------------------------------------------------------------- schedule building
def gpu_schedule(wl: Workload, s: GpuState | None = None, threads: int = FLAT_THREADS) -> Schedule:
    """The schedule a state stands for, built from public primitives (so its trace replays); without
    a state (or for an anchor this search cannot tile), the default GPU schedule."""
    space = GpuSpace.from_workload(wl)
    if s is None or not space.naive or not space.spatial:
        return default_gpu_schedule(wl, threads)
    sch = Schedule(wl)
    inline_producers(sch, "all", keep={space.anchor})
    for name in sch.block_names():
        if name != space.anchor:
            flat_gpu_schedule(sch, name, threads)
    _tile_anchor(sch, space, s)
    return sch


def _tile_anchor(sch: Schedule, space: GpuSpace, s: GpuState) -> None:
    spatial = [[e // b, v, b // t, t // v] for e, b, t, v in zip(space.spatial, s.block, s.thread, s.vthread)]
    tile_gpu_anchor(sch, space.anchor, spatial, [[None, k] for k in s.rstep], s.shared, s.pad)


def tile_gpu_anchor(sch: Schedule, name: str, spatial: list[list], reduce: list[list], shared: bool, pad: int) -> None:
    """The GPU tiling of the anchor `name` (its loops its own axes, spatial first): per spatial loop
    the factors [grid, vthread, threads, c], per reduce loop [outer, rstep] (ints or a sketch's
    sampled values); the inputs staged in shared memory at the innermost reduce outer loop when
    `shared`, rows padded by `pad`. Gensor's states and the GPU sketches (tune/space/gpu_sketch.py)
    both tile through here."""
    loops = list(sch.loops(name))
    ns = len(spatial)
    grid, vts, thr, inner = [], [], [], []
    for lp, factors in zip(loops[:ns], spatial):
        g, vv, n, c = sch.split(lp, list(factors))
        grid.append(g)
        vts.append(vv)
        thr.append(n)
        inner.append(c)
    outer, rin = [], []
    for lp, factors in zip(loops[ns:], reduce):
        o, i = sch.split(lp, list(factors))
        outer.append(o)
        rin.append(i)
    sch.reorder(*grid, *thr, *outer, *rin, *vts, *inner)
    block_loop = sch.fuse(*grid) if len(grid) > 1 else grid[0]
    thread_loop = sch.fuse(*thr) if len(thr) > 1 else thr[0]
    sch.bind(block_loop, "blockIdx.x")
    sch.bind(thread_loop, "threadIdx.x")
    for v in vts:
        sch.bind(v, "vthread")
    for c in inner:
        sch.unroll(c)
    if all(int(f[1]) == 1 for f in spatial):
        # A strided (vthread) tile has no contiguous write-back region: it accumulates in place here
        # and lower/gpu/register_accumulators.py holds it in registers.
        wb = sch.cache_write(name, "local")
        sch.reverse_compute_at(wb, thread_loop)
    if shared and outer:
        inputs = [t.name for t in sch.workload.inputs]
        for buf in inputs:
            trial = sch.copy()
            try:
                copy = trial.cache_read(name, buf, "shared")
                trial.compute_at(copy, outer[-1])
                if pad:
                    ndim = trial.func.buffer(copy).ndim
                    trial.storage_pad(copy, [0] * (ndim - 1) + [pad])
            except TilegraphError:
                continue
            sch.__dict__.update(trial.__dict__)


# ----------------------------------------------------------------------------------------- search
# Classic tilings of the last two spatial axes (block tile, thread tile) and reduction steps, as
# hand-written GPU GEMMs use them: 64-128 wide blocks of 64-256 threads, each a 4x4 to 8x8 register
# tile. A walk from the one-element state needs dozens of steps to get there; walks start from these
# too (the Roller seeds of the CPU search play the same part).
SEED_BLOCKS = ((32, 32), (32, 64), (64, 32), (64, 64), (64, 128), (128, 64), (128, 128))
SEED_THREADS = ((2, 2), (4, 4), (4, 8), (8, 4), (8, 8))
SEED_RSTEPS = (8, 16, 32)


def seed_gpu_states(space: GpuSpace, hw: GpuHardware) -> list[GpuState]:
    """The feasible classic tilings of a naive anchor with two or more spatial axes and a reduction
    (plain and with 2x2 virtual threads), leading axes untiled."""
    if not space.naive or len(space.spatial) < 2 or not space.reduce:
        return []
    lead = (1,) * (len(space.spatial) - 2)
    out = []
    for block in SEED_BLOCKS:
        for thread in SEED_THREADS:
            for vt in ((1, 1), (2, 2)):
                for r in SEED_RSTEPS:
                    rstep = (*(1,) * (len(space.reduce) - 1), r)
                    s = GpuState((*lead, *block), (*lead, *thread), (*lead, *vt), rstep)
                    if feasible(space, s, hw):
                        out.append(s)
    return out


def gpu_search(wl: Workload, hw: GpuHardware, top_k: int = 8, seed: int = 0, walks: int = 16,
               steps: int = 24) -> list[GpuState]:
    """Model-weighted random walks over feasible GPU states, from the one-element state and the
    classic tilings in turn; the top_k by predicted time."""
    space = GpuSpace.from_workload(wl)
    rng = random.Random(seed)
    start = minimal_gpu_state(space)
    seeds = seed_gpu_states(space, hw)
    visits: dict[GpuState, int] = {start: 1} if feasible(space, start, hw) else {}
    for s in seeds:
        visits[s] = visits.get(s, 0) + 1
    starts = [start, *rng.sample(seeds, min(len(seeds), walks - 1))]
    for w in range(walks):
        cur = starts[w % len(starts)]
        for _ in range(steps):
            nbrs = [n for n in transitions(space, cur) if feasible(space, n, hw)]
            if not nbrs:
                break
            times = [predict(space, n, hw) for n in nbrs]
            best = min(times)
            weights = [math.exp(-4.0 * (t / best - 1.0)) for t in times]
            cur = rng.choices(nbrs, weights)[0]
            visits[cur] = visits.get(cur, 0) + 1
    ranked = sorted(visits, key=lambda x: (predict(space, x, hw), -visits[x], repr(x)))
    return ranked[:top_k]




def gpu_candidates(wl: Workload, target: object, top_k: int = 8, seed: int = 0) -> list[tuple[str, float, dict]]:
    """(trace JSON, predicted seconds, state dict) of the top_k GPU states that build a schedule."""
    from tilegraph.tune.hardware_gpu import gpu_hardware

    hw = gpu_hardware(target)
    space = GpuSpace.from_workload(wl)
    out: list[tuple[str, float, dict]] = row_candidates(wl, hw, top_k // 2)
    seen: set[str] = {trace for trace, _, _ in out}
    for s in gpu_search(wl, hw, top_k=4 * top_k, seed=seed):
        if len(out) >= top_k:
            break
        try:
            trace = gpu_schedule(wl, s).trace.to_json()
        except TilegraphError:
            continue
        if trace not in seen:
            seen.add(trace)
            out.append((trace, predict(space, s, hw), s.to_dict()))
    return out

def row_candidates(wl: Workload, hw: GpuHardware, limit: int) -> list[tuple[str, float, dict]]:
    """Row kernels (one warp per row, schedule/gpu_rows.py) for each rows-per-block, best first:
    a bandwidth model (every input and output byte once) with wave quantisation."""
    if not is_row_operator(wl) or limit < 1:
        return []
    rows = row_count(wl)
    data = sum(math.prod(t.shape) for t in (*wl.inputs, *wl.outputs)) * BYTES
    found = []
    for per_block in ROWS_PER_BLOCK:
        if per_block > rows and per_block > 1:
            continue
        sch = row_gpu_schedule(wl, per_block)
        if sch is None:
            continue
        blocks = -(-rows // per_block)
        threads = ROW_LANES * per_block
        slots = hw.num_sms * max(1, hw.active_blocks(threads, 0, 32))
        waves = -(-blocks // slots)
        utilisation = blocks / (waves * slots)
        predicted = data / (hw.dram_bandwidth * min(1.0, utilisation * 4)) + 2e-6
        found.append((sch.trace.to_json(), predicted, {"row_kernel": True, "rows_per_block": per_block}))
    found.sort(key=lambda c: c[1])
    return found[:limit]


__all__ = ["GpuSpace", "GpuState", "feasible", "seed_gpu_states", "gpu_candidates", "gpu_schedule", "gpu_search",
           "minimal_gpu_state", "predict", "row_candidates", "transitions"]
