"""Sampling instructions: random decisions a search can record, change and replay."""

from __future__ import annotations

import random
from collections.abc import Sequence

from tilegraph.errors import ScheduleError


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def sample_perfect_tile(rng: random.Random, extent: int, n: int, max_innermost: int | None = None) -> list[int]:
    """n factors whose product is exactly `extent`; the innermost is at most `max_innermost`."""
    if n < 1:
        raise ScheduleError(f"sample_tile: n must be >= 1, got {n}")
    if n == 1:  # one factor: the extent itself
        if max_innermost is not None and extent > max_innermost:
            raise ScheduleError(f"sample_tile: one factor of {extent} cannot be at most {max_innermost}")
        return [extent]
    inner_choices = [d for d in divisors(extent) if max_innermost is None or d <= max_innermost]
    factors = [rng.choice(inner_choices)]
    rest = extent // factors[0]
    for _ in range(n - 2):
        f = rng.choice(divisors(rest))
        factors.append(f)
        rest //= f
    if n >= 2:
        factors.append(rest)
    return list(reversed(factors))


def check_perfect_tile(decision: Sequence[int], extent: int, n: int) -> list[int]:
    d = [int(x) for x in decision]
    prod = 1
    for x in d:
        prod *= x
    if len(d) != n or prod != extent or any(x < 1 for x in d):
        raise ScheduleError(f"sample_tile decision {list(decision)} is not {n} positive factors of {extent}")
    return d


def sample_categorical(rng: random.Random, candidates: Sequence[object], probs: Sequence[float] | None) -> int:
    """Index of the chosen candidate."""
    if not candidates:
        raise ScheduleError("sample_categorical needs at least one candidate")
    weights = list(probs) if probs is not None else [1.0] * len(candidates)
    if len(weights) != len(candidates) or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ScheduleError("sample_categorical: probs must be non-negative, one per candidate, not all zero")
    return rng.choices(range(len(candidates)), weights=weights)[0]
