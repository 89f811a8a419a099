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


def match_key(fingerprint: dict[str, Any]) -> tuple[str, str, str]:
    """What must agree between the driver and a runner for a measurement to count."""
    return fingerprint["target"], fingerprint["machine"], fingerprint["tilegraph"]


__all__ = ["match_key", "node_fingerprint"]
