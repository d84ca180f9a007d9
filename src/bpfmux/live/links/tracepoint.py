"""Tracepoint links: a ``BPF_PROG_TYPE_TRACEPOINT`` program on a tracepoint,
through a perf event of type ``PERF_TYPE_TRACEPOINT``.

Detaching costs the kernel an RCU grace period per perf event (tens of
milliseconds); to run one program on many tracepoints cheaply use a raw
tracepoint program instead, or attach through
:func:`bpfmux.live.links.attach_many`, which closes perf-event links on
several threads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import perf as _perf
from ._base import prog_fd
from .perf_event import PerfEventLink, attach_perf_event

if TYPE_CHECKING:
    from ...api import Program

__all__ = ["TracepointLink", "attach_tracepoint"]


class TracepointLink(PerfEventLink):
    """A program on one tracepoint (owns its perf event)."""

    kind = "tracepoint"


def attach_tracepoint(program: Program, tracepoint: str, *, cookie: int | None = None, via: str | None = None,
                      cpu: int = 0, pid: int = -1) -> TracepointLink:  # fmt: skip
    """Attach to ``"category:name"`` (or ``"category/name"``).

    :raises NotFoundError: no such tracepoint.
    :raises BpfError: the kernel refused (``E2BIG``: 64 programs already run
        there; ``EINVAL``: not a tracepoint program).
    """
    prog_fd(program)  # fail early on a non-program
    event = _perf.open_tracepoint(tracepoint, pid=pid, cpu=cpu)
    return attach_perf_event(program, event, cookie=cookie, via=via, kind="tracepoint", cls=TracepointLink)
