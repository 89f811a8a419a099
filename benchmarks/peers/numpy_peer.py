"""numpy (OpenBLAS for matmul/bmm) where the op is a plain numpy expression; convolutions are not.

    matmul / batch_matmul   np.matmul(a, b)
    transpose_batch_matmul  np.matmul(q.transpose(0, 2, 1, 3), v.transpose(0, 2, 3, 1))
    softmax                 e = np.exp(x - x.max(-1)); e / e.sum(-1)      (float32 throughout)
    norm                    np.sqrt(np.einsum("bmn,bmn->b", x, x))

Threads: OpenBLAS is limited with threadpoolctl when it is installed; without it numpy keeps the
pool size the environment gave it (run.py sets OPENBLAS_NUM_THREADS to the largest --threads).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.peers import PeerSkip, Prepared


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


class NumpyPeer:
    name = "numpy"

    def __init__(self) -> None:
        self._limiter: Any = None
        self.threads_note = ""

    def unavailable(self) -> str | None:
        return None

    def set_threads(self, n: int) -> None:
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:
            self.threads_note = "threadpoolctl missing: OpenBLAS threads fixed by OPENBLAS_NUM_THREADS"
            return
        if self._limiter is not None:
            self._limiter.restore_original_limits()
        self._limiter = threadpool_limits(limits=n, user_api="blas")

    def prepare(self, case: Any, inputs: Sequence[np.ndarray]) -> Prepared:
        x = [np.ascontiguousarray(a) for a in inputs]
        if case.op in ("matmul", "batch_matmul"):
            a, b = x

            def call() -> np.ndarray:
                return np.matmul(a, b)
        elif case.op == "transpose_batch_matmul":
            q, v = x

            def call() -> np.ndarray:
                return np.matmul(q.transpose(0, 2, 1, 3), v.transpose(0, 2, 3, 1))
        elif case.op == "softmax":
            def call() -> np.ndarray:
                return _softmax(x[0])
        elif case.op == "norm":
            def call() -> np.ndarray:
                return np.sqrt(np.einsum("bmn,bmn->b", x[0], x[0]))
        else:
            raise PeerSkip(f"op {case.op or case.name!r} is not a plain numpy expression")
        return Prepared(call=call, outputs=lambda: [call()], note=self.threads_note)


def make() -> NumpyPeer:
    return NumpyPeer()
