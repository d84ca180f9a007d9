"""The emulated kernel's tracepoints: the events it knows (the tracefs formats
bundled with bpfmux, or this machine's), their program arrays and raw probes,
and what a hit delivers to each kind of program."""

from __future__ import annotations

import fnmatch
import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ...abi.tpformat import bundled_events, load_format
from ...errors import NotFoundError
from ...uapi import ProgType
from ..vm.runtime import RunContext
from .hooks import TraceEvent, tracepoint_record
from .trampoline.frame import U64

if TYPE_CHECKING:  # pragma: no cover
    from ...btf import Btf

__all__ = ["TracepointRegistry"]


def _is_glob(text: str) -> bool:
    return any(c in text for c in "*?[")


class TracepointRegistry:
    """Every tracepoint of one emulated kernel, made on first use.

    :param btf: the kernel's BTF (raw tracepoint prototypes), or ``None``.
    """

    def __init__(self, btf: Btf | None) -> None:
        self.btf = btf
        self.events: dict[str, TraceEvent] = {}
        self._raw_index: dict[str, str] | None = None

    def names(self) -> list[str]:
        """Every known tracepoint as ``system:event``."""
        return [e.replace("/", ":") for e in bundled_events()]

    def key(self, name: str) -> str:
        """``system:event`` for ``system:event``, ``system/event`` or a raw
        tracepoint name such as ``sched_switch``.

        :raises NotFoundError: a bare name no known system has.
        """
        if ":" in name or "/" in name:
            system, _, event = name.replace("/", ":").partition(":")
            return f"{system}:{event}"
        if self._raw_index is None:
            idx: dict[str, str] = {}
            for full in bundled_events():
                system, event = full.split("/", 1)
                idx.setdefault(event, f"{system}:{event}")
            self._raw_index = idx
        key = self._raw_index.get(name)
        if key is None:
            raise NotFoundError("tracepoint", name, "give it as system:event")
        return key

    def get(self, name: str) -> TraceEvent:
        """The tracepoint (see :meth:`key` for the spellings).

        :raises NotFoundError: the kernel's formats do not know it.
        """
        key = self.key(name)
        ev = self.events.get(key)
        if ev is None:
            system, event = key.split(":", 1)
            fmt = load_format(system, event)
            ev = self.events[key] = TraceEvent(key, ProgType.TRACEPOINT, fmt)
        return ev

    def expand(self, patterns: Sequence[str], *, raw: bool = False) -> list[str]:
        """Globs → ``system:event`` names (``raw``: bare event names); plain names pass through.

        :raises NotFoundError: a glob matching nothing.
        """
        out: list[str] = []
        names: list[str] | None = None
        for p in patterns:
            if not _is_glob(p):
                out.append(p)
                continue
            names = names if names is not None else self.names()
            key = p.replace("/", ":") if (":" in p or "/" in p or not raw) else f"*:{p}"
            found = [n for n in names if fnmatch.fnmatchcase(n, key)]
            if not found:
                raise NotFoundError("tracepoint matching", p)
            out.extend(n.split(":", 1)[1] for n in found) if raw else out.extend(found)
        return out

    def raw_nargs(self, name: str) -> int | None:
        """Arguments of raw tracepoint ``name`` (its ``TP_PROTO``), from BTF;
        ``None`` without BTF or without that prototype.

        :raises NotFoundError: unknown tracepoint.
        """
        if self.btf is None:
            return None
        from ..verifier.objects import _tp_btf_frame

        raw = self.get(name).name.split(":", 1)[1]
        try:
            return len(_tp_btf_frame(self.btf, raw))
        except NotFoundError:
            return None

    def fire(self, name: str, args: Iterable[int], fields: dict[str, Any], pid: int) -> int:
        """One hit: tracepoint programs get the record laid out from ``fields``,
        raw_tp/tp_btf programs the ``args``; in registration order. Returns
        how many programs ran.

        :raises NotFoundError: unknown tracepoint.
        :raises BpfmuxError: a field the tracepoint does not have.
        """
        ev = self.get(name)
        ev.hits += 1
        ran = 0
        record: bytearray | None = None
        raw: bytearray | None = None
        values = [a & U64 for a in args]
        for kind, owner in list(ev.probes):
            if kind == "perf":
                if record is None:
                    assert ev.format is not None  # tracepoints always have one
                    record = tracepoint_record(ev.format, fields, pid=pid)
                for prog, _, cookie in list(ev.array.items):
                    prog.run(record, context=RunContext(cookie=cookie))
                    ran += 1
            elif owner is not None:  # a raw tracepoint link ("raw" entries always hold theirs)
                if raw is None:
                    raw = bytearray(struct.pack(f"<{max(len(values), 1)}Q", *(values or [0])))
                owner.program.run(raw, context=RunContext(cookie=owner.cookie))
                ran += 1
        return ran
