"""The emulated kernel's tracepoints: the events it knows (the tracefs formats
bundled with bpfmux, or this machine's), their program arrays and raw probes,
and what a hit delivers to each kind of program."""

from __future__ import annotations

import fnmatch
import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ...abi.tpformat import bundled_events, load_format
from ...errors import BpfmuxError, NotFoundError
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

    def raw_params(self, name: str) -> list[str] | None:
        """Names of raw tracepoint ``name``'s ``TP_PROTO`` arguments (the
        context slots of its raw_tp/tp_btf programs), from BTF; ``None``
        without BTF or without that prototype.

        :raises NotFoundError: unknown tracepoint.
        """
        if self.btf is None:
            return None
        from ...btf.types import Func, FuncProto, Ptr

        raw = self.get(name).name.split(":", 1)[1]
        btf = self.btf
        ids = btf.find_ids(f"btf_trace_{raw}")
        if not ids:
            return None
        p = btf.resolve(btf[ids[0]])
        proto = btf[p.type_id] if isinstance(p, Ptr) else None
        if not isinstance(proto, FuncProto):
            return None
        names = [q.name for q in proto.params[1:]]  # the first is the probe's data
        if not all(names):  # the typedef's parameters are unnamed: the kernel's probe function names them
            for fid in btf.find_ids(f"__bpf_trace_{raw}"):
                f = btf[fid]
                fp = btf[f.type_id] if isinstance(f, Func) else None
                if isinstance(fp, FuncProto) and len(fp.params) == len(proto.params):
                    names = [q.name for q in fp.params[1:]]
                    break
        return [n or f"arg{i}" for i, n in enumerate(names)]

    def raw_slots(self, name: str, args: Sequence[int], fields: dict[str, Any]) -> list[int]:
        """The context a raw_tp/tp_btf program of ``name`` gets: one u64 slot per
        ``TP_PROTO`` argument. Positional ``args`` give every slot in order;
        without them, the keyword ``fields`` that name arguments give theirs
        and the rest are 0 (``fire("raw_syscalls:sys_enter", id=39)``). Without
        the prototype (no BTF) the slots are ``args`` as given.

        :raises BpfmuxError: a count of positional arguments other than the
            prototype's, or a field that is neither an argument nor a field
            of the tracepoint's format.
        """
        values = [a & U64 for a in args]
        params = self.raw_params(name)
        if params is None:
            return values or [0]
        ev = self.get(name)
        own = [f.name for f in ev.format.fields if not f.common] if ev.format is not None else []
        unknown = [k for k in fields if k not in params and k not in own and not k.startswith("common_")]
        if unknown:
            raise BpfmuxError(f"tracepoint {ev.name} has no argument or field {unknown[0]!r}; its arguments "
                              f"(the raw_tp/tp_btf context) are {', '.join(params) or 'none'}, its fields "
                              f"{', '.join(own) or 'none'}")
        if values:
            if len(values) != len(params):
                raise BpfmuxError(f"tracepoint {ev.name} takes {len(params)} argument(s) ({', '.join(params)}), "
                                  f"{len(values)} given; give them all in order, or name them "
                                  f"({params[-1] if params else 'name'}=…)")
            return values
        return [int(fields.get(p, 0)) & U64 for p in params] or [0]

    def fire(self, name: str, args: Iterable[int], fields: dict[str, Any], pid: int) -> int:
        """One hit: tracepoint programs get the record laid out from ``fields``,
        raw_tp/tp_btf programs the prototype's slots (:meth:`raw_slots`); in
        registration order. Returns how many programs ran.

        :raises NotFoundError: unknown tracepoint.
        :raises BpfmuxError: a field the tracepoint does not have, or a wrong
            count of arguments for its raw programs.
        """
        ev = self.get(name)
        ev.hits += 1
        ran = 0
        record: bytearray | None = None
        raw: bytearray | None = None
        args = list(args)
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
                    slots = self.raw_slots(name, args, fields)
                    raw = bytearray(struct.pack(f"<{len(slots)}Q", *slots))
                owner.program.run(raw, context=RunContext(cookie=owner.cookie))
                ran += 1
        return ran
