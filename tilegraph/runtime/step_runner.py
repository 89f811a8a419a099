"""StepRunner: a compiled model's kernel launches as one native call, not one ctypes call each.

    runner = step_runner(launches)     # None where a launch is not a plain CPU one, or no runner builds
    runner.run()                       # every launch, in order: tg_run_steps(steps, n) in C

A ctypes call costs about a microsecond; a small model (an unrolled LSTM: 48 launches of tiny
kernels) spent most of its time there. The runner is a small C library (built once per machine
through the build cache) that walks an array of (function, arguments, threads) and calls each
kernel through a function pointer of its arity, exactly as ctypes calls it (every argument a
pointer, then the int32 thread count: the kernels' ABI, codegen/c.py).

    before: for launch in launches: launch.run()        # N ctypes calls
    after:  runner.run()                                # 1 ctypes call, N C calls

Nothing depends on it: where it cannot be built (no C compiler beside a saved model's libraries)
the launches run one by one, as before.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Sequence
from typing import Any

log = logging.getLogger("tilegraph.runtime.step_runner")

MAX_POINTERS = 48  # kernels with more pointer arguments run through ctypes (none of the models we measure)


class _Step(ctypes.Structure):
    _fields_ = [("fn", ctypes.c_void_p), ("args", ctypes.POINTER(ctypes.c_void_p)),
                ("nargs", ctypes.c_int32), ("threads", ctypes.c_int32)]


def runner_source() -> str:
    """The C source: tg_run_steps(steps, n) calls each step's kernel; returns how many it ran (a step
    of an arity it has no case for stops it there)."""
    cases = []
    for n in range(1, MAX_POINTERS + 1):
        params = ", ".join(["void*"] * n)
        args = ", ".join(f"a[{i}]" for i in range(n))
        cases.append(f"      case {n}: ((void (*)({params}, int32_t))s->fn)({args}, s->threads); break;")
    body = "\n".join(cases)
    return f"""#include <stdint.h>
typedef struct {{ void* fn; void** args; int32_t nargs; int32_t threads; }} tg_step;
int32_t tg_run_steps(const tg_step* steps, int32_t n) {{
  for (int32_t k = 0; k < n; ++k) {{
    const tg_step* s = steps + k;
    void** a = s->args;
    switch (s->nargs) {{
{body}
      default: return k;
    }}
  }}
  return n;
}}
"""


_library: Any = None  # the loaded runner, or False once it failed to build


def _runner_function() -> Any:
    global _library
    if _library is None:
        try:
            from tilegraph.build.compile import compile_c
            from tilegraph.target import as_target

            path = compile_c(runner_source(), as_target("cpu"), name="step_runner")
            function = ctypes.CDLL(str(path)).tg_run_steps
            function.argtypes = [ctypes.POINTER(_Step), ctypes.c_int32]
            function.restype = ctypes.c_int32
            _library = function
        except Exception as err:  # noqa: BLE001 (an optimisation: the launches run one by one instead)
            log.info("step runner unavailable (%s: %s); launches run through ctypes", type(err).__name__, err)
            _library = False
    return _library or None


class StepRunner:
    """A run of a bound model's launches as one native call. Holds the argument arrays (and the
    launches, which hold the tensors) for as long as it lives."""

    def __init__(self, function: Any, launches: Sequence[Any]):
        self.function = function
        self.launches = tuple(launches)
        self._arrays = [(ctypes.c_void_p * (len(la.arguments) - 1))(*la.arguments[:-1]) for la in self.launches]
        self._steps = (_Step * len(self.launches))()
        for step, launch, array in zip(self._steps, self.launches, self._arrays):
            step.fn = ctypes.cast(launch.function, ctypes.c_void_p).value
            step.args = ctypes.cast(array, ctypes.POINTER(ctypes.c_void_p))
            step.nargs = len(launch.arguments) - 1
            step.threads = int(launch.arguments[-1])
        self._count = len(self.launches)
        self._threads = {id(la.kernel): (la.kernel, int(la.arguments[-1])) for la in self.launches}

    def repoint(self, launch: int, argument: int, address: int) -> None:
        """Argument `argument` of launch `launch` (its position in this runner) now points at
        `address` (the launch's own list is the caller's to change: CompiledModel._aim)."""
        self._arrays[launch][argument] = address

    def run(self) -> None:
        ran = self.function(self._steps, self._count)
        if ran != self._count:  # cannot happen for launches step_runner accepted
            raise RuntimeError(f"step runner stopped at launch {ran} of {self._count}")
        for kernel, threads in self._threads.values():
            kernel.last_num_threads = threads


def step_runner(launches: Sequence[Any]) -> StepRunner | None:
    """A StepRunner of `launches` when every one is a CPU kernel launch (a ctypes function, its
    pointer arguments then the thread count) of at most MAX_POINTERS pointers and the runner
    builds; else None (the caller runs them one by one)."""
    if not launches:
        return None
    for launch in launches:
        arguments = getattr(launch, "arguments", None)
        if getattr(launch, "function", None) is None or not arguments or len(arguments) - 1 > MAX_POINTERS:
            return None
    function = _runner_function()
    return StepRunner(function, launches) if function is not None else None


__all__ = ["MAX_POINTERS", "StepRunner", "runner_source", "step_runner"]
