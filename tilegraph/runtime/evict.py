"""Evicting given arrays from every cache level, as a compiled model finds its weights.

    evictor = array_evictor([packed_weights, bias])   # None where no eviction helper builds here
    evictor()                                          # their lines flushed: the next call reads them from memory

A kernel timed alone, call after call, finds its weights in cache; inside a model it finds them
evicted, since every other layer's weights and activations streamed through the caches in
between (docs/performance.md: GPT-2's GEMMs ran 1.1-1.5x slower in place than alone, and as slow
alone with the caches evicted). Timing a candidate with its constant inputs evicted before each
call, and its activations left where the previous call put them, times it closer to how the
model runs it (TVM's runner flushes every argument but the first for the same reason); where the
last-level cache holds the model's weights it overstates them (memory, not L3), which is one
reason `MeasurePolicy.evict_constants` is opt-in (docs/performance.md, 2026-12-07).

The helper is a small C library (built once per machine through the build cache) that flushes
each cache line of a range: `clflushopt` where the CPU has it (`clflush` where not), then a fence;
`dc civac` on aarch64. Where neither applies (another architecture, no compiler), there is no
evictor and the caller falls back to writing a buffer larger than the last-level cache
(timer.CacheFlusher), which evicts everything.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

log = logging.getLogger("tilegraph.runtime.evict")

SOURCE = r"""#include <stdint.h>
#include <stddef.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
__attribute__((target("clflushopt"))) static void flush_opt(const char* p, const char* end) {
  for (; p < end; p += 64) _mm_clflushopt((void*)p);
}
static void flush_plain(const char* p, const char* end) {
  for (; p < end; p += 64) _mm_clflush(p);
}
int32_t tg_evict(const void* start, int64_t nbytes) {
  const char* p = (const char*)((uintptr_t)start & ~(uintptr_t)63);
  const char* end = (const char*)start + nbytes;
  if (__builtin_cpu_supports("clflushopt")) flush_opt(p, end); else flush_plain(p, end);
  _mm_mfence();
  return 1;
}
#elif defined(__aarch64__)
int32_t tg_evict(const void* start, int64_t nbytes) {
  const char* p = (const char*)((uintptr_t)start & ~(uintptr_t)63);
  const char* end = (const char*)start + nbytes;
  for (; p < end; p += 64) __asm__ volatile("dc civac, %0" :: "r"(p) : "memory");
  __asm__ volatile("dsb ish" ::: "memory");
  return 1;
}
#else
int32_t tg_evict(const void* start, int64_t nbytes) { (void)start; (void)nbytes; return 0; }
#endif
"""

_function: Any = None  # the loaded tg_evict, or False once it failed to build or does nothing here


def _evict_function() -> Any:
    global _function
    if _function is None:
        try:
            from tilegraph.build.compile import compile_c
            from tilegraph.target import as_target

            path = compile_c(SOURCE, as_target("cpu"), name="evict")
            function = ctypes.CDLL(str(path)).tg_evict
            function.argtypes = [ctypes.c_void_p, ctypes.c_int64]
            function.restype = ctypes.c_int32
            probe = np.zeros(16, np.float64)
            _function = function if function(probe.ctypes.data, probe.nbytes) == 1 else False
        except Exception as err:  # noqa: BLE001 (the caller falls back to a whole-cache flush)
            log.info("cache-line eviction unavailable (%s: %s)", type(err).__name__, err)
            _function = False
    return _function or None


def array_evictor(arrays: Sequence[np.ndarray]) -> Callable[[], None] | None:
    """A function that flushes every cache line of `arrays` (kept alive by it) from every cache
    level, or None where this machine has no eviction helper. No arrays: a function doing nothing."""
    function = _evict_function()
    if function is None:
        return None
    ranges = [(a, a.ctypes.data, a.nbytes) for a in arrays if a.nbytes]

    def evict() -> None:
        for _, address, nbytes in ranges:
            function(address, nbytes)

    return evict


__all__ = ["array_evictor"]
