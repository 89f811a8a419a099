"""`hash_once`: a frozen dataclass whose hash is computed on first use and kept.

A `dataclass(frozen=True)` hashes the tuple of its fields on every call, so hashing an IR node
hashes its whole subtree: every dict or set keyed by expressions (simplify's affine term tables,
substitute's variable mappings) pays the tree's size per lookup, and lowering pays it millions of
times (a py-spy profile of lowering on a Zen 3 put 16% of its samples in the generated `__hash__`;
0.9% after). The nodes are immutable, so the first hash stays
true; it is kept in the instance's `__dict__` and nowhere in equality, `repr` or `fields`.

    @hash_once
    @dataclass(frozen=True)
    class BinOp(Expr): ...

The kept value is left out of pickles: string hashes differ between processes (hash
randomisation), and expressions travel to the builder's spawned workers, where a hash carried over
would silently break every dict lookup.
"""

from __future__ import annotations

from typing import Any, TypeVar

_KEY = "_hash_once"
T = TypeVar("T")


def hash_once(cls: type[T]) -> type[T]:
    """Wrap `cls`'s own `__hash__` (the dataclass's, or one it defines) to compute once per instance."""
    compute = cls.__dict__.get("__hash__")
    if compute is None:
        raise TypeError(f"{cls.__name__} defines no __hash__ of its own (apply hash_once above @dataclass)")

    def __hash__(self: Any) -> int:  # noqa: N807 (the dunder it replaces)
        try:
            return self.__dict__[_KEY]
        except KeyError:
            value = compute(self)
            self.__dict__[_KEY] = value  # frozen: __setattr__ refuses, the instance dict does not
            return value

    def __getstate__(self: Any) -> dict[str, Any]:  # noqa: N807
        state = dict(self.__dict__)
        state.pop(_KEY, None)
        return state

    cls.__hash__ = __hash__  # type: ignore[assignment]
    cls.__getstate__ = __getstate__  # type: ignore[attr-defined]
    return cls


__all__ = ["hash_once"]
