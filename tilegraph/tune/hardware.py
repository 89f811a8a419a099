"""Hardware model of the CPU target: the constants the micro-performance model reads.

    hw = hardware_model(Target("cpu"))          # measured once per machine, then read from the cache
    hw.peak_flops(cores=2), hw.bandwidth("l2"), hw.vector_registers, hw.cache_bytes("l1")

Static facts (cores, SIMD lanes, vector registers, cache sizes) come from the Target (the one
CPU detection, target.py; no target means the host's); FMA units, FMA latency and the nominal
clock come from the Target's microarchitecture (microarch.py). Peak FLOP/s and the read
bandwidth of each memory level are measured by small C micro-benchmarks (FMA chains, as many
independent accumulators as the target's vector registers hold, on one thread and on all cores;
streaming reads sized for L1, L2, L3 and DRAM), compiled with gcc and run through ctypes. Results
are cached as JSON under the target fingerprint in the cache dir, so measurement (< 3 s) happens
once per machine. Without a C compiler, or with measure=False, the model falls back to nominal
numbers derived from the static facts. A measured single-core peak far from the nominal one
(outside PEAK_SANITY) warns (`peak_warning`): a busy or throttled machine, or a misdetected core,
would otherwise steer the search with wrong constants.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tilegraph.microarch import GENERIC, VECTOR_REGISTERS, microarch

MEMORY_LEVELS = ("l1", "l2", "l3", "dram")
HARDWARE_MODEL_VERSION = 7  # 3: longer FMA runs (short 2-thread runs read low on shared hosts)
# 4: the FMA probe is compiled for the target's ISA (not -march=native) with as many chains as its
#    register file holds (16 chains spilled on AVX2's 16 registers: peaks read 3x low)
# 5: FMA units and latency from the microarchitecture table (microarch.py), not from an assumed
#    clock; the nominal peak is kept beside the measured one
# 6: the all-core peak measured again until the cores scale (a disturbed one read half on 2 cores)
# 7: the streaming reads start on a cache line. numpy's buffers start on 16 bytes, so every
#    AVX-512 load of a buffer that happened not to start on 64 split two lines: the same machine
#    cached L1 and L2 at 104 and 55 GB/s or at 156 and 138 by the luck of one allocation (on a
#    cache line: about 316 and 140), and Gensor's picks followed (BERT-base untuned 171 ms
#    against 96 on the Xeon, 2026-12-06)
ALL_CORE_SCALING = 0.8  # all-core peak / (cores x one-core peak) below which it is measured again
ALL_CORE_RETRIES = 5
ALL_CORE_RETRY_PAUSE_S = 0.2
PEAK_SANITY = (0.5, 1.6)  # measured / nominal single-thread peak outside this range: a warning


@dataclass(frozen=True)
class HardwareModel:
    """What the performance model needs to know about one CPU. All rates are per second."""

    isa: str
    cores: int
    simd_lanes_fp32: int
    fma_units: int
    fma_latency_cycles: int
    vector_registers: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    peak_flops_1t: float
    peak_flops_all: float
    # read bandwidth, bytes/s: per core for l1 and l2, whole machine (all cores) for l3 and dram
    bandwidth_bytes: dict[str, float] = field(default_factory=dict)
    measured: bool = False
    fingerprint: str = ""
    uarch: str = ""
    nominal_peak_flops_1t: float = 0.0  # the microarchitecture's FMA units x lanes x nominal clock

    @property
    def peak_warning(self) -> str:
        """A sentence when the measured peak is far from the nominal one (busy, throttled or
        misdetected machine), else ""."""
        if not self.measured or not self.nominal_peak_flops_1t or self.uarch.startswith("generic"):
            return ""
        ratio = self.peak_flops_1t / self.nominal_peak_flops_1t
        if PEAK_SANITY[0] <= ratio <= PEAK_SANITY[1]:
            return ""
        return (f"the measured fp32 peak ({self.peak_flops_1t / 1e9:.0f} GFLOP/s on one core) is {ratio:.2f}x the "
                f"nominal {self.nominal_peak_flops_1t / 1e9:.0f} GFLOP/s of a {self.uarch} core with {self.fma_units} "
                f"FMA unit(s) at {self.isa}: the machine was busy or throttled while measuring (remeasure on a quiet "
                f"machine: `tilegraph info --remeasure`), or the core is not a {self.uarch} (name it: "
                f"Target(uarch=...))")

    @property
    def cache_line_bytes(self) -> int:
        return 64

    @property
    def min_accumulators(self) -> int:
        """Independent FMA chains needed to hide FMA latency on all FMA ports."""
        return self.fma_latency_cycles * self.fma_units

    def cache_bytes(self, level: str) -> int:
        return {"l1": self.l1d_bytes, "l2": self.l2_bytes, "l3": self.l3_bytes}[level]

    def bandwidth(self, level: str, cores: int = 1) -> float:
        """Read bandwidth of a level available to `cores` cores working together (bytes/s)."""
        if level not in MEMORY_LEVELS:
            raise ValueError(f"unknown memory level {level!r}; known: {MEMORY_LEVELS}")
        bw = self.bandwidth_bytes[level]
        return bw * max(1, cores) if level in ("l1", "l2") else bw

    def peak_flops(self, cores: int = 1) -> float:
        """fp32 peak FLOP/s of `cores` cores (all-core measurement scaled when fewer are used)."""
        cores = max(1, min(cores, self.cores))
        if cores == self.cores:
            return self.peak_flops_all
        return min(self.peak_flops_1t * cores, self.peak_flops_all * cores / self.cores * 1.15)

    def to_json(self) -> str:
        return json.dumps({"version": HARDWARE_MODEL_VERSION, **asdict(self)}, indent=1, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> HardwareModel:
        d = json.loads(text)
        if d.pop("version", None) != HARDWARE_MODEL_VERSION:
            raise ValueError("hardware model cache has another version")
        return HardwareModel(**d)


# ----------------------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class _StaticFacts:
    isa: str
    cores: int
    vector_bits: int
    l1d_bytes: int
    l2_bytes: int
    l3_bytes: int
    fingerprint: str
    uarch: str = "generic-x86"
    runs_here: bool = True
    isa_flags: tuple[str, ...] = ("-march=native",)  # the target's -m flags: the probe runs what kernels run


def _facts_from_target(target: Any) -> _StaticFacts:
    """The static facts of a CPU target: one detection (target.py) serves the Target and the model."""
    from tilegraph.target import Target, as_target, host_supports

    t = target if isinstance(target, Target) else as_target(target)
    if t.kind != "cpu":
        raise ValueError(f"the CPU hardware model needs a cpu target, got {t.kind!r}")
    return _StaticFacts(isa=str(t.isa or "generic"), cores=int(t.num_cores or 1), vector_bits=int(t.vector_bits or 128),
                        l1d_bytes=int(t.l1d_bytes or 32 << 10), l2_bytes=int(t.l2_bytes or 1 << 20),
                        l3_bytes=int(t.l3_bytes or 8 << 20), fingerprint=str(t.fingerprint),
                        uarch=str(t.uarch or GENERIC.get(str(t.arch), "generic-x86")), runs_here=host_supports(t),
                        isa_flags=tuple(f for f in (t.cflags or ()) if f.startswith("-m")))


def _nominal(facts: _StaticFacts) -> HardwareModel:
    """The model from static facts alone: FMA units, latency and clock from the microarchitecture."""
    core = microarch(facts.uarch)
    lanes = max(1, facts.vector_bits // 32)
    per_core = core.nominal_peak_flops(facts.vector_bits)
    return HardwareModel(
        isa=facts.isa, cores=facts.cores, simd_lanes_fp32=lanes, fma_units=core.fma_units(facts.vector_bits),
        fma_latency_cycles=core.fma_latency, vector_registers=VECTOR_REGISTERS.get(facts.isa, 16),
        l1d_bytes=facts.l1d_bytes, l2_bytes=facts.l2_bytes, l3_bytes=facts.l3_bytes, peak_flops_1t=per_core,
        peak_flops_all=per_core * facts.cores,
        bandwidth_bytes={"l1": 64 * core.ghz * 1e9, "l2": 32 * core.ghz * 1e9, "l3": 60e9, "dram": 20e9},
        measured=False, fingerprint=facts.fingerprint, uarch=core.name, nominal_peak_flops_1t=per_core,
    )


# ----------------------------------------------------------------------------------------- cache


def _cache_dir() -> Path:
    try:
        from tilegraph.config import cache_dir  # type: ignore[import-not-found]

        return Path(cache_dir())
    except (ImportError, AttributeError):
        env = os.environ.get("TILEGRAPH_CACHE_DIR")
        if env:
            return Path(env)
        from platformdirs import user_cache_dir

        return Path(user_cache_dir("tilegraph"))


def _cache_path(fingerprint: str) -> Path:
    return _cache_dir() / "hardware" / f"{fingerprint}.json"


def hardware_model(target: Any = None, measure: bool = True, remeasure: bool = False) -> HardwareModel:
    """The hardware model of a CPU target (a tilegraph Target, "cpu" or None for this machine).

    measure=True measures peak FLOP/s and bandwidths once (cached by the target fingerprint);
    remeasure=True ignores that cache (measure on a quiet machine: neighbours lower the peaks);
    measure=False, or a machine without gcc, gives nominal numbers from the static facts.
    """
    facts = _facts_from_target(target)
    nominal = _nominal(facts)
    if not measure or not facts.runs_here:  # another machine's core: its facts are all there is
        return nominal
    path = _cache_path(facts.fingerprint)
    if path.exists() and not remeasure:
        try:
            return HardwareModel.from_json(path.read_text())
        except (ValueError, TypeError, KeyError):
            pass
    measured = _measure(nominal, facts.isa_flags)
    if measured is None:
        return nominal
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(measured.to_json())
        os.replace(tmp, path)
    except OSError:
        pass
    return measured


# ----------------------------------------------------------------------------------------- measurement

_BENCH_C = r"""
#include <time.h>
#include <stddef.h>
#ifdef _OPENMP
#include <omp.h>
#endif
typedef float vf __attribute__((vector_size(VBYTES)));
#define LANES (VBYTES / 4)

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

