"""What a script bpfmux cannot compile looks like: :class:`ScriptError`,
which says where (file, line, column), what, and what was expected, and
shows the line with a caret under the construct.

Every error the compiler raises on purpose is a :class:`ScriptError` (a
:class:`~bpfmux.errors.ParseError`); the fuzz tests check that nothing else
escapes.
"""

from __future__ import annotations

from ..errors import ParseError
from ..record import Frozen
from ..record import set_field as _set

__all__ = ["Loc", "ScriptError", "Source"]


class Loc(Frozen):
    """A place in a script: 1-based line and column, and how many columns the
    construct spans (at least 1)."""

    __slots__ = ("line", "col", "length")

    line: int
    col: int
    length: int

    def __init__(self, line: int, col: int, length: int = 1) -> None:
        _set(self, "line", line)
        _set(self, "col", col)
        _set(self, "length", length)

    def to(self, other: Loc) -> Loc:
        """The span from this location to the end of ``other`` (same line), else this one."""
        if other.line == self.line and other.col + other.length > self.col:
            return Loc(self.line, self.col, other.col + other.length - self.col)
        return self


class Source(Frozen):
    """A script's text and the name errors use for it (``stdin`` for ``-e``,
    as bpftrace says, or the file name)."""

    __slots__ = ("text", "name")

    text: str
    name: str

    def __init__(self, text: str, name: str = "stdin") -> None:
        _set(self, "text", text)
        _set(self, "name", name)

    def line(self, n: int) -> str:
        """Line ``n`` (1-based) without its newline; ``""`` past the end."""
        lines = self.text.split("\n")
        return lines[n - 1] if 0 < n <= len(lines) else ""


class ScriptError(ParseError):
    """A script that does not compile, with its place.

    :ivar loc: where (``None`` when the error is about the whole script).
    :ivar source: the script.
    :ivar expected: what would have been valid there (``None`` when the error
        is not about syntax).
    :ivar construct: the construct the error is about (``"call to foo()"``,
        ``"probe kprobe:x"``, …), for tests and tools.
    """

    def __init__(self, message: str, loc: Loc | None = None, source: Source | None = None, *,
                 expected: str | None = None, construct: str | None = None) -> None:
        self.loc = loc
        self.script = source
        self.expected = expected
        self.construct = construct
        text = message + (f"; expected {expected}" if expected else "")
        super().__init__(text)
        self.message = text

    @property
    def where(self) -> str:
        """``NAME:LINE:COL`` (or just the name)."""
        name = self.script.name if self.script is not None else "stdin"
        return f"{name}:{self.loc.line}:{self.loc.col}" if self.loc is not None else name

    def __str__(self) -> str:
        return f"{self.where}: {self.message}"

    @property
    def excerpt(self) -> str:
        """The script line with a caret (and tildes) under the construct; ``""`` without a place."""
        if self.loc is None or self.script is None:
            return ""
        line = self.script.line(self.loc.line).replace("\t", " ")
        if not line.strip():
            return ""
        col = max(1, self.loc.col)
        width = max(1, min(self.loc.length, len(line) - col + 1))
        return f"{line}\n{' ' * (col - 1)}^{'~' * (width - 1)}"

    def render(self) -> str:
        """The whole report: the one-line message, then the excerpt."""
        ex = self.excerpt
        return f"{self}\n{ex}" if ex else str(self)
