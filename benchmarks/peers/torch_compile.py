"""torch.compile (inductor, default mode, dynamic=False) of the same functions the eager peer times.

The one-time cost reported as tuning time is the first call's wall time (trace + inductor codegen +
C++ compile), cold: run.py points TORCHINDUCTOR_CACHE_DIR at a fresh directory per run. Inductor
bakes the thread count into its C++ kernels, so the program is recompiled (torch._dynamo.reset())
when the thread count changes; the tuning time reported is that of the first compile. Weights are
inputs, not parameters, so freezing does not apply.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.peers import Prepared
from benchmarks.peers.torch_eager import TorchEager, to_numpy, torch_program


class TorchCompile(TorchEager):
    name = "torch_compile"

    def __init__(self) -> None:
        self._first_compile_s: dict[str, float] = {}

    def prepare(self, case: Any, inputs: Sequence[np.ndarray]) -> Prepared:
        import torch

        fn, args = torch_program(case, inputs)
        torch._dynamo.reset()
        compiled = torch.compile(fn, dynamic=False)

        def call() -> Any:
            with torch.inference_mode():
                return compiled(*args)

        start = time.perf_counter()
        call()
        compile_s = time.perf_counter() - start
        first = self._first_compile_s.setdefault(case.name, compile_s)
        return Prepared(call=call, outputs=lambda: to_numpy(call()), tuning_time_s=first,
                        note="" if first == compile_s else f"recompiled for this thread count in {compile_s:.1f} s")


def make() -> TorchCompile:
    return TorchCompile()
