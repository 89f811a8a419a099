"""Decider: the source of a sketch's sampling decisions — given ones first, fresh random ones after.

    decider = Decider(rng, given=[[4, 2, 8, 16], 1, ...])
    sch = apply_sketch(workload, "tile", decider)        # every sample_* call asks the decider
    decider.taken                                         # the decisions actually used, in order

A sketch is a Python function that calls `decider.tile(...)` / `decider.categorical(...)` where it
needs a choice; the Schedule records each as a sampling instruction, so the result is an ordinary
replayable trace. Re-running the sketch with a mutated decision vector re-derives every choice that
depends on it (which loops to unroll under an unroll limit, how many loops can be fused): what a
replay of the recorded trace could not do. A given decision that does not fit the program it meets
(another extent, fewer candidates) is replaced by a fresh random one, so any vector gives a program.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from tilegraph.errors import ScheduleError
from tilegraph.schedule import sampling
from tilegraph.schedule.primitives.common import get_loop
from tilegraph.schedule.schedule import IntRV, Schedule


class Decider:
    def __init__(self, rng: random.Random, given: Sequence[Any] | None = None):
        self.rng = rng
        self.given = list(given or ())
        self.taken: list[Any] = []

    def _next_given(self) -> Any:
        i = len(self.taken)
        return self.given[i] if i < len(self.given) else None

    def tile(self, sch: Schedule, loop: str, n: int, max_innermost: int | None = None) -> tuple[IntRV, ...]:
        """n factors of `loop`'s extent (sample_tile), the given ones when they still fit."""
        given = self._next_given()
        rvs = None
        if isinstance(given, list):
            try:
                rvs = sch.sample_tile(loop, n, max_innermost, decision=given)
            except ScheduleError:
                rvs = None
        if rvs is None:
            extent = get_loop(sch.func, str(loop)).extent
            rvs = sch.sample_tile(loop, n, max_innermost,
                                  decision=sampling.sample_perfect_tile(self.rng, extent, n, max_innermost))
        self.taken.append([int(r) for r in rvs])
        return rvs

    def categorical(self, sch: Schedule, candidates: Sequence[int], probs: Sequence[float] | None = None) -> int:
        """The index of one of `candidates` (sample_categorical); returns the candidate's value."""
        given = self._next_given()
        if not (isinstance(given, int) and 0 <= given < len(candidates)):
            given = sampling.sample_categorical(self.rng, candidates, probs)
        rv = sch.sample_categorical(candidates, probs, decision=given)
        self.taken.append(int(given))
        return int(rv)
