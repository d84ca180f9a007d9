"""Probe listing: ``bpfmux trace -l`` and ``bpfmux bpftrace -l``.

:func:`list_probes` returns every probe of this machine whose full name
(``tracepoint:syscalls:sys_enter_openat``, ``kprobe:vfs_read``,
``software:cpu-clock:``, ``uprobe:/bin/bash:readline`` …) matches a glob,
sorted, as bpftrace 0.17 lists them; with ``verbose`` each tracepoint comes
with its record fields and each kfunc with its arguments. A pattern without
``:`` matches against whole names (``*sleep*``); uprobes are listed when the
pattern names a binary (``uprobe:/bin/bash:*``, ``uprobe:libc:str*``).
"""

from __future__ import annotations

import fnmatch

from ..errors import BpfmuxError, NotFoundError, NotSupportedError, ParseError
from .spec import SOFTWARE_EVENTS

__all__ = ["HARDWARE_EVENTS", "list_probes"]

#: bpftrace's hardware event names
HARDWARE_EVENTS = ("cpu-cycles", "cycles", "instructions", "cache-references", "cache-misses", "branch-instructions",
                   "branches", "branch-misses", "bus-cycles", "frontend-stalls", "backend-stalls", "ref-cycles")  # fmt: skip
_ALIASES = {"t": "tracepoint", "k": "kprobe", "kr": "kretprobe", "u": "uprobe", "ur": "uretprobe", "s": "software",
            "h": "hardware", "f": "kfunc", "fr": "kretfunc", "fentry": "kfunc", "fexit": "kretfunc",
            "rt": "rawtracepoint", "p": "profile", "i": "interval"}  # fmt: skip


def _normalize(pattern: str) -> str:
    head, sep, rest = pattern.partition(":")
    if sep and head in _ALIASES:
        return f"{_ALIASES[head]}:{rest}"
    return pattern


def list_probes(pattern: str = "*:*", *, verbose: bool = False) -> list[tuple[str, list[str]]]:
    """``(probe name, detail lines)`` of every probe matching ``pattern``, sorted by name.

    :raises ParseError: a uprobe pattern without a binary.
    :raises NotFoundError: a uprobe pattern's binary does not exist.
    """
    pat = _normalize(pattern.strip() or "*:*")
    if ":" not in pat:
        pat = f"*{pat}*" if not any(c in pat for c in "*?[") else pat
        provider = "*"
    else:
        provider = pat.split(":", 1)[0]
    out: dict[str, list[str]] = {}

    def wants(kind: str) -> bool:
        return fnmatch.fnmatchcase(kind, provider)

    if wants("tracepoint"):
        for cat, name in _tracepoints():
            full = f"tracepoint:{cat}:{name}"
            if fnmatch.fnmatchcase(full, pat):
                out[full] = _tp_fields(cat, name) if verbose else []
    if wants("software"):
        for ev in SOFTWARE_EVENTS:
            full = f"software:{ev}:"
            if fnmatch.fnmatchcase(full, pat) or fnmatch.fnmatchcase(full[:-1], pat):
                out[full] = []
    if wants("hardware"):
        for ev in HARDWARE_EVENTS:
            full = f"hardware:{ev}:"
            if fnmatch.fnmatchcase(full, pat) or fnmatch.fnmatchcase(full[:-1], pat):
                out[full] = []
    if wants("kprobe"):
        for fn in _kernel_functions():
            full = f"kprobe:{fn}"
            if fnmatch.fnmatchcase(full, pat):
                out[full] = []
    if wants("kfunc") and provider != "*":
        for fn in _btf_functions(pat):
            full = f"kfunc:{fn}"
            if fnmatch.fnmatchcase(full, pat):
                out[full] = _func_args(fn) if verbose else []
    if provider in ("uprobe", "uretprobe"):
        parts = pat.split(":")
        if len(parts) < 3:
            raise ParseError(f"list uprobes with a binary: '{provider}:BINARY:PATTERN' (e.g. 'uprobe:libc:str*')")
        binary = ":".join(parts[1:-1])
        for fn, path in _user_functions(binary, parts[-1]):
            out[f"{provider}:{path}:{fn}"] = []
    return sorted(out.items())


def _tracepoints() -> list[tuple[str, str]]:
    try:
        from ..host.tracefs import list_tracepoints

        return list_tracepoints("*:*")
    except (BpfmuxError, OSError):
        from ..abi.tpformat import bundled_events

        return [tuple(e.split("/", 1)) for e in bundled_events()]  # type: ignore[misc]


def _tp_fields(cat: str, name: str) -> list[str]:
    from ..abi.tpformat import load_format

    try:
        fmt = load_format(cat, name)
    except (BpfmuxError, OSError):
        return []
    return [f.decl for f in fmt.fields if not f.common]


def _kernel_functions() -> list[str]:
    try:
        from ..host.tracefs import available_filter_functions

        return available_filter_functions()
    except (NotSupportedError, BpfmuxError, OSError):
        return []


def _btf_functions(pattern: str) -> list[str]:
    try:
        from ..btf import Btf
        from ..uapi import BtfKind

        btf = Btf.vmlinux()
    except (BpfmuxError, OSError):
        return []
    glob = pattern.split(":", 1)[1] if ":" in pattern else pattern
    out = []
    for tid in range(1, len(btf)):
        if btf.kind_of(tid) == BtfKind.FUNC:
            name = btf[tid].name
            if fnmatch.fnmatchcase(name, glob):
                out.append(name)
    return out


def _func_args(fn: str) -> list[str]:
    try:
        from ..btf import Btf
        from ..btf.cdump import declaration

        btf = Btf.vmlinux()
        sig = btf.func(fn)
        lines = [f"{declaration(btf, a.type.id)} {a.name}" for a in sig.args]
        if sig.return_size:
            lines.append(f"{declaration(btf, sig.return_type.id)} retval")
        return lines
    except (BpfmuxError, OSError, ImportError, AttributeError):
        return []


def _user_functions(binary: str, glob: str) -> list[tuple[str, str]]:
    from ..host.elfsyms import ElfSymbols
    from ..host.ldcache import resolve_binary

    try:
        path = resolve_binary(binary)
    except NotFoundError:
        raise
    syms = ElfSymbols.cached(path)
    return sorted({(s.name, path) for s in syms.match(glob or "*")})
