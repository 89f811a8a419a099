"""The systems raced against tilegraph. Each in-process peer module exposes `make() -> Peer`.

A Peer says whether it can run (`unavailable()` -> None or a note), sets its thread count, and
`prepare(case, inputs)` returns a Prepared: the zero-argument call that is timed, a way to get its
outputs for the correctness check, and its one-time cost (compile / tuning). A peer that cannot
express an op raises PeerSkip with a note; any other failure is reported, never fatal.
The TVM peer runs out of process (tvm_ms.py + tvm_worker.py in the TVM venv).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

IN_PROCESS_PEERS = {"torch": "torch_eager", "torch_compile": "torch_compile", "numpy": "numpy_peer"}
ALL_PEERS = (*IN_PROCESS_PEERS, "tvm")


class PeerSkip(Exception):
    """The peer cannot run this workload (op not expressible, library missing); the message says why."""


@dataclass
class Prepared:
    call: Callable[[], object]
    outputs: Callable[[], Sequence[np.ndarray]]
    tuning_time_s: float = math.nan  # one-time cost (tuning, compiling); NaN: none
    measurements: int | None = None
    note: str = ""


class Peer(Protocol):
    name: str

    def unavailable(self) -> str | None: ...

    def set_threads(self, n: int) -> None: ...

    def prepare(self, case: Any, inputs: Sequence[np.ndarray]) -> Prepared: ...


def load_peer(name: str) -> Peer:
    if name not in IN_PROCESS_PEERS:
        raise ValueError(f"argument peers: unknown in-process peer {name!r}; known: {', '.join(IN_PROCESS_PEERS)}")
    return importlib.import_module(f"benchmarks.peers.{IN_PROCESS_PEERS[name]}").make()
