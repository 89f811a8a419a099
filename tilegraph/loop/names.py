"""Deterministic fresh names, so replaying the same primitives yields the same identifiers."""

from __future__ import annotations

from collections.abc import Iterable


def fresh_name(base: str, taken: Iterable[str]) -> str:
    """`base` if free, else `base_1`, `base_2`, ... (the first free one)."""
    used = set(taken)
    if base not in used:
        return base
    n = 1
    while f"{base}_{n}" in used:
        n += 1
    return f"{base}_{n}"
