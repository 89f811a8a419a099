"""Connecting to a Ray cluster, with one-line errors: Ray missing (the `ray` extra), no cluster at
the address, a cluster with no matching runner.

    with connect("auto") as conn:      # ray.init(address="auto"): the cluster `ray start` left running
        conn.nodes()                   # alive node ids
"""

from __future__ import annotations

import logging
import os
import warnings
from types import ModuleType
from typing import Any

from tilegraph.errors import TilegraphError

RAY_HINT = "pip install 'tilegraph[ray]'"


class ClusterError(TilegraphError):
    """The cluster cannot be used: Ray is missing, unreachable, or has no runner for the target."""


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ClusterError(f"tuning on a cluster needs Ray, which is not installed ({RAY_HINT})") from None
    return ray


class Connection:
    """A Ray connection this process uses; close() disconnects only if connect() made it."""

    def __init__(self, ray: ModuleType, address: str, owned: bool):
        self.ray, self.address, self.owned = ray, address, owned

    def nodes(self) -> list[str]:
        return [n["NodeID"] for n in self.ray.nodes() if n.get("Alive")]

    def close(self) -> None:
        if self.owned and self.ray.is_initialized():
            self.ray.shutdown()
        self.owned = False

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(address: str) -> Connection:
    """"local" starts Ray in this process (this machine's cores); "auto" joins the cluster running
    here; "ray://host:port" or "host:port" joins that one. Already connected: that connection."""
    if not isinstance(address, str) or not address.strip():
        raise ClusterError(f"cluster must be 'local', 'auto' or a Ray address, got {address!r}")
    ray = import_ray()
    if ray.is_initialized():
        return Connection(ray, address, owned=False)
    kwargs: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
    if address == "local":
        kwargs.update(num_cpus=os.cpu_count() or 1, include_dashboard=False)
    else:
        kwargs["address"] = address
    try:
        with warnings.catch_warnings():  # Ray Client warns before it raises: the error below is the one line
            warnings.simplefilter("ignore")
            ray.init(**kwargs)
    except Exception as e:  # ConnectionError, ValueError, RuntimeError, ... from Ray: one line
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        hint = ""
        if address.startswith("ray://") and "timeout" in first.lower():
            hint = (" (is the head's client port open? A cluster with token authentication, Ray's default for "
                    "local clusters since 2.59, also needs RAY_AUTH_MODE=token and RAY_AUTH_TOKEN from "
                    "`ray get-auth-token` here)")
        raise ClusterError(f"could not connect to the Ray cluster at {address!r}: {first}{hint}") from None
    return Connection(ray, address, owned=True)


__all__ = ["RAY_HINT", "ClusterError", "Connection", "connect", "import_ray"]
