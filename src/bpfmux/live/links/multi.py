"""Several links held and closed as one (:class:`GroupLink`), and the
expansion of tracepoint globs through tracefs.

Which mechanism covers a program's targets is decided once for both kernels
(:func:`bpfmux.attach.attach_many`); the live kernel makes a
:class:`GroupLink` for mechanisms that need one link per target (raw
tracepoints, perf-event tracepoints, kprobes, uprobes). Detaching closes
perf-event links on several threads: the bpf_link closes then overlap their
RCU grace periods (the perf events' own tracepoint unregistration is
serialized by the kernel).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

from ...api import Link, MultiLink
from ...host import tracefs
from ._base import close_all

if TYPE_CHECKING:
    from ...api import Program

__all__ = ["GroupLink", "expand_raw_tracepoints", "expand_tracepoints"]

_L = TypeVar("_L", bound=Link)


class GroupLink(MultiLink, Generic[_L]):
    """Several links held and closed as one.

    :ivar links: the member links, in attach order.
    :ivar mechanism: how they were made (see module doc).
    :ivar targets: the targets as given.
    """

    def __init__(self, program: Program, links: list[_L], targets: Sequence[str], *, mechanism: str, kind: str,
                 parallel_close: bool = False) -> None:  # fmt: skip
        self._program = program
        self.links = links
        self.targets = tuple(targets)
        self.mechanism = mechanism
        self.kind = kind
        self.parallel_close = parallel_close
        self._closed = False

    @property
    def program(self) -> Program:
        """The attached program."""
        return self._program

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def close(self) -> None:
        """Detach everything (in parallel for perf-event links); idempotent.
        Every member is closed even if one fails or Ctrl-C arrives."""
        if self._closed:
            return
        self._closed = True
        close_all(self.links, parallel=self.parallel_close)

    def update(self, program: Program, old: Program | None = None) -> None:
        """Swap the program on every member link (each swap is atomic, the
        group's is not).

        :raises NotSupportedError: a member link kind cannot be updated.
        """
        for link in self.links:
            link.update(program, old)
        self._program = program

    def __len__(self) -> int:
        return len(self.links)

    def __iter__(self) -> Iterator[_L]:
        return iter(self.links)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<GroupLink {self.mechanism} {len(self.links)} links {state}>"


def expand_tracepoints(targets: Iterable[str]) -> list[str]:
    """``"syscalls:sys_enter_*"`` → every matching ``category:name``; plain
    names pass through.

    :raises NotFoundError: a glob matching nothing.
    """
    from ...errors import NotFoundError

    out = []
    for t in targets:
        if any(c in t for c in "*?["):
            found = [f"{c}:{n}" for c, n in tracefs.list_tracepoints(t)]
            if not found:
                raise NotFoundError("tracepoint", t, "the glob matches no tracepoint")
            out.extend(found)
        else:
            out.append(t)
    return out


def expand_raw_tracepoints(targets: Iterable[str]) -> list[str]:
    """Globs → bare raw tracepoint names (``"sched_*"``, ``"sched:sched_*"``); plain names pass through.

    :raises NotFoundError: a glob matching nothing.
    """
    from ...errors import NotFoundError

    out = []
    for t in targets:
        if any(c in t for c in "*?["):
            pat = t if (":" in t or "/" in t) else f"*:{t}"
            found = [n for _, n in tracefs.list_tracepoints(pat)]
            if not found:
                raise NotFoundError("raw tracepoint", t, "the glob matches no tracepoint")
            out.extend(found)
        else:
            out.append(t)
    return out
