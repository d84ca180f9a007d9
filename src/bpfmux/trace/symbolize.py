"""Instruction pointers → ``function+offset`` for ``--stacks``.

Kernel addresses go through ``/proc/kallsyms`` (nearest text symbol at or
below the address). User addresses go through the process's
``/proc/PID/maps`` (which file, at which file offset) and that file's ELF
symbols (:class:`bpfmux.host.elfsyms.ElfSymbols`). Process maps are
remembered once read, so stacks of processes that have exited by the time
the report is printed still resolve when they were seen earlier
(:meth:`Symbolizer.remember`).
"""

from __future__ import annotations

import bisect
import contextlib
from typing import Protocol

from ..errors import BpfmuxError, ParseError
from ..host.files import MiB, read_text

__all__ = ["BPF_FRAMES", "Symbolizer", "parse_maps"]

#: Kernel functions of the BPF machinery that sit above the place an event
#: happened: a raw tracepoint program's stack starts in the program and
#: ``bpf_trace_runN``, a kprobe_multi program's in the fprobe handlers. They
#: are dropped from the top of kernel stacks so a stack starts where
#: bpftrace's starts (its tracepoint programs are perf tracepoint programs,
#: whose stacks begin at the tracepoint's iterator).
BPF_FRAMES = ("bpf_prog_", "bpf_trace_run", "__bpf_trace_", "bpf_trampoline_", "__bpf_prog_run", "trace_call_bpf",
              "bpf_get_stackid", "bpf_get_stack", "bpf_overflow_handler", "__perf_event_overflow",
              "kprobe_multi_link_handler", "kprobe_multi_link_prog_run", "fprobe_", "rethook_")  # fmt: skip


class StackSource(Protocol):
    """What :meth:`Symbolizer.symbolize` reads stacks from (a :class:`~bpfmux.trace.engine.Tracer`)."""

    def stack(self, stack_id: int) -> list[int]: ...


def parse_maps(text: str) -> list[tuple[int, int, int, str]]:
    """``/proc/PID/maps`` text → ``(start, end, file offset, path)`` of file-backed
    executable mappings. Malformed lines are skipped."""
    out = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        path = parts[5].strip()
        if not path.startswith("/"):
            continue
        try:
            lo, _, hi = parts[0].partition("-")
            out.append((int(lo, 16), int(hi, 16), int(parts[2], 16), path))
        except ValueError:
            continue
    return out


class _Table:
    """Sorted (start, size, name) with nearest-lower lookup."""

    def __init__(self, entries: list[tuple[int, int, str]]) -> None:
        entries.sort()
        self.starts = [e[0] for e in entries]
        self.entries = entries

    def find(self, addr: int, sized: bool) -> tuple[str, int] | None:
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return None
        start, size, name = self.entries[i]
        if sized and size and addr >= start + size:
            return None
        return name, addr - start


class Symbolizer:
    """Resolves kernel and user instruction pointers (lazily loads tables)."""

    def __init__(self) -> None:
        self._kernel: _Table | None = None
        self._maps: dict[int, list[tuple[int, int, int, str]]] = {}
        self._elf: dict[str, _Table | None] = {}

    def kernel_symbol(self, ip: int) -> tuple[str, int] | None:
        """``(function, offset)`` of a kernel address (``None`` when unknown)."""
        self.kernel(ip)
        assert self._kernel is not None
        return self._kernel.find(ip, sized=False)

    def user_symbol(self, pid: int, ip: int) -> tuple[str, int, str] | None:
        """``(function, offset, file path)`` of a user address of process ``pid``
        (``None`` when unknown)."""
        self.remember(pid)
        for lo, hi, off, path in self._maps.get(pid, ()):
            if lo <= ip < hi:
                table = self._elf_table(path)
                hit = table.find(ip - lo + off, sized=True) if table else None
                return (hit[0], hit[1], path) if hit else None
        return None

    def kernel(self, ip: int) -> str:
        """``func+0x1f`` (or the hex address when unknown)."""
        if self._kernel is None:
            entries: list[tuple[int, int, str]] = []
            with contextlib.suppress(OSError, BpfmuxError):
                from ..host.kallsyms import KernelSymbols

                for s in KernelSymbols.load().symbols:
                    if s.is_function and s.address:
                        name = f"{s.name} [{s.module}]" if s.module else s.name
                        entries.append((s.address, 0, name))
            self._kernel = _Table(entries)
        hit = self._kernel.find(ip, sized=False)
        return f"{hit[0]}+{hit[1]:#x}" if hit else f"{ip:#x}"

    def remember(self, pid: int, refresh: bool = False) -> None:
        """Read and keep ``/proc/PID/maps`` (once, or again with ``refresh``:
        the last non-empty reading is kept; no error if the process is gone)."""
        if pid <= 0 or (pid in self._maps and not refresh):
            return
        try:
            maps = parse_maps(read_text(f"/proc/{pid}/maps", 256 * MiB, "memory map", errors="replace"))
        except (OSError, ParseError):
            return
        if maps:
            self._maps[pid] = maps

    def _elf_table(self, path: str) -> _Table | None:
        if path not in self._elf:
            table = None
            with contextlib.suppress(OSError, BpfmuxError):
                from ..host.elfsyms import ElfSymbols

                syms = ElfSymbols.cached(path)
                table = _Table([(s.offset, s.size, s.name) for s in syms.symbols])
            self._elf[path] = table
        return self._elf[path]

    def user(self, pid: int, ip: int) -> str:
        """``func+0x1f (libc.so.6)`` or ``0x… (path)``/``0x…``."""
        self.remember(pid)
        for lo, hi, off, path in self._maps.get(pid, ()):
            if lo <= ip < hi:
                file_off = ip - lo + off
                table = self._elf_table(path)
                hit = table.find(file_off, sized=True) if table else None
                base = path.rsplit("/", 1)[-1]
                return f"{hit[0]}+{hit[1]:#x} ({base})" if hit else f"{ip:#x} ({base})"
        return f"{ip:#x}"

    def strip_bpf_frames(self, ips: list[int]) -> list[int]:
        """A kernel stack without the :data:`BPF_FRAMES` at its top (all of it when nothing else is left)."""
        i = 0
        while i < len(ips):
            hit = self.kernel_symbol(ips[i])
            if hit is None or not hit[0].startswith(BPF_FRAMES):
                break
            i += 1
        return ips[i:] if i < len(ips) else ips

    def symbolize(self, tracer: StackSource, kstack: int, ustack: int, pid: int) -> tuple[list[str], list[str]]:
        """(kernel frames, user frames) of two stack ids, innermost first; the
        kernel stack starts where the event happened (:meth:`strip_bpf_frames`)."""
        k = [self.kernel(ip) for ip in self.strip_bpf_frames(tracer.stack(kstack))]
        u = [self.user(pid, ip) for ip in tracer.stack(ustack)]
        return k, u
