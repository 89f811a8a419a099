"""An indentation-aware line writer for printers.

    w = CodeWriter()
    with w.block("for (int i = 0; i < 4; ++i)"):
        w.line("x += i;")
    w.text()  ->  'for (int i = 0; i < 4; ++i) {\\n  x += i;\\n}\\n'
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class CodeWriter:
    def __init__(self, indent: str = "  "):
        self._lines: list[str] = []
        self._depth = 0
        self._indent = indent

    def line(self, text: str = "") -> None:
        self._lines.append(f"{self._indent * self._depth}{text}" if text else "")

    def raw(self, text: str) -> None:
        """A line at column 0 (preprocessor directives)."""
        self._lines.append(text)

    @contextmanager
    def indented(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    @contextmanager
    def block(self, header: str, closer: str = "}") -> Iterator[None]:
        self.line(f"{header} {{" if header else "{")
        with self.indented():
            yield
        self.line(closer)

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
