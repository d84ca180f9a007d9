"""The kernel's symbol table (``/proc/kallsyms``) and the functions behind syscalls."""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import lru_cache

from ..errors import NotFoundError, ParseError
from ..record import Frozen
from ..record import set_field as _set
from .files import MiB, read_text
from .globs import match

__all__ = ["KernelSymbol", "KernelSymbols", "parse_kallsyms", "syscall_function"]


class KernelSymbol(Frozen):
    """One line of ``/proc/kallsyms``.

    :ivar name: symbol name.
    :ivar address: its address (0 when the kernel hides addresses from this user).
    :ivar type: the ``nm`` type letter (``T``/``t`` text, ``D``/``d`` data, …).
    :ivar module: the module it belongs to, ``None`` for the core kernel.
    """

    __slots__ = ("name", "address", "type", "module")

    name: str
    address: int
    type: str
    module: str | None

    def __init__(self, name: str, address: int, type: str, module: str | None = None) -> None:
        _set(self, "name", name)
        _set(self, "address", address)
        _set(self, "type", type)
        _set(self, "module", module)

    @property
    def is_function(self) -> bool:
        """True for text symbols (``T``, ``t``, ``W``, ``w``)."""
        return self.type in "TtWw"


def parse_kallsyms(text: str, source: str = "/proc/kallsyms") -> list[KernelSymbol]:
    """Parse the text of ``/proc/kallsyms``.

    Each line is ``ADDRESS TYPE NAME`` optionally followed by ``\\t[module]``.

    :raises ParseError: a line does not have that shape (``offset`` is the
        1-based line number).
    """
    out: list[KernelSymbol] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        module = None
        body = line
        if line.endswith("]"):
            lb = line.rfind("[")
            if lb < 0:
                raise ParseError(f"unbalanced module bracket in {line!r}", lineno, source)
            module = line[lb + 1 : -1].strip()
            body = line[:lb]
            if not module:
                raise ParseError(f"empty module name in {line!r}", lineno, source)
        parts = body.split()
        if len(parts) != 3:
            raise ParseError(f"expected 'ADDRESS TYPE NAME', got {line!r}", lineno, source)
        addr_s, typ, name = parts
        if len(typ) != 1 or not typ.isalpha() and typ not in "?-":
            raise ParseError(f"bad symbol type {typ!r} in {line!r}", lineno, source)
        try:
            address = int(addr_s, 16)
        except ValueError:
            raise ParseError(f"bad address {addr_s!r} in {line!r}", lineno, source) from None
        if address < 0:
            raise ParseError(f"bad address {addr_s!r} in {line!r}", lineno, source)
        out.append(KernelSymbol(name, address, typ, module))
    return out


class KernelSymbols:
    """The kernel's symbol table, indexed by name.

    :ivar symbols: every symbol, in file order.
    """

    def __init__(self, symbols: Sequence[KernelSymbol], source: str = "/proc/kallsyms") -> None:
        self.symbols = tuple(symbols)
        self.source = source
        self._by_name: dict[str, list[KernelSymbol]] = {}
        for s in self.symbols:
            self._by_name.setdefault(s.name, []).append(s)

    @classmethod
    def load(cls, path: str = "/proc/kallsyms") -> KernelSymbols:
        """Read and parse ``path``.

        :raises BpfError: the file cannot be read (``OSError`` subclass).
        :raises ParseError: the file is malformed.
        """
        text = read_text(path, 256 * MiB, "kernel symbol list", encoding="ascii", errors="replace")
        return cls(parse_kallsyms(text, path), path)

    @classmethod
    def cached(cls, path: str = "/proc/kallsyms") -> KernelSymbols:
        """:meth:`load`, done once per process (module loads after that are
        not seen; call :meth:`load` for a fresh table).

        :raises OSError: the file cannot be read.
        :raises ParseError: the file is malformed.
        """
        return _cached_kallsyms(path)

    @property
    def addresses_visible(self) -> bool:
        """False when every address reads 0 (``kptr_restrict``, not root)."""
        return any(s.address for s in self.symbols)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __len__(self) -> int:
        return len(self.symbols)

    def lookup(self, name: str, module: str | None = None) -> KernelSymbol:
        """The symbol called ``name`` (core kernel first, unless ``module`` is given).

        :raises NotFoundError: no such symbol.
        """
        cands = self._by_name.get(name, [])
        if module is not None:
            cands = [s for s in cands if s.module == module]
        if not cands:
            where = f" in module {module}" if module else ""
            raise NotFoundError("kernel symbol", name, f"it is not in {self.source}{where}; check the spelling")
        core = [s for s in cands if s.module is None]
        return (core or cands)[0]

    def address(self, name: str) -> int:
        """Address of ``name``.

        :raises NotFoundError: no such symbol.
        """
        return self.lookup(name).address

    def match(self, pattern: str, functions_only: bool = True) -> list[KernelSymbol]:
        """Symbols whose name matches ``pattern`` (a glob), one per name, in file order.

        :raises ParseError: empty pattern.
        """
        names = match(pattern, self._by_name)
        out = []
        for n in names:
            syms = [s for s in self._by_name[n] if s.is_function or not functions_only]
            if syms:
                out.append(syms[0])
        return out

    def names_at(self, address: int) -> list[str]:
        """All names whose address is exactly ``address``."""
        return [s.name for s in self.symbols if s.address == address]


@lru_cache(maxsize=2)
def _cached_kallsyms(path: str) -> KernelSymbols:
    return KernelSymbols.load(path)


def syscall_function(name: str) -> str:
    """The kernel function behind syscall ``name`` (``"getpid"`` →
    ``"__x64_sys_getpid"``), as a ``ksyscall/NAME`` section means it: the
    architecture's syscall wrapper when kallsyms has one, else ``sys_NAME``.
    """
    prefixes = {"x86_64": "__x64_sys_", "aarch64": "__arm64_sys_", "s390x": "__s390x_sys_",
                "riscv64": "__riscv_sys_", "ppc64le": "sys_"}  # fmt: skip
    cand = prefixes.get(os.uname().machine, "sys_") + name
    try:
        ks = KernelSymbols.cached()
    except OSError:
        return cand
    for c in (cand, f"__se_sys_{name}", f"sys_{name}"):
        if c in ks:
            return c
    return cand
