"""A hand-written GEMM schedule built only from tilegraph's public primitives, raced against torch.

    python examples/gemm_schedule.py [--size 1024] [--rounds 7] [--mr 4] [--nr 64]

The schedule (C = A @ B, row-major, fp32):

    for jr in N/NR (parallel):                    # one panel of NR columns per iteration
      B_pack[K, NR] = B[:, jr*NR : jr*NR+NR]      # cache_read + compute_at: contiguous panel, L2-resident
      for ic in M/MR:
        acc[MR, NR] = 0                           # cache_write: accumulators, held in vector registers
        for k in K:
          for ir in MR (unrolled), for jv in NR/16 (unrolled), for jl in 16 (vectorized):
            acc[ir, jv*16+jl] += A[ic*MR+ir, k] * B_pack[k, jv*16+jl]     # broadcast x vector FMA
        C[ic*MR : , jr*NR : ] = acc               # reverse_compute_at: write back once per tile

It prints our GFLOP/s and torch.matmul's, timed alternately in the same process (median of
several rounds), their ratio, and the machine's measured FMA peak, for 1 and 2 threads.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import tilegraph as tg
from tilegraph import ops, te


def gemm_schedule(m: int, n: int, k: int, mr: int = 4, nr: int = 64) -> tg.Schedule:
    """The register-tiled, B-packed, parallel GEMM schedule described in the module docstring."""
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    c = ops.matmul(a, b, name="C")
    sch = tg.Schedule(tg.Workload([a, b], [c]))
    lanes = 16

    i, j, kk = sch.loops(c)
    jr, jn = sch.split(j, [None, nr])
    ic, ir = sch.split(i, [None, mr])
    jv, jl = sch.split(jn, [nr // lanes, lanes])
    sch.reorder(jr, ic, kk, ir, jv, jl)

    acc = sch.cache_write(c, "local")
    sch.reverse_compute_at(acc, ic)
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
    parser.add_argument("--mr", type=int, default=4)
    parser.add_argument("--nr", type=int, default=64)
    args = parser.parse_args()
    size = args.size
    flops = 2.0 * size**3

    sch = gemm_schedule(size, size, size, args.mr, args.nr)
    kernel = tg.build(sch, target="cpu")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    c = np.full((size, size), np.nan, dtype=np.float32)
    kernel(a, b, out=(c,))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    rel = float(np.linalg.norm(c - ref) / np.linalg.norm(ref))
    print(f"GEMM {size}^3 fp32, relative error vs float64 numpy: {rel:.2e}")
    if not rel < 1e-5:
        raise SystemExit("the scheduled kernel is wrong; not timing it")

    try:
        import torch
    except ImportError:
        torch = None
        print("torch is not installed (bash scripts/setup.sh main installs it); timing tilegraph only")

    from tilegraph.tune.hardware import hardware_model

    hw = hardware_model(tg.Target("cpu"))
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
