"""The process-wide default thread count for kernels.

    set_num_threads(4)      every later kernel call without num_threads= uses 4 threads
    get_num_threads()       4 (before any set: the cores this process may run on)
    reset_num_threads()     back to "each kernel uses its target's num_cores"
"""

from __future__ import annotations

import os
import threading

_lock = threading.Lock()
_configured: int | None = None


def check_num_threads(n: object, argument: str = "num_threads") -> int:
    """`n` as a thread count, or a ValueError/TypeError naming `argument`."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{argument} must be an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"{argument} must be at least 1, got {n}")
    return n


def set_num_threads(n: int) -> None:
    """Use `n` threads for kernel calls that do not pass num_threads=."""
    global _configured
    n = check_num_threads(n, "n")
    with _lock:
        _configured = n


def get_num_threads() -> int:
    """The thread count set by set_num_threads, else the cores available to this process."""
    configured = _configured
    if configured is not None:
        return configured
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def configured_num_threads() -> int | None:
    """The value of set_num_threads, or None when it was never called (or was reset)."""
    return _configured


def reset_num_threads() -> None:
    global _configured
    with _lock:
        _configured = None
