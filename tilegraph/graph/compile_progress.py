"""The compile display: what compile_model is doing once a compile has run a few seconds.

    with CompileProgress("bert") as show:
        compile_model("bert.onnx", progress=show)

compile_model calls `show.stage(text)` as it enters a stage (graph passes, fusion, building and
timing kernels, the memory plan) and `show(done, total)` as kernels are built. Nothing is printed
for a compile shorter than `delay` seconds; after that, one line per stage and at most one per
`interval` seconds within a stage on stderr (overwritten in place on a terminal), and a last line
with the total time. `enabled=False` shows nothing.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class CompileProgress:
    def __init__(self, label: str, enabled: bool = True, stream: TextIO | None = None, delay: float = 2.0,
                 interval: float = 2.0):
        self.label = label
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.delay = delay
        self.interval = interval
        self._start = time.perf_counter()
        self._stage = "starting"
        self._done = self._total = 0
        self._last = -1e9
        self._shown = False
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def __enter__(self) -> CompileProgress:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._shown:
            outcome = "failed" if exc[0] is not None else "done"
            self._write(f"compiling {self.label}: {outcome} in {time.perf_counter() - self._start:.1f} s", final=True)

    def stage(self, text: str) -> None:
        if text != self._stage:
            self._stage, self._done, self._total = text, 0, 0
            self._show(force=True)

    def __call__(self, done: int, total: int) -> None:
        self._done, self._total = done, total
        self._show(force=done == total)

    def _show(self, force: bool = False) -> None:
        now = time.perf_counter()
        if not self.enabled or now - self._start < self.delay or (not force and now - self._last < self.interval):
            return
        self._last = now
        count = f" {self._done}/{self._total}" if self._total else ""
        self._write(f"compiling {self.label}: {self._stage}{count} ({now - self._start:.0f} s)")

    def _write(self, line: str, final: bool = False) -> None:
        self._shown = True
        if self._tty:
            self.stream.write("\r\x1b[2K" + line + ("\n" if final else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def stage(progress: Any, text: str) -> None:
    """Tell `progress` (a CompileProgress, or any callable(done, total), or None) the stage."""
    if hasattr(progress, "stage"):
        progress.stage(text)


__all__ = ["CompileProgress", "stage"]
