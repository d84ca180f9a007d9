"""User functions of the emulated kernel's processes, for uprobes.

The emulated kernel runs no user code, but uprobes still name real
binaries: a target (``libc.so.6:strlen``, ``/bin/bash:readline``,
``BINARY:0xOFFSET``) is resolved against the binary's ELF symbols on this
machine (:mod:`bpfmux.host.targets`), and a workload "calls" it
(:meth:`bpfmux.emu.Emulator.user_call`). Each binary is given its own
load address in the emulated address space, in the order binaries are first
named, so ``bpf_get_func_ip``/``pt_regs->ip`` tell functions apart.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["USER_BASE", "USER_STRIDE", "UserFunction", "UserFunctions"]

#: load address of the first binary
USER_BASE = 0x0000_5555_0000_0000
#: distance between two binaries' load addresses
USER_STRIDE = 0x0000_0001_0000_0000


@dataclass(frozen=True)
class UserFunction:
    """One probed place in a binary.

    :ivar path: the binary's path; :ivar offset: the file offset probed.
    :ivar name: the symbol (or the offset in hex); :ivar base: the binary's load address.
    """

    path: str
    offset: int
    name: str
    base: int

    @property
    def addr(self) -> int:
        """The emulated virtual address (``ip``)."""
        return self.base + self.offset


class UserFunctions:
    """The user functions named so far, one object per ``(binary, offset)``."""

    def __init__(self) -> None:
        self._bases: dict[str, int] = {}
        self._sites: dict[tuple[str, int], UserFunction] = {}

    def site(self, path: str, offset: int, name: str = "") -> UserFunction:
        """The function at ``offset`` of ``path`` (made on first use)."""
        key = (path, offset)
        f = self._sites.get(key)
        if f is None:
            base = self._bases.setdefault(path, USER_BASE + USER_STRIDE * len(self._bases))
            f = self._sites[key] = UserFunction(path, offset, name or f"{offset:#x}", base)
        return f

    def resolve(self, target: str) -> UserFunction:
        """``BINARY:SYMBOL[+OFF]`` or ``BINARY:0xOFFSET`` → its function.

        :raises ParseError: a malformed target.
        :raises NotFoundError: no such binary or symbol.
        :raises InvalidArgumentError: a glob where one function is needed.
        """
        from ...host.targets import parse_uprobe_target, resolve_uprobe

        path, offset = resolve_uprobe(target)
        sym = parse_uprobe_target(target).symbol
        return self.site(path, offset, sym or "")

    def expand(self, targets: list[str]) -> list[UserFunction]:
        """Targets with globs → functions, each once (aliases at one offset are one function).

        :raises ParseError: / :raises NotFoundError: as :meth:`resolve`.
        """
        from ...host.targets import resolve_uprobe_targets

        out: list[UserFunction] = []
        seen: set[UserFunction] = set()
        for path, (funcs, _, _) in resolve_uprobe_targets(targets).items():
            for name, off in funcs:
                f = self.site(path, off, name)
                if f not in seen:
                    seen.add(f)
                    out.append(f)
        return out
