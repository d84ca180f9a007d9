"""The tracer engine behind ``bpfmux trace``.

- :mod:`.spec` parses probe specs in bpftrace's spelling (``tracepoint:sched:*``,
  ``uprobe:libc:str*``, ``kprobe:vfs_*``, ``profile:hz:99`` …);
- :mod:`.plan` expands globs and picks one multi-attach mechanism per group
  (all syscall tracepoints → one ``sys_enter`` raw tracepoint with an
  in-kernel filter; tracepoints → raw tracepoint links with cookies; uprobe
  globs → one ``uprobe_multi`` link; …);
- :mod:`.progs` generates the BPF programs with :mod:`bpfmux.isa.build`
  (no compiler at run time);
- :mod:`.engine` (:class:`Tracer`) creates maps, loads, attaches, reads
  snapshots and detaches;
- :mod:`.report`, :mod:`.decode`, :mod:`.symbolize`, :mod:`.prom` turn what
  was collected into tables, histograms, decoded arguments, symbolized stacks
  and Prometheus metrics;
- :mod:`.child` starts ``-c CMD`` held before ``exec`` until the probes are attached.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .plan import TraceOptions
from .spec import ProbeSpec, parse_probe, parse_probes

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Snapshot, Tracer

__all__ = ["ProbeSpec", "Snapshot", "TraceOptions", "Tracer", "parse_probe", "parse_probes"]


def __getattr__(name: str) -> Any:
    """``Tracer`` and ``Snapshot`` are imported on first use (the planner alone,
    as ``bpfmux bpftrace`` uses it, does not load the engine and its programs)."""
    if name in ("Tracer", "Snapshot"):
        from . import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
