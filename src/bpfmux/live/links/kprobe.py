"""Kprobe/kretprobe links: a kprobe-type program on a kernel function (or
address) through the kprobe PMU's perf event.

Kernels built without kprobes have no kprobe PMU; attaching then raises
:class:`~bpfmux.errors.NotSupportedError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...host.targets import parse_kprobe_target
from .. import perf as _perf
from ._base import prog_fd
from .perf_event import PerfEventLink, attach_perf_event

if TYPE_CHECKING:
    from ...api import Program

__all__ = ["KprobeLink", "attach_kprobe"]


class KprobeLink(PerfEventLink):
    """A program on one kprobe or kretprobe (owns its perf event)."""

    kind = "kprobe"


def attach_kprobe(program: Program, target: str, *, retprobe: bool = False, cookie: int | None = None,
                  via: str | None = None) -> KprobeLink:  # fmt: skip
    """Attach to ``FUNCTION[+OFFSET]`` or ``0xADDRESS``.

    :raises NotSupportedError: this kernel has no kprobe PMU.
    :raises BpfError: the kernel refused (``ENOENT``: no such function;
        ``EINVAL``: not probeable).
    """
    prog_fd(program)
    t = parse_kprobe_target(target)
    event = _perf.open_kprobe(t.function, t.offset, t.address, retprobe=retprobe)
    link = attach_perf_event(program, event, cookie=cookie, via=via, kind="kretprobe" if retprobe else "kprobe",
                             cls=KprobeLink)  # fmt: skip
    link.target = target
    return link
