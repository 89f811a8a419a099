"""What a node is, for matching candidates to runners: the target as it resolves on that node
(CPU model, ISA, cores, caches, compiler and version, codegen version: Target.fingerprint), the
node's own machine detected the same way, and the tilegraph version. Two nodes agree on a target
exactly when their `match_key`s are equal.

    node_fingerprint("cpu")  # {"target": "cpu-avx2-2c-…", "tilegraph": "0.x", "host": …, "cpu": …, "cores": 2}
"""

from __future__ import annotations

import os
import socket
from typing import Any

from tilegraph.target import Target
from tilegraph.tune.measure import resolve_target
from tilegraph.version import __version__


def node_fingerprint(target: Any) -> dict[str, Any]:
    """This node's view of `target` (a target string resolves here, as a runner on it would)."""
    resolved = resolve_target(target)
    # A Target object arrives with the driver's CPU filled in, so its fingerprint is the same on any
    # node: the node's own machine (detected here) must agree too.
    machine = Target("cpu")
    return {"target": resolved.fingerprint, "machine": machine.fingerprint, "tilegraph": __version__,
            "host": socket.gethostname(), "cpu": machine.cpu_model or "", "isa": machine.isa or "",
            "cores": os.cpu_count() or 0}


def calibrate(size: int = 256, repeats: int = 5) -> float:
    """GFLOP/s of a fixed float32 GEMM (numpy's BLAS), best of `repeats` after a warm-up: a runner's
    calibration, reported beside its fingerprint (equal fingerprints, very different numbers: a
    busy or throttled node)."""
    import time

    import numpy as np

    a = np.ones((size, size), np.float32)
    a @ a
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best / 1e9


def match_key(fingerprint: dict[str, Any]) -> tuple[str, str, str]:
    """What must agree between the driver and a runner for a measurement to count."""
    return fingerprint["target"], fingerprint["machine"], fingerprint["tilegraph"]


__all__ = ["calibrate", "match_key", "node_fingerprint"]
