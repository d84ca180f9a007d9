"""Answers to the questions a libbpf tool asks its kernel before load
(:class:`corpus_tools.Probe`), for the live kernel (this machine or the VM
tier's guest) and for the emulated kernel."""

from __future__ import annotations

import functools
import os
from typing import Any

from bpfmux.errors import BpfmuxError


def _btf_nargs(btf: Any, name: str) -> int | None:
    """``TP_PROTO`` arguments of raw tracepoint ``name``: its ``btf_trace_<name>`` prototype less the ``void *``."""
    from bpfmux.btf.layout import resolve
    from bpfmux.btf.types import FuncProto, Ptr

    if btf is None:
        return None
    try:
        t = resolve(btf, btf.find(f"btf_trace_{name}", "typedef"))
    except (KeyError, BpfmuxError):
        return None
    if isinstance(t, Ptr):
        t = resolve(btf, btf[t.type_id])
    return len(t.params) - 1 if isinstance(t, FuncProto) else None


class LiveProbe:
    """The running kernel, as libbpf-tools' helpers see it (tracefs, kallsyms, BTF, feature probes)."""

    def __init__(self) -> None:
        from bpfmux.live import LiveKernel

        self.kernel = LiveKernel()

    @functools.cached_property
    def _btf(self) -> Any:
        return self.kernel.btf

    @functools.cached_property
    def _fentry_ok(self) -> bool:
        return self.kernel.supports("fentry")

    @functools.cached_property
    def _filter_functions(self) -> frozenset[str]:
        from bpfmux.host.tracefs import available_filter_functions

        try:
            return frozenset(f.split()[0] for f in available_filter_functions())
        except (OSError, BpfmuxError):
            return frozenset()

    @functools.cached_property
    def _kallsyms(self) -> frozenset[str]:
        try:
            with open("/proc/kallsyms") as f:
                return frozenset(line.split()[2] for line in f if len(line.split()) >= 3)
        except OSError:
            return frozenset()

    def _btf_has(self, name: str, kind: str) -> bool:
        try:
            self.kernel.btf_id(name, kind)
            return True
        except BpfmuxError:
            return False

    def tp_btf(self, name: str) -> bool:
        return self._btf_has(f"btf_trace_{name}", "typedef")

    def fentry(self, func: str) -> bool:
        return self._fentry_ok and self._btf_has(func, "func") and func in self._filter_functions

    def btf_func(self, func: str) -> bool:
        return self._btf_has(func, "func")

    def kprobe(self, func: str) -> bool:
        return func in self._filter_functions

    def tracepoint(self, category: str, name: str) -> bool:
        from bpfmux.host.tracefs import tracefs_root

        return os.path.exists(os.path.join(tracefs_root(), "events", category, name, "format"))

    def ksym(self, name: str) -> bool:
        return name in self._kallsyms

    def raw_tp_nargs(self, name: str) -> int | None:
        return _btf_nargs(self._btf, name)


class EmuProbe:
    """The emulated kernel: its function table, tracepoints and BTF (every kind of probe works)."""

    def __init__(self, emu: Any) -> None:
        self.emu = emu

    def tp_btf(self, name: str) -> bool:
        return _btf_nargs(self.emu.btf, name) is not None

    def fentry(self, func: str) -> bool:
        return func in self.emu.functions

    def btf_func(self, func: str) -> bool:
        return func in self.emu.functions

    def kprobe(self, func: str) -> bool:
        return func in self.emu.functions

    def tracepoint(self, category: str, name: str) -> bool:
        return bool(self.emu.tracepoint_names(f"{category}:{name}"))

    def ksym(self, name: str) -> bool:
        return name in self.emu.functions

    def raw_tp_nargs(self, name: str) -> int | None:
        return _btf_nargs(self.emu.btf, name)
