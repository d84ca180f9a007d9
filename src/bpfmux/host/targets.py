"""Attach targets written as text, and what they name on this machine.

- uprobe: ``BINARY:SYMBOL``, ``BINARY:SYMBOL+OFFSET``, ``BINARY:0xFILEOFFSET``
  (``BINARY`` a path or a library name such as ``libc.so.6``; ``SYMBOL`` may
  carry a version, ``getpid@@GLIBC_2.2.5``, or be a glob for multi attach),
  resolved to file offsets through the binary's ELF symbols;
- kprobe: ``FUNCTION``, ``FUNCTION+OFFSET``, ``0xADDRESS``; globs over the
  functions the kernel can trace (tracefs ``available_filter_functions``,
  else ``/proc/kallsyms``).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InvalidArgumentError, NotFoundError, NotSupportedError, ParseError
from ..record import Frozen
from ..record import set_field as _set
from . import tracefs
from .elfsyms import ElfSymbols
from .globs import is_glob, match
from .kallsyms import KernelSymbols
from .ldcache import resolve_binary

__all__ = [
    "KprobeTarget",
    "UprobeTarget",
    "parse_kprobe_target",
    "parse_uprobe_target",
    "resolve_kernel_functions",
    "resolve_uprobe",
    "resolve_uprobe_targets",
]


class UprobeTarget(Frozen):
    """A parsed uprobe target.

    :ivar binary: path or library name, as written.
    :ivar symbol: function name or glob (``None`` when an offset is given).
    :ivar offset: extra offset after the symbol, or the file offset itself.
    """

    __slots__ = ("binary", "symbol", "offset")

    binary: str
    symbol: str | None
    offset: int

    def __init__(self, binary: str, symbol: str | None, offset: int = 0) -> None:
        _set(self, "binary", binary)
        _set(self, "symbol", symbol)
        _set(self, "offset", offset)


class KprobeTarget(Frozen):
    """A parsed kprobe target: ``function+offset`` or an absolute ``address``."""

    __slots__ = ("function", "offset", "address")

    function: str | None
    offset: int
    address: int

    def __init__(self, function: str | None, offset: int = 0, address: int = 0) -> None:
        _set(self, "function", function)
        _set(self, "offset", offset)
        _set(self, "address", address)


def _int(text: str, what: str, spec: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise ParseError(f"bad {what} {text!r} in {spec!r}") from None
    if v < 0:
        raise ParseError(f"negative {what} in {spec!r}")
    return v


def parse_uprobe_target(spec: str) -> UprobeTarget:
    """``"libc.so.6:getpid"`` → ``UprobeTarget("libc.so.6", "getpid", 0)``.

    :raises ParseError: no ``:``, empty parts, bad offset.
    """
    binary, sep, rest = spec.rpartition(":")
    if not sep or not binary or not rest:
        raise ParseError(f"uprobe target {spec!r} must be 'BINARY:SYMBOL[+OFFSET]' or 'BINARY:0xOFFSET'")
    if rest[0].isdigit():
        return UprobeTarget(binary, None, _int(rest, "file offset", spec))
    sym, plus, off = rest.partition("+")
    if not sym:
        raise ParseError(f"empty symbol in uprobe target {spec!r}")
    return UprobeTarget(binary, sym, _int(off, "offset", spec) if plus else 0)


def parse_kprobe_target(spec: str) -> KprobeTarget:
    """``"do_sys_openat2+0x10"`` → ``KprobeTarget("do_sys_openat2", 16)``.

    :raises ParseError: empty or malformed.
    """
    if not spec:
        raise ParseError("empty kprobe target; give a kernel function name")
    if spec[0].isdigit():
        return KprobeTarget(None, 0, _int(spec, "address", spec))
    fn, plus, off = spec.partition("+")
    if not fn or any(c.isspace() for c in fn):
        raise ParseError(f"bad kprobe target {spec!r}")
    return KprobeTarget(fn, _int(off, "offset", spec) if plus else 0)


def _traceable_functions() -> list[str]:
    try:
        return tracefs.available_filter_functions()
    except NotSupportedError:
        ks = KernelSymbols.cached()
        return [s.name for s in ks.symbols if s.is_function and s.module is None]


def resolve_kernel_functions(targets: Sequence[str], cookies: Sequence[int] | None = None
                             ) -> tuple[list[str], list[int] | None]:  # fmt: skip
    """Expand globs into function names (deduplicated, first wins); a glob's
    cookie applies to each function it matches.

    :raises InvalidArgumentError: bad cookie count.
    :raises NotFoundError: a glob matching nothing.
    """
    if cookies is not None and len(cookies) != len(targets):
        raise InvalidArgumentError(f"{len(cookies)} cookies for {len(targets)} targets; give one cookie per target")
    names: list[str] = []
    cks: list[int] | None = [] if cookies is not None else None
    seen: set[str] = set()
    cands: list[str] | None = None
    for i, t in enumerate(targets):
        if is_glob(t):
            if cands is None:
                cands = _traceable_functions()
            found = match(t, cands)
            if not found:
                raise NotFoundError("kernel function", t, "the glob matches no traceable function")
        else:
            found = [t]
        for n in found:
            if n in seen:
                continue
            seen.add(n)
            names.append(n)
            if cks is not None and cookies is not None:
                cks.append(cookies[i])
    return names, cks


def resolve_uprobe_targets(targets: Sequence[str], cookies: Sequence[int] | None = None
                           ) -> dict[str, tuple[list[tuple[str, int]], list[int] | None, list[str]]]:  # fmt: skip
    """Group and expand targets: ``{binary path: (functions, cookies, targets)}``,
    binaries in first-seen order. A glob's cookie applies to every function
    it matches.

    :raises ParseError: a malformed target.
    :raises InvalidArgumentError: a cookie count that does not match the targets.
    :raises NotFoundError: no such binary, symbol, or a glob matching nothing.
    """
    if cookies is not None and len(cookies) != len(targets):
        raise InvalidArgumentError(f"{len(cookies)} cookies for {len(targets)} targets; give one cookie per target")
    groups: dict[str, tuple[list[tuple[str, int]], list[int] | None, list[str]]] = {}
    elfs: dict[str, ElfSymbols] = {}
    for i, spec in enumerate(targets):
        t = parse_uprobe_target(spec)
        path = resolve_binary(t.binary)
        funcs, cks, tg = groups.setdefault(path, ([], [] if cookies is not None else None, []))
        tg.append(spec)
        if t.symbol is None:
            found = [(f"{t.offset:#x}", t.offset)]
        else:
            if path not in elfs:
                elfs[path] = ElfSymbols.cached(path)
            elf = elfs[path]
            if is_glob(t.symbol):
                found = [(s.name, s.offset + t.offset) for s in elf.match(t.symbol)]
                if not found:
                    raise NotFoundError("function symbol", spec, f"the glob matches nothing in {path}")
            else:
                found = [(t.symbol, elf.offset(t.symbol) + t.offset)]
        funcs.extend(found)
        if cks is not None and cookies is not None:
            cks.extend([cookies[i]] * len(found))
    return groups


def resolve_uprobe(spec: str) -> tuple[str, int]:
    """``"libc.so.6:getpid"`` → (``"/lib/x86_64-linux-gnu/libc.so.6"``, file offset).

    :raises ParseError: a malformed target.
    :raises InvalidArgumentError: a glob where one function is needed.
    :raises NotFoundError: no such binary or symbol.
    """
    t = parse_uprobe_target(spec)
    path = resolve_binary(t.binary)
    if t.symbol is None:
        return path, t.offset
    if is_glob(t.symbol):
        raise InvalidArgumentError(f"{spec!r} is a glob; attach it with attach_many (uprobe_multi)")
    return path, ElfSymbols.cached(path).offset(t.symbol) + t.offset
