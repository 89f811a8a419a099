"""Wall time per pipeline stage, for the measurement pipeline's profile (`tilegraph tune --profile`).

    with recording() as seconds:          # this context only: threads and other processes keep their own
        with stage("lower"):
            lowered = lower(func, target)
    seconds  # {"lower": 0.093}

Code at any layer marks its stages with `stage(name)`; nothing is kept unless a `recording()` is
open in the same context (a ContextVar: a thread pool's workers, which do not inherit the
context, record nothing), so marking costs one lookup when nobody asks. Nested recordings each
see the stages run inside them. A stage that raises still counts its time.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar

_RECORDING: ContextVar[tuple[dict[str, float], ...]] = ContextVar("tilegraph_stage_recording", default=())


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Add the wall time of the block to `name` in every open recording of this context."""
    open_recordings = _RECORDING.get()
    if not open_recordings:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - start
        for seconds in open_recordings:
            seconds[name] = seconds.get(name, 0.0) + elapsed


def add(name: str, seconds: float) -> None:
    """Add time measured elsewhere (a worker process's stages) to every open recording."""
    for totals in _RECORDING.get():
        totals[name] = totals.get(name, 0.0) + seconds


@contextlib.contextmanager
def recording() -> Iterator[dict[str, float]]:
    """A dict of seconds by stage name, filled while the block runs."""
    seconds: dict[str, float] = {}
    token = _RECORDING.set((*_RECORDING.get(), seconds))
    try:
        yield seconds
    finally:
        _RECORDING.reset(token)


__all__ = ["add", "recording", "stage"]