/*FMA_CHAIN*/

double bench_fma(long iters, int threads, float* sink) {
  double t0 = now();
  float total = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+:total)
  total += fma_chain(iters, 1.0f + omp_get_thread_num());
#else
  total = fma_chain(iters, 1.0f);
#endif
  double t = now() - t0;
  *sink = total;
  return (double)iters * CHAINS * LANES * 2 * threads / t;
}

/* Streaming read of n floats, repeated reps times on every thread; returns bytes/s (all threads). */
double bench_read(const float* data, long n, long reps, int threads, float* sink) {
  double t0 = now();
  float total = 0;
#ifdef _OPENMP
#pragma omp parallel num_threads(threads) reduction(+:total)
#endif
  {
    vf acc[8];
    for (int i = 0; i < 8; i++) for (int j = 0; j < LANES; j++) acc[i][j] = 0;
    const vf* v = (const vf*)data;
    long nv = n / LANES;
    for (long r = 0; r < reps; r++) {
      for (long i = 0; i + 8 <= nv; i += 8) {
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) acc[u] += v[i + u];
      }
      __asm__ volatile("" : "+x"(acc[0]));
    }
    vf s = acc[0]; for (int i = 1; i < 8; i++) s += acc[i];
    for (int j = 0; j < LANES; j++) total += s[j];
  }
  double t = now() - t0;
  *sink = total;
  return (double)n * 4 * reps * threads / t;
}
"""


def fma_chains(vector_registers: int) -> int:
    """Independent FMA chains the probe keeps in registers: enough to cover FMA latency times FMA
    units (4 x 2 = 8 on current x86 and Neoverse cores), few enough that the chains, the two
    operands and a spare fit the register file (12 of AVX2's 16; 16 of AVX-512's 32)."""
    return max(8, min(16, vector_registers - 4))


def bench_source(chains: int) -> str:
    """The micro-benchmark C source with `chains` FMA chains in fma_chain()."""
    names = [f"a{i}" for i in range(chains)]
    lines = [f"/* {chains} independent FMA chains kept in registers; returns their sum (so nothing is dead code). */",
             f"#define CHAINS {chains}",
             "static float fma_chain(long iters, float seed) {",
             f"  vf m, c, {', '.join(names)};",
             "  for (int j = 0; j < LANES; j++) { m[j] = 0.999999f; c[j] = 1e-7f * seed; }",
             *(f"  {a} = c * (seed + {i % 2});" for i, a in enumerate(names)),
             "  for (long it = 0; it < iters; it++) {",
             *(f"    {a} = {a} * m + c;" for a in names)]
    for k in range(0, chains, 8):  # keeps every chain live in a register at each iteration
        group = names[k:k + 8]
        operands = ", ".join('"+x"(' + a + ")" for a in group)
        lines.append('    __asm__ volatile("" : ' + operands + ");")
    lines += ["  }", f"  vf s = {' + '.join(names)};", "  float r = 0; for (int j = 0; j < LANES; j++) r += s[j];",
              "  return r;", "}"]
    return _BENCH_C.replace("/*FMA_CHAIN*/", "\n".join(lines))


def _compile_bench(vector_bytes: int, workdir: str, chains: int = 16,
                   isa_flags: tuple[str, ...] = ("-march=native",)) -> ctypes.CDLL | None:
    src = Path(workdir) / "tg_hw_bench.c"
    lib = Path(workdir) / "tg_hw_bench.so"
    src.write_text(bench_source(chains))
    flags = ["-O2", *isa_flags, "-fPIC", "-shared", "-fopenmp", f"-DVBYTES={vector_bytes}"]
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return None
    try:
        subprocess.run([gcc, *flags, str(src), "-o", str(lib)], check=True, capture_output=True, timeout=30)
    except (subprocess.SubprocessError, OSError):
        return None
    dll = ctypes.CDLL(str(lib))
    dll.bench_fma.restype = ctypes.c_double
    dll.bench_fma.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    dll.bench_read.restype = ctypes.c_double
    dll.bench_read.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    return dll


def _measure(nominal: HardwareModel, isa_flags: tuple[str, ...] = ("-march=native",)) -> HardwareModel | None:
    """Run the micro-benchmarks; None when they cannot be compiled."""
    import numpy as np

    from tilegraph.runtime.host_memory import aligned_bytes

    with tempfile.TemporaryDirectory(prefix="tg_hw_") as workdir:
        dll = _compile_bench(nominal.simd_lanes_fp32 * 4, workdir, fma_chains(nominal.vector_registers), isa_flags)
        if dll is None:
            return None
        sink = ctypes.c_float()
        dll.bench_fma(200_000, nominal.cores, ctypes.byref(sink))  # warm-up: clock ramp, thread pool start
        # Best of several ~10 ms runs: the machine may be shared, and the best run is the least disturbed.
        # Shorter runs let one descheduled vCPU decide a whole all-core sample.
        peak_1t = max(dll.bench_fma(2_000_000, 1, ctypes.byref(sink)) for _ in range(6))
        peak_all = max(dll.bench_fma(2_000_000, nominal.cores, ctypes.byref(sink)) for _ in range(6))
        # A process busy on one core while this runs halves every all-core sample at once (a 2-core
        # Zen 5 once cached 269 GFLOP/s for 2 threads against 273 for one; its kernels ran at 490),
        # and the cached value then misleads Gensor's model and every % of peak. Until the cores
        # scale, look again a little later (an SMT machine's never do: it pays ~1.5 s, once).
        for _ in range(ALL_CORE_RETRIES):
            if nominal.cores < 2 or peak_all >= ALL_CORE_SCALING * peak_1t * nominal.cores:
                break
            time.sleep(ALL_CORE_RETRY_PAUSE_S)
            peak_all = max(peak_all, *(dll.bench_fma(2_000_000, nominal.cores, ctypes.byref(sink)) for _ in range(3)))
        bandwidth: dict[str, float] = {}
        sizes = {
            "l1": nominal.l1d_bytes // 2, "l2": nominal.l2_bytes // 2,
            "l3": min(nominal.l3_bytes // 2, 8 << 20), "dram": max(4 * nominal.l3_bytes, 64 << 20),
        }
        for level, nbytes in sizes.items():
            threads = 1 if level in ("l1", "l2") else nominal.cores
            n = max(1024, nbytes // 4 // 1024 * 1024)
            data = aligned_bytes(n * 4).view(np.float32)  # on a cache line, as kernels' buffers are
            data[:] = 1.0
            reps = max(1, int(80e6 // (n * 4)))
            dll.bench_read(data.ctypes.data, n, 1, threads, ctypes.byref(sink))
            bandwidth[level] = max(dll.bench_read(data.ctypes.data, n, reps, threads, ctypes.byref(sink))
                                   for _ in range(3))
    model = HardwareModel(**{**asdict(nominal), "peak_flops_1t": peak_1t, "peak_flops_all": max(peak_all, peak_1t),
                             "bandwidth_bytes": bandwidth, "measured": True})
    if model.peak_warning:
        warnings.warn(model.peak_warning, RuntimeWarning, stacklevel=3)
    return model


__all__ = ["HardwareModel", "MEMORY_LEVELS", "hardware_model"]
