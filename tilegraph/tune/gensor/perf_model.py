"""Micro-performance model T̂(state): predicted seconds of one run, from the hardware model only.

    model = PerfModel(space, hw)
    model.predict(state)            # seconds (memoised per state)
    model.breakdown(state)          # the terms below, for logs and docs
    model.reuse_score(s, s2, level) # Roller's data-reuse score of growing s into s2 at one level

Terms (all per run; C = cores used = min(cores, parallel tasks)):
    executed     = flops_per_point * Π_spatial ceil(E/l2)*l2 * Π_reduce ceil(R/rstep)*rstep    (tails are paid)
    micro-kernel, per reduction step: acc = accumulator vectors, loads = vector loads + broadcasts
        cycles   = max(acc / fma_units, loads / 2 load ports, fma_latency) + loop overhead / unroll + fixed
                   + 4 x broadcasts indexed through a floormod of a fused parallel loop
        eff      = (acc / fma_units) / cycles
    T_comp       = executed / (peak_per_core * C * eff * vec_width / lanes)
    traffic      L1->reg: register tiles x operand footprint over the whole reduction
                 L2->L1 : L1 tiles x k-blocks x footprint(l1 tile, rstep) (+ output tile re-visits);
                          when the L1 working set overflows 3/4 of L1, the L1->reg traffic comes from L2
                 mem->L2: L2 blocks x footprint(l2 block, whole reduction) if it fits 3/4 of L2, else per L1 tile;
                          served by L3 when all data fit 3/4 of L3, else by DRAM
    T_mem        = max over levels of traffic / bandwidth (L1, L2 per core x C; L3, DRAM shared)
    T̂            = imbalance * max(T_comp, T_mem) + 0.1 * min(T_comp, T_mem) + overheads
    imbalance    = ceil(tasks / cores) / (tasks / cores)   when tasks >= cores

Register micro-kernel family (`_evaluate_micro`): each register tile streams its operands' panels
over the whole reduction, from L1, L2 or memory (packed panels stream 2x faster than the measured L3
bandwidth; a spilled packed panel still passes through L2, so it is never cheaper than one that fits,
whatever the measured L2/L3 ratio; Zen 3's probe read L3 faster than L2). Unpacked panels whose rows
are >= 4 KiB apart are latency-bound: T_mem includes 25 cycles per panel row touched; broadcast rows
that crowd one L1 set and are read in place add 1 cycle per row and reduction step (`aliased_rows`),
a copy interleaving them one pass over the operand; vector-loaded
operands add 10 cycles per page-apart position a register tile touches (`far_rows`). Non-dividing L2
blocks guard the kernel: T_comp x 4 when the vector axis is ragged, and x 2 more behind a fused
parallel loop (other guards are unswitched). Calibrated with benchmarks/model_quality.py (GMM-4 and
C2D-2, 1 thread, Zen 4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tilegraph.tune.gensor.broadcast_panels import aliased_rows, tile_rows_layout
from tilegraph.tune.gensor.state import (
    EtirState,
    IterSpace,
    Operand,
    footprint_bytes,
    packable_operands,
    parallel_tasks,
    touched_extent,
    vector_contiguous,
)
from tilegraph.tune.hardware import HardwareModel

CAPACITY_FRACTION = 0.75
PARALLEL_OVERHEAD_S = 3e-6
TILE_OVERHEAD_CYCLES = 12
KSTEP_OVERHEAD_CYCLES = 1.0
# Cycles per reduction step that unrolling does not remove (address arithmetic, the broadcasts'
# issue slots, the operand streams' L1 misses): measured GMM-4 micro-kernels lose a nearly fixed
# 1.7-4.5 cycles per step to their ideal FMA count (AVX2 4x16 and 6x16; AVX-512 8x32, 4x64, 6x64
# and 12x32 on a Sapphire Rapids-class core), which is why larger register tiles run faster even
# when a smaller one already covers FMA latency x units.
KSTEP_FIXED_CYCLES = 2.0
NOMINAL_HZ = 3.0e9
# A tile that does not divide its axis puts a guard inside the micro-kernel. On the vector axis
# the guard splits every vector FMA into a checked vector / scalar pair (~4x, and ~2x more behind a
# fused parallel loop, measured on GMM-4 on Zen 4). Guards on another axis are invariant in the
# reduction loop and gcc unswitches them: GMM-4 with 6-row tiles (1024 = 170 x 6 + 4) runs 12-15%
# faster than with 4- or 8-row tiles on AVX2 and AVX-512, fused or not; the tail's extra work is
# already in the executed FLOPs.
GUARDED_KERNEL_PENALTY = 1.0
GUARDED_VECTOR_PENALTY = 4.0
GUARDED_FUSED_PENALTY = 2.0
# Unpacked panels with rows this far apart touch a new page per row: the hardware prefetcher
# stops at page boundaries and the row's first line costs about an L2 round trip plus a TLB
# miss, which the micro-kernel cannot hide (measured ~9 ns per row on GMM-4, 1 thread).
STRIDED_ROW_BYTES = 4096
STRIDED_ROW_CYCLES = 25.0
# Operands a micro-kernel loads as vectors (depthwise convolution's input) from positions a page or
# more apart (`far_rows`): each is a new stream the prefetcher must pick up, paid on top of the
# kernel's time. DEP-2: 14-row register tiles (29 input rows 28 KiB apart) run 1.3-1.9x slower than
# 7- or 14-column ones (3 rows), AVX2 and AVX-512, with the same FLOPs and bytes.
FAR_ROW_CYCLES = 10.0
# Those loads behind a fused parallel loop: their addresses and the inlined padding's guards take a
# floordiv/floormod of the fused index per load, which gcc does not hoist (DEP-2: 3.3x slower with
# three loops fused than with one).
FUSED_GUARDED_LOADS_PENALTY = 3.0
# Contiguous (packed) panels stream with the prefetcher ahead of the micro-kernel: a panel that
# overflows L2 is still served faster than the all-core L3 bandwidth we measure.
PACKED_STREAM_SPEEDUP = 2.0
# A fused parallel loop is split back with floordiv/floormod inside the micro-kernel, and gcc does
# not hoist the floormod out of the reduction loop: a few cycles per broadcast that needs it
# (measured ~5x on C2D-2 with 14 such broadcasts per step; packed copies are indexed from the task).
FUSED_INDEX_CYCLES = 4.0
# A dot-product step (dot_group > 1) that reads an 8/16-bit B as rows interleaves them into its
# operand at every step, per accumulator column: 4 row loads, 3 inserts and a vpermb per 4 k on
# AVX512_VNNI, 4 sign extensions, 4 unpacks and 2 inserts on AVX2, in cycles per k (estimated from
# those instruction counts, not fitted; bf16's rows are priced as int8's); a copy packed in
# the step's K groups is read as it is (to_trace.packed_layout). Packed u8 x s8 GEMMs measured
# 1.3-2.4x faster than unpacked ones on AVX-512 with VNNI, and their 1x1 convolutions in QDQ
# ResNet-50 257 against 163 GOP/s on AVX2.
UNPACKED_DOT_CYCLES = {16: 0.5, 8: 1.25}
# A broadcast row of the register tile that shares its L1 set with more rows than the set keeps
# (`broadcast_panels.aliased_rows`: NHWC inputs of 512+ channels) misses L1 at every reduction
# step when read in place: a 14-row tile over rows 4 KiB apart ran 3x slower than over rows 1040
# floats apart (Zen 3, 1x1 convolution over 1024 channels), ~1 cycle per aliased row and step.
# A copy that interleaves the tile's rows (to_trace, when the tile divides them) removes it, for
# one pass over the operand.
ALIASED_ROW_CYCLES = 1.0
L1_REUSE_FRACTION = 0.5


@dataclass(frozen=True)
class Breakdown:
    seconds: float
    t_comp: float
    t_mem: float
    kernel_eff: float
    cores_used: int
    imbalance: float
    traffic: tuple[float, float, float]  # L1->reg, L2->L1, mem->L2 bytes
    footprint: tuple[float, float, float]  # registers (bytes), L1, L2 working sets


class PerfModel:
    def __init__(self, space: IterSpace, hw: HardwareModel):
        self.space = space
        self.hw = hw
        self._cache: dict[EtirState, Breakdown] = {}
        self.packable = packable_operands(space)
        total = sum(math.prod(o.shape) * o.dtype_bytes for o in space.operands)
        self.unique_bytes = total + math.prod(space.spatial) * space.output_bytes

    def predict(self, state: EtirState) -> float:
        return self.breakdown(state).seconds

    def breakdown(self, state: EtirState) -> Breakdown:
        got = self._cache.get(state)
        if got is None:
            got = self._cache[state] = self._evaluate(state)
        return got

    # ------------------------------------------------------------------ pieces
    def _tiles(self, spatial: tuple[int, ...], reduce: tuple[int, ...] | None) -> tuple[int, ...]:
        return (*spatial, *(self.space.reduce if reduce is None else reduce))

    def _inputs_fp(self, tiles: tuple[int, ...]) -> float:
        return float(sum(footprint_bytes(o, tiles) for o in self.space.operands))

    def micro_kernel(self, state: EtirState) -> tuple[float, float]:
        """(efficiency in [0, 1], cycles per reduction step) of the register micro-tile."""
        sp, hw = self.space, self.hw
        acc = max(1.0, math.prod(state.reg) / max(1, state.vec_width))
        unit = self._tiles(state.reg, tuple(1 for _ in sp.reduce))
        loads = 0.0
        for o in sp.operands:
            elems = footprint_bytes(o, unit) / o.dtype_bytes
            if state.vec_width > 1 and state.vec_axis in o.axes_used():
                loads += elems / state.vec_width if vector_contiguous(o, state) else elems
            else:
                loads += elems  # broadcasts (or scalar loads)
        if not sp.has_reduce:
            loads += acc  # elementwise: every output vector is stored once per "step"
        cycles = max(acc / hw.fma_units, loads / 2.0, float(hw.fma_latency_cycles if sp.has_reduce else 1))
        cycles += KSTEP_OVERHEAD_CYCLES / max(1, state.unroll) + (KSTEP_FIXED_CYCLES if sp.has_reduce else 0.0)
        cycles += FUSED_INDEX_CYCLES * self._fused_index_loads(state, unit)
        spill = max(0.0, acc + state.operand_vectors - hw.vector_registers)
        cycles += 2.0 * spill
        cycles += self._unpacked_dot_cycles(state)
        return (acc / hw.fma_units) / cycles, cycles

    def _unpacked_dot_cycles(self, state: EtirState) -> float:
        """Cycles per reduction step a dot-product step spends interleaving the rows of narrow
        operands it reads unpacked (UNPACKED_DOT_CYCLES per accumulator column); 0 without steps."""
        if state.dot_group <= 1 or state.vec_width <= 1:
            return 0.0
        rows = [o for o in self.space.operands if o.dtype_bytes * state.dot_group <= 4
                and state.vec_axis in o.axes_used() and o.name not in state.pack]
        return len(rows) * UNPACKED_DOT_CYCLES.get(state.vec_width, 1.0) * state.interleave

    def _fused_index_loads(self, state: EtirState, unit: tuple[int, ...]) -> float:
        """Broadcasts per reduction step whose index takes a floormod of the fused parallel loop:
        unpacked operands not indexed by the vector axis but by a fused axis other than the first
        (0 unless loops are fused). Vector loads hide it (measured on GMM-4's B)."""
        sp = self.space
        outer = [a for a, e in enumerate(sp.spatial) if -(-e // state.l2[a]) > 1]
        inner_fused = set(outer[1: state.parallel])
        if not inner_fused:
            return 0.0
        return sum(footprint_bytes(o, unit) / o.dtype_bytes for o in sp.operands
                   if o.axes_used() & inner_fused and state.vec_axis not in o.axes_used() and o.name not in state.pack)

    def _evaluate(self, state: EtirState) -> Breakdown:
        if state.matrix:
            from tilegraph.tune.gensor.matrix_tiles import predict_matrix

            return predict_matrix(self.space, self.hw, state)
        if self.space.kind == "reuse" and state.vec_axis >= 0:
            return self._evaluate_micro(state)
        sp, hw = self.space, self.hw
        tasks = parallel_tasks(sp, state)
        cores = min(hw.cores, tasks) if state.parallel else 1
        imbalance = (math.ceil(tasks / hw.cores) / (tasks / hw.cores)) if state.parallel and tasks >= hw.cores else 1.0
        padded = math.prod(math.ceil(e / t) * t for e, t in zip(sp.spatial, state.l2))
        padded *= math.prod(math.ceil(e / t) * t for e, t in zip(sp.reduce, state.rstep))
        executed = sp.flops_per_point * padded
        eff, _ = self.micro_kernel(state)
        vec_eff = max(1, state.vec_width) / hw.simd_lanes_fp32
        peak_core = hw.peak_flops(cores) / cores
        t_comp = executed / (peak_core * cores * eff * vec_eff)

        n_reg = math.prod(math.ceil(e / t) for e, t in zip(sp.spatial, state.reg))
        n_l1 = math.prod(math.ceil(e / t) for e, t in zip(sp.spatial, state.l1))
        n_l2 = math.prod(math.ceil(e / t) for e, t in zip(sp.spatial, state.l2))
        n_kblocks = math.prod(math.ceil(r / t) for r, t in zip(sp.reduce, state.rstep)) if sp.has_reduce else 1
        out_l1 = math.prod(state.l1) * sp.output_bytes
        out_total = math.prod(sp.spatial) * sp.output_bytes

        q_reg = n_reg * self._inputs_fp(self._tiles(state.reg, None)) + out_total
        fp_l1 = self._inputs_fp(self._tiles(state.l1, state.rstep)) + out_l1
        q_l1 = n_l1 * n_kblocks * self._inputs_fp(self._tiles(state.l1, state.rstep))
        q_l1 += out_total * (2 * n_kblocks - 1)
        if fp_l1 > CAPACITY_FRACTION * hw.l1d_bytes:
            q_l1 = max(q_l1, q_reg)
        fp_l2 = self._inputs_fp(self._tiles(state.l2, state.rstep)) + math.prod(state.l2) * sp.output_bytes
        whole_l2 = self._inputs_fp(self._tiles(state.l2, None))
        if whole_l2 + math.prod(state.l2) * sp.output_bytes <= CAPACITY_FRACTION * hw.l2_bytes:
            q_l2 = n_l2 * whole_l2 + out_total
        else:
            q_l2 = n_l1 * self._inputs_fp(self._tiles(state.l1, None)) + out_total
            if fp_l2 > CAPACITY_FRACTION * hw.l2_bytes:
                q_l2 = max(q_l2, q_l1)
        source = "l3" if self.unique_bytes <= CAPACITY_FRACTION * hw.l3_bytes else "dram"
        t_mem = max(q_reg / hw.bandwidth("l1", cores), q_l1 / hw.bandwidth("l2", cores), q_l2 / hw.bandwidth(source, cores))

        overhead = (n_reg * n_kblocks * TILE_OVERHEAD_CYCLES) / (NOMINAL_HZ * cores)
        if state.parallel:
            overhead += PARALLEL_OVERHEAD_S
        seconds = imbalance * max(t_comp, t_mem) + 0.1 * min(t_comp, t_mem) + overhead
        reg_fp = (math.prod(state.reg) + sum(footprint_bytes(o, self._tiles(state.reg, tuple(1 for _ in sp.reduce)))
                                              / o.dtype_bytes for o in sp.operands)) * 4
        return Breakdown(seconds, t_comp, t_mem, eff, cores, imbalance, (q_reg, q_l1, q_l2), (reg_fp, fp_l1, fp_l2))

    def _evaluate_micro(self, state: EtirState) -> Breakdown:
        """The register micro-kernel family (see to_trace.py): every register tile runs the whole
        reduction, so each operand's register-tile footprint streams in once per tile, from L1 when
        the next tile reuses it, from L2 when the L2 block's panel of it stays resident, else from
        L3/DRAM. Packed operands are copied once per L2 block and then read contiguously."""
        sp, hw = self.space, self.hw
        tasks = parallel_tasks(sp, state)
        cores = min(hw.cores, tasks) if state.parallel else 1
        imbalance = (math.ceil(tasks / hw.cores) / (tasks / hw.cores)) if state.parallel and tasks >= hw.cores else 1.0
        padded = math.prod(math.ceil(e / t) * t for e, t in zip(sp.spatial, state.l2)) * math.prod(sp.reduce)
        eff, _ = self.micro_kernel(state)
        vec_eff = max(1, state.vec_width) / hw.simd_lanes_fp32
        peak_core = hw.peak_flops(cores) / cores
        t_comp = sp.flops_per_point * padded / (peak_core * cores * eff * vec_eff)
        t_comp *= self._guard_penalty(state)
        # every guarded load recomputes the fused index: the kernel's whole time grows, memory-bound or not
        guarded_streams = state.parallel >= 2 and sp.producers and self._vector_streams(state)
        fused_loads = FUSED_GUARDED_LOADS_PENALTY if guarded_streams else 1.0

        n_reg = math.prod(math.ceil(e / t) for e, t in zip(sp.spatial, state.reg))
        n_l2 = math.prod(math.ceil(e / t) for e, t in zip(sp.spatial, state.l2))
        inner_axes = [a for a in range(sp.num_spatial) if state.l2[a] // state.reg[a] > 1]
        inner = inner_axes[-1] if inner_axes else None
        reg_tiles = self._tiles(state.reg, None)
        block_tiles = self._tiles(state.l2, None)
        f_reg = {o.name: float(footprint_bytes(o, reg_tiles)) for o in sp.operands}
        q_l1 = q_l2 = q_mem = 0.0
        copy_s = strided_rows = far = aliased = 0.0
        vector_streams = self._vector_streams(state)
        for o in sp.operands:
            streamed = n_reg * f_reg[o.name]
            f_block = float(footprint_bytes(o, block_tiles))
            others = sum(v for k, v in f_reg.items() if k != o.name)
            packed = o.name in state.pack
            if inner is not None and inner not in o.axes_used() and f_reg[o.name] <= L1_REUSE_FRACTION * hw.l1d_bytes:
                q_l1 += streamed
            else:
                if f_block + others <= CAPACITY_FRACTION * hw.l2_bytes:
                    q_l2 += streamed
                else:
                    q_mem += streamed / PACKED_STREAM_SPEEDUP if packed else streamed
                    if packed:  # the discount above could make spilling L2 look cheaper than fitting it;
                        q_l2 += streamed  # the stream still passes through L2. Unpacked ones are left as they
                        # were: charging them too moved AVX-512 picks that no AVX-512 machine has timed
                if o.name in self.packable and not packed:
                    # every row of the register tile's panel is a page apart: one latency-bound touch each
                    row_bytes = o.shape[-1] * o.dtype_bytes
                    panel_rows = f_reg[o.name] / (state.reg[state.vec_axis] * o.dtype_bytes)
                    strided_rows += n_reg * panel_rows * min(1.0, row_bytes / STRIDED_ROW_BYTES)
                elif o.name in vector_streams:
                    far += n_reg * far_rows(o, reg_tiles)
            q_mem += n_l2 * f_block
            if packed:
                copy_s += n_l2 * f_block / hw.bandwidth("l2", cores)
            rows = aliased_rows(sp, state, o)
            if rows and tile_rows_layout(sp, state, o) is not None:  # copied once per call, interleaved
                copy_s += 2 * math.prod(o.shape) * o.dtype_bytes / hw.bandwidth("l2", cores)
            elif rows:
                aliased += n_reg * math.prod(sp.reduce) * rows
        out_total = math.prod(sp.spatial) * sp.output_bytes
        q_mem += out_total
        source = "l3" if self.unique_bytes <= CAPACITY_FRACTION * hw.l3_bytes else "dram"
        t_strided = strided_rows * STRIDED_ROW_CYCLES / (NOMINAL_HZ * cores)
        t_mem = max(q_l1 / hw.bandwidth("l1", cores), q_l2 / hw.bandwidth("l2", cores),
                    q_mem / hw.bandwidth(source, cores), t_strided)
        overhead = n_reg * (TILE_OVERHEAD_CYCLES + math.prod(state.reg) / max(1, state.vec_width)) / (NOMINAL_HZ * cores)
        if state.parallel:
            overhead += PARALLEL_OVERHEAD_S
        overhead += (far * FAR_ROW_CYCLES + aliased * ALIASED_ROW_CYCLES) / (NOMINAL_HZ * cores)
        seconds = imbalance * (max(t_comp, t_mem) * fused_loads + copy_s) + 0.1 * min(t_comp, t_mem) + overhead
        reg_fp = (math.prod(state.reg) + sum(footprint_bytes(o, self._tiles(state.reg, tuple(1 for _ in sp.reduce)))
                                              / o.dtype_bytes for o in sp.operands)) * 4
        fp_l1 = sum(f_reg.values())
        fp_l2 = self._inputs_fp(block_tiles)
        return Breakdown(seconds, t_comp, t_mem, eff, cores, imbalance, (q_l1, q_l2, q_mem), (reg_fp, fp_l1, fp_l2))

    def _vector_streams(self, state: EtirState) -> list[str]:
        """Operands the micro-kernel loads as vectors without a packed copy (depthwise's input);
        to_trace inlines their padding, so their loads carry the padding's guards."""
        return [o.name for o in self.space.operands if o.name not in self.packable and state.vec_width > 1
                and o.contiguous_axis() == state.vec_axis]

    def _guard_penalty(self, state: EtirState) -> float:
        """Slowdown of a micro-kernel whose L2 blocks do not divide their axes (guards inside)."""
        sp = self.space
        ragged = [a for a, (e, t) in enumerate(zip(sp.spatial, state.l2)) if e % t]
        if not ragged:
            return 1.0
        if state.vec_axis not in ragged:
            return GUARDED_KERNEL_PENALTY
        return GUARDED_VECTOR_PENALTY * (GUARDED_FUSED_PENALTY if state.parallel >= 2 else 1.0)

    # ------------------------------------------------------------------ Roller's prior
    def reuse_score(self, state: EtirState, grown: EtirState, level: str) -> float:
        """Traffic saved per extra byte of footprint at `level` ('reg', 'l1' or 'l2'); >= 0."""
        i = ("reg", "l1", "l2").index(level)
        a, b = self.breakdown(state), self.breakdown(grown)
        saved = a.traffic[i] - b.traffic[i]
        extra = b.footprint[i] - a.footprint[i]
        if extra <= 0:
            return max(0.0, saved)
        return max(0.0, saved / extra)


__all__ = ["Breakdown", "PerfModel"]


def far_rows(op: Operand, tiles: tuple[int, ...]) -> float:
    """Positions of `op` a page or more apart that one tile touches: the product of the touched
    extents of the dimensions whose stride is at least STRIDED_ROW_BYTES. A depthwise register tile
    of 14 output rows touches 29 input rows 28 KiB apart; one of 7 columns touches 3."""
    rows = 1.0
    stride = op.dtype_bytes
    for d in range(len(op.shape) - 1, -1, -1):
        if stride >= STRIDED_ROW_BYTES:
            rows *= touched_extent(op, d, tiles)
        stride *= op.shape[d]
    return rows
