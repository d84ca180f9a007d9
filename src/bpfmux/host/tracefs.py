"""tracefs: where the kernel lists its trace events and their ids.

A tracepoint is named ``category:name`` (``syscalls:sys_enter_openat``);
``category/name`` is accepted too (the libbpf section spelling). Its numeric
id, read from ``events/<category>/<name>/id``, is the ``config`` of a
``PERF_TYPE_TRACEPOINT`` perf event.
"""

from __future__ import annotations

import os
from functools import lru_cache

from ..errors import NotFoundError, NotSupportedError, ParseError
from .files import read_text
from .globs import match

__all__ = [
    "available_filter_functions",
    "list_tracepoints",
    "split_tracepoint",
    "tracefs_root",
    "tracepoint_id",
    "tracepoint_ids",
]

_CANDIDATES = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")


def tracefs_root() -> str:
    """The directory where tracefs is mounted.

    :raises NotSupportedError: tracefs is not mounted (the message says how to
        mount it).
    """
    for c in _CANDIDATES:
        if os.path.isdir(os.path.join(c, "events")):
            return c
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and parts[2] == "tracefs" and os.path.isdir(os.path.join(parts[1], "events")):
                    return parts[1]
    except OSError:
        pass
    raise NotSupportedError(
        "tracefs", "tracefs is not mounted; run 'mount -t tracefs nodev /sys/kernel/tracing' as root"
    )


def split_tracepoint(spec: str) -> tuple[str, str]:
    """``"cat:name"`` or ``"cat/name"`` → ``("cat", "name")``.

    :raises ParseError: not of that shape.
    """
    for sep in (":", "/"):
        if sep in spec:
            cat, _, name = spec.partition(sep)
            if cat and name and ":" not in name and "/" not in name:
                return cat, name
    raise ParseError(f"tracepoint {spec!r} must be 'category:name', e.g. 'syscalls:sys_enter_openat'")


def tracepoint_id(category: str, name: str | None = None) -> int:
    """Numeric id of a tracepoint (``tracepoint_id("sched", "sched_switch")``
    or ``tracepoint_id("sched:sched_switch")``).

    :raises NotFoundError: no such tracepoint.
    :raises NotSupportedError: tracefs is not mounted.
    :raises ParseError: bad spelling.
    """
    if name is None:
        category, name = split_tracepoint(category)
    if "/" in category or "/" in name or category in (".", "..") or name in (".", ".."):
        raise ParseError(f"bad tracepoint name {category}:{name}")
    path = os.path.join(tracefs_root(), "events", category, name, "id")
    try:
        text = read_text(path, 4096, "tracepoint id", encoding="ascii").strip()
    except FileNotFoundError:
        raise NotFoundError(
            "tracepoint", f"{category}:{name}", "list them with bpfmux.live.tracefs.list_tracepoints()"
        ) from None
    try:
        return int(text)
    except ValueError:
        raise ParseError(f"unexpected content {text!r}", 0, path) from None


def _available_events() -> list[tuple[str, str]]:
    root = tracefs_root()
    path = os.path.join(root, "available_events")
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None:
        return list(_read_available_events(path, st.st_mtime_ns))
    out = []
    events = os.path.join(root, "events")
    for cat in sorted(os.listdir(events)):
        d = os.path.join(events, cat)
        if os.path.isdir(d):
            out += [(cat, n) for n in sorted(os.listdir(d)) if os.path.isdir(os.path.join(d, n))]
    return out


@lru_cache(maxsize=2)
def _read_available_events(path: str, mtime_ns: int) -> tuple[tuple[str, str], ...]:
    out = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if ":" in line:
                cat, _, name = line.partition(":")
                out.append((cat, name))
    return tuple(out)


def list_tracepoints(pattern: str = "*:*") -> list[tuple[str, str]]:
    """Tracepoints matching ``pattern`` (``"syscalls:sys_enter_*"``), as
    ``(category, name)`` pairs in the kernel's order.

    A pattern without ``:`` is matched against ``category:name`` as a whole.

    :raises NotSupportedError: tracefs is not mounted.
    :raises ParseError: empty pattern.
    """
    events = _available_events()
    if ":" in pattern or "/" in pattern:
        cpat, npat = split_tracepoint(pattern.replace("/", ":", 1))
        cats = set(match(cpat, sorted({c for c, _ in events})))
        inside = [(c, n) for c, n in events if c in cats]
        names = set(match(npat, [n for _, n in inside]))  # one match over all names: the pattern is compiled once
        return [(c, n) for c, n in inside if n in names]
    full = match(pattern, [f"{c}:{n}" for c, n in events])
    return [(c, n) for c, _, n in (x.partition(":") for x in full)]


def tracepoint_ids(pattern: str) -> dict[str, int]:
    """``{"category:name": id}`` for every tracepoint matching ``pattern``.

    :raises NotSupportedError: tracefs is not mounted.
    """
    out = {}
    for cat, name in list_tracepoints(pattern):
        try:
            out[f"{cat}:{name}"] = tracepoint_id(cat, name)
        except NotFoundError:
            continue  # listed but vanished (module unloaded)
    return out


def available_filter_functions() -> list[str]:
    """Kernel functions ftrace can hook (the candidates of kprobe_multi/fentry
    globbing), without module suffixes.

    :raises NotSupportedError: tracefs is not mounted, or this kernel has no
        ftrace function list.
    """
    path = os.path.join(tracefs_root(), "available_filter_functions")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            names = [line.split()[0] for line in f if line.strip()]
    except OSError as e:
        raise NotSupportedError("ftrace", f"cannot read {path}: {e.strerror}; this kernel lacks ftrace") from e
    return names
