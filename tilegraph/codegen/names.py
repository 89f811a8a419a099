"""C identifiers from user-chosen names: sanitised to [A-Za-z0-9_], prefixed by kind, unique.

    table = NameTable()
    table.get("buffer", 'my-tensor; system("x")')   -> 'b_my_tensor_system_x_'
    table.get("buffer", "A"), table.get("var", "A") -> 'b_A', 'x_A'

A user string never reaches the C source unchanged: every identifier goes through this table.
"""

from __future__ import annotations

import re

PREFIXES = {"buffer": "b_", "var": "x_", "func": "tg_", "temp": "t_", "register": "r_"}
MAX_LENGTH = 64
_INVALID = re.compile(r"[^A-Za-z0-9_]+")


def sanitize(name: str) -> str:
    """Only [A-Za-z0-9_]; runs of other characters become one underscore; never empty."""
    out = _INVALID.sub("_", str(name))[:MAX_LENGTH]
    return out or "anon"


class NameTable:
    """Maps (kind, user name) to a C identifier, the same one every time, unique across kinds."""

    def __init__(self, reserved: tuple[str, ...] = ()):
        self._ids: dict[tuple[str, str], str] = {}
        self._used: set[str] = set(reserved)

    def get(self, kind: str, name: str) -> str:
        key = (kind, name)
        if key not in self._ids:
            self._ids[key] = self.fresh(kind, name)
        return self._ids[key]

    def fresh(self, kind: str, name: str) -> str:
        """A new identifier never returned before (not remembered under `name`)."""
        prefix = PREFIXES[kind]
        base = sanitize(name)
        if base.startswith(prefix):
            base = base[len(prefix):] or "anon"
        ident = prefix + base
        n = 1
        while ident in self._used:
            ident = f"{prefix}{base}_{n}"
            n += 1
        self._used.add(ident)
        return ident
