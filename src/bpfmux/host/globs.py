"""Shell-glob matching of names (kernel functions, ELF symbols, tracepoints)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable

from ..errors import ParseError

__all__ = ["is_glob", "match"]


def match(pattern: str, names: Iterable[str]) -> list[str]:
    """Names matching a shell glob (``*``, ``?``, ``[...]``), case-sensitive, in input order.

    :raises ParseError: the pattern is empty.
    """
    if not pattern:
        raise ParseError("empty symbol pattern; give a name or a glob such as 'str*'")
    if not is_glob(pattern):
        return [n for n in names if n == pattern]
    return [n for n in names if fnmatch.fnmatchcase(n, pattern)]


def is_glob(pattern: str) -> bool:
    return any(c in pattern for c in "*?[")

