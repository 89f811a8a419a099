"""A hand-written GEMM schedule built only from tilegraph's public primitives, raced against torch.

    python examples/gemm_schedule.py [--size 1024] [--rounds 7] [--mr 6] [--nr 64] [--isa avx2|avx512]

The schedule (C = A @ B, row-major, fp32):

    for jr in N/NC (parallel):                    # one panel of NC = max(NR, 64) columns per iteration
      B_pack[K, NC] = B[:, jr*NC : jr*NC+NC]      # cache_read + compute_at: contiguous panel, L2-resident
      for ic in M/MR, for js in NC/NR:
        acc[MR, NR] = 0                           # cache_write: accumulators, held in vector registers
        for k in K:
          for ir in MR (unrolled), for jv in NR/L (unrolled), for jl in L (vectorized: L lanes):
            acc[ir, jv*L+jl] += A[ic*MR+ir, k] * B_pack[k, js*NR+jv*L+jl] # broadcast x vector FMA
        C[ic*MR : , jr*NC+js*NR : ] = acc         # reverse_compute_at: write back once per tile

The register tile fits the target's register file: MR x NR/L accumulators, NR/L operand vectors
and a broadcast (AVX-512: 32 registers, 6 x 64 floats; AVX2: 16 registers, 6 x 16, walking a
64-column panel of B). It prints our GFLOP/s and torch.matmul's, timed alternately in the same process (median
of several rounds), their ratio, and the measured FMA peak, for 1 and 2 threads. `--isa avx2` on an
AVX-512 machine measures as an AVX2 machine would: tilegraph compiles for AVX2 and torch (ATen,
oneDNN, MKL) is restricted to AVX2 too.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import tilegraph as tg
from tilegraph import ops, te

# What restricts torch to an ISA (read when torch loads and first calls oneDNN / MKL); the
# benchmark harness restricts every peer the same way (benchmarks/run.py --isa).
TORCH_ISA = {
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE", "MKL_ENABLE_INSTRUCTIONS": "AVX512"},
}


# Columns of B packed per panel: a narrow register tile (AVX2's 16) still walks a 64-column panel,
# so A streams from memory once per 64 columns of C, not once per 16.
PANEL_COLUMNS = 64


def register_tile(target: tg.Target) -> tuple[int, int]:
    """(MR, NR) for the target: 6 rows, and as many vectors of columns as fit beside their
    accumulators, the B vectors and the A broadcast in the vector registers (AVX2: 6 x 2 + 2 + 1 of
    16 registers, 6 x 16 floats; AVX-512: 6 x 4 + 4 + 1 of 32, 6 x 64; NEON: 6 x 16)."""
    from tilegraph.microarch import VECTOR_REGISTERS

    rows, vectors = 6, (VECTOR_REGISTERS[str(target.isa)] - 2) // 7
    return rows, max(1, vectors) * target.lanes("float32")


def gemm_schedule(m: int, n: int, k: int, mr: int | None = None, nr: int | None = None,
                  target: tg.Target | None = None) -> tg.Schedule:
    """The register-tiled, B-packed, parallel GEMM schedule described in the module docstring."""
    target = target or tg.Target("cpu")
    default_mr, default_nr = register_tile(target)
    mr, nr = mr or default_mr, nr or default_nr
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    c = ops.matmul(a, b, name="C")
    sch = tg.Schedule(tg.Workload([a, b], [c]))
    lanes = target.lanes("float32")

    nc = max(nr, PANEL_COLUMNS) if n % max(nr, PANEL_COLUMNS) == 0 else nr

    i, j, kk = sch.loops(c)
    jr, jn = sch.split(j, [None, nc])
    ic, ir = sch.split(i, [None, mr])
    js, jt = sch.split(jn, [nc // nr, nr])
    jv, jl = sch.split(jt, [nr // lanes, lanes])
    sch.reorder(jr, ic, js, kk, ir, jv, jl)

    acc = sch.cache_write(c, "local")
    sch.reverse_compute_at(acc, js)
    pack = sch.cache_read(c, "B", "global")
    sch.compute_at(pack, jr)

    sch.parallel(jr)
    sch.unroll(ir)
    sch.unroll(jv)
    sch.vectorize(jl)

    # Write-back and packing: full vectors at constant offsets, so the accumulators stay in registers.
    wr, wc = sch.loops(acc)[-2:]
    wco, wci = sch.split(wc, [None, lanes])
    sch.unroll(wr)
    sch.unroll(wco)
    sch.vectorize(wci)
    _, pc = sch.loops(pack)[-2:]
    pco, pci = sch.split(pc, [None, lanes])
    sch.unroll(pco)
    sch.vectorize(pci)
    return sch


def _median_seconds(fn, min_time: float = 0.2) -> float:
    """Median per-call time of `fn` over enough calls to last `min_time`."""
    fn()
    samples = []
    start = time.perf_counter()
    while time.perf_counter() - start < min_time or len(samples) < 5:
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--mr", type=int, default=None, help="register tile rows (default: by the target's registers)")
    parser.add_argument("--nr", type=int, default=None, help="register tile columns (a multiple of the vector lanes)")
    parser.add_argument("--isa", choices=sorted(TORCH_ISA), default=None,
                        help="measure as a machine with this ISA (tilegraph and torch both restricted to it)")
    args = parser.parse_args()
    if args.isa:
        if "torch" in sys.modules:
            raise SystemExit("--isa must be applied before torch is imported")
        os.environ.update(TORCH_ISA[args.isa])
    size = args.size
    flops = 2.0 * size**3

    target = tg.Target("cpu", isa=args.isa) if args.isa else tg.Target("cpu")
    sch = gemm_schedule(size, size, size, args.mr, args.nr, target)
    mr, nr = (args.mr or register_tile(target)[0], args.nr or register_tile(target)[1])
    kernel = tg.build(sch, target=target)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.full((size, size), np.nan, dtype=np.float32)
    kernel(a, b, out=(c,))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    rel = float(np.linalg.norm(c - ref) / np.linalg.norm(ref))
    print(f"GEMM {size}^3 fp32 on {target.isa} ({mr}x{nr} register tile), relative error vs float64 numpy: {rel:.2e}")
    if not rel < 1e-5:
        raise SystemExit("the scheduled kernel is wrong; not timing it")

    try:
        import torch
    except ImportError:
        torch = None
        print("torch is not installed (bash scripts/setup.sh main installs it); timing tilegraph only")

    from tilegraph.tune.hardware import hardware_model

    hw = hardware_model(target)
    print(f"measured FMA peak: {hw.peak_flops_1t / 1e9:.0f} GFLOP/s (1 thread), "
          f"{hw.peak_flops_all / 1e9:.0f} GFLOP/s ({hw.cores} threads)")

    for threads in (1, 2):
        ours, theirs = [], []
        if torch is not None:
            torch.set_num_threads(threads)
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        for _ in range(args.rounds):  # alternate: ours, torch, ours, torch, ...
            ours.append(_median_seconds(lambda t=threads: kernel(a, b, out=(c,), num_threads=t)))
            if torch is not None:
                theirs.append(_median_seconds(lambda x=ta, y=tb: torch.matmul(x, y)))
        g_ours = [flops / s / 1e9 for s in ours]
        line = (f"{threads} thread(s): tilegraph {statistics.median(g_ours):7.1f} GFLOP/s "
                f"(range {min(g_ours):.1f}-{max(g_ours):.1f})")
        if theirs:
            g_torch = [flops / s / 1e9 for s in theirs]
            ratios = [t / o for o, t in zip(ours, theirs)]
            line += (f" | torch.matmul {statistics.median(g_torch):7.1f} GFLOP/s "
                     f"(range {min(g_torch):.1f}-{max(g_torch):.1f}) | ratio {statistics.median(ratios):.2f}x "
                     f"(per-round {min(ratios):.2f}-{max(ratios):.2f})")
        print(line)


if __name__ == "__main__":
    main()
