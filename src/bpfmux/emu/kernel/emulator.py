"""The emulated kernel: :class:`Emulator`.

It loads the same ELF objects the live kernel loads, verifies them with the
project's verifier, runs them on the project's VM, and attaches them to
emulated hooks (tracepoints, kprobes, perf events, raw tracepoints) and to
emulated kernel functions through the trampoline subsystem of
``multi-attach.md`` (policies ``clone``, ``filter``, ``per-function``)::

    from bpfmux import Emulator

    emu = Emulator()                          # vmlinux BTF when present
    coll = emu.load("tests/bpf/fentry_test.bpf.o")
    links = coll.attach_all()
    emu.call("bpf_fentry_test1", 1)           # runs the fentry program
    print(coll.maps[".bss"]["test1_result"])

No privileges are needed; nothing touches the host kernel.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import api
from ...abi import context_for, frame_layout, frame_view_for
from ...abi.tpformat import bundled_events, load_format
from ...abi.tracing import ArgInfo, FrameView
from ...errors import BpfError, BpfmuxError, NotFoundError, NotSupportedError, ParseError
from ...uapi import MAX_MULTI_FUNCS, AttachType, BtfKind, ProgFlags, ProgType
from ..vm.runtime import FuncCall, RunContext
from .hooks import EmuPerfEvent, TraceEvent, kprobe_regs, perf_event_data, tracepoint_record
from .links import (
    GroupLink,
    KprobeMultiLink,
    PerfEventLink,
    RawTracepointLink,
    TracepointLink,
    TracingLink,
    TracingMultiLink,
)
from .objects import DataSection, EmulatedCollection, EmulatedProgram
from .trampoline import Abi, Attachment, FunctionTable, KernelFunction, ProgKind, make_policy
from .trampoline.frame import U64
from .trampoline.functions import Param, add_test_functions
from .trampoline.policy import bulk

#: Stack pointer value kprobe programs see (an address in the kernel's stack area).
KSTACK_TOP = 0xFFFFC90000004000
_MAINLINE_MULTI = {AttachType.TRACE_FENTRY_MULTI: ProgKind.MULTI_ENTRY, AttachType.TRACE_FEXIT_MULTI: ProgKind.MULTI_EXIT}
_SINGLE = {AttachType.TRACE_FENTRY: ProgKind.FENTRY, AttachType.TRACE_FEXIT: ProgKind.FEXIT,
           AttachType.MODIFY_RETURN: ProgKind.FMOD_RET}


@dataclass(frozen=True)
class SiteInfo:
    """What one function's patch site calls (:meth:`Emulator.sites`).

    :ivar function: function name; :ivar addr: its address.
    :ivar image: image kind (``standard``, ``multi``, ``clone``, ``filter``,
        ``per-function``).
    :ivar programs: names of the programs run for a call, in order.
    :ivar shared_with: how many functions share the image.
    :ivar image_bytes: size of the image's generated code.
    """

    function: str
    addr: int
    image: str
    programs: tuple[str, ...]
    shared_with: int
    image_bytes: int


class KernelMemory:
    """Kernel memory for function bodies: reads and writes in the VM's address space."""

    def __init__(self, space: Any) -> None:
        self.space = space

    def read(self, addr: int, size: int) -> bytes:
        return self.space.read(addr, size)

    def write(self, addr: int, data: bytes) -> None:
        self.space.write(addr, data)


class Emulator:
    """An emulated kernel.

    :param btf: where the function table and tracing frames come from:
        ``"auto"`` (the running kernel's ``/sys/kernel/btf/vmlinux`` when
        present, else only the built-in test functions), ``None`` (built-in
        test functions only), a :class:`~bpfmux.btf.Btf`, or a path/bytes of a
        BTF blob or an ELF object with ``.BTF``.
    :param policy: trampoline policy: ``clone`` (default), ``filter``,
        ``per-function``.
    :param tier: VM tier, ``fast`` (default) or ``checked``.
    :param verify: verify programs at load (default true).
    :param kallsyms: take function addresses from ``/proc/kallsyms`` when it
        shows real addresses (default false: deterministic addresses).
    :raises ParseError: unknown policy (a ``ValueError``).
    :raises ParseError: the BTF is malformed.
    """

    def __init__(self, btf: Any = "auto", *, policy: str = "clone", tier: str = "fast", verify: bool = True,
                 kallsyms: bool = False) -> None:
        from ..vm.machine import VM

        self.policy = make_policy(policy)
        self.vm = VM(tier=tier)
        self.memory = KernelMemory(self.vm.space)
        self.verify = verify
        self.btf = _resolve_btf(btf)
        addresses = _kallsyms_addresses() if kallsyms else None
        self.functions = FunctionTable.from_btf(self.btf, addresses) if self.btf is not None else FunctionTable()
        add_test_functions(self.functions, self.memory)
        if self.btf is not None:
            self._register_kfuncs()
        self._events: dict[str, TraceEvent] = {}
        self._kprobe_events: dict[tuple[KernelFunction, bool], TraceEvent] = {}
        self._fprobes: dict[KernelFunction, list[KprobeMultiLink]] = {}
        self._perf_events: set[EmuPerfEvent] = set()
        self._links: set[Any] = set()
        self._raw_index: dict[str, str] | None = None
        self._regions: list[Any] = []
        self._closed = False

    def _register_kfuncs(self) -> None:
        """Make the kfuncs the emulated kernel implements callable by their BTF ids."""
        from ..vm.helpers.tracing import KFUNCS

        for name, fn in KFUNCS.items():
            for fid in self.btf.find_ids(name):
                if self.btf.kind_of(fid) == BtfKind.FUNC:
                    self.vm.register_kfunc(fid, fn, name)

    # -- memory -------------------------------------------------------------

    def alloc(self, data: bytes | int, name: str = "kmem") -> int:
        """Allocate kernel memory (``bytes`` to copy in, or a size); returns its address."""
        buf = bytearray(data) if not isinstance(data, int) else bytearray(data)
        region = self.vm.space.map(buf, name, "kernel", True)
        self._regions.append(region)
        return region.base

    def read(self, addr: int, size: int) -> bytes:
        """Read emulated kernel memory.

        :raises EmulatorFault: not mapped.
        """
        return self.vm.space.read(addr, size)

    def write(self, addr: int, data: bytes) -> None:
        """Write emulated kernel memory.

        :raises EmulatorFault: not mapped or read-only.
        """
        self.vm.space.write(addr, data)

    # -- loading --------------------------------------------------------------

    def load(self, spec_or_path: Any, *, programs: Iterable[str] | None = None,
             kconfig: Mapping[str, object] | None = None) -> EmulatedCollection:
        """Load an object (a path, bytes or an :class:`~bpfmux.obj.ObjectSpec`).

        Maps are created (global data filled, ``.rodata`` frozen), programs
        relocated against this emulator's BTF, verified and loaded.

        :param programs: only these programs (default: all whose section
            does not start with ``?``).
        :param kconfig: values for ``__kconfig`` externs.
        :raises VerifierError: a program was rejected (``.log`` says why).
        :raises NotFoundError: an attach target or map is missing, or a name
            in ``programs`` is not a program of the object.
        :raises NotSupportedError: something the emulator does not model.
        :raises ParseError: the object is malformed.
        """
        spec = spec_or_path
        if isinstance(spec_or_path, str | bytes | os.PathLike):
            from ...obj import load_object

            spec = load_object(spec_or_path)
        coll = EmulatedCollection(spec)
        selected, coll.skipped = spec.select(programs)
        try:
            self._create_maps(spec, coll, kconfig)
            for ps in selected:
                coll.programs[ps.name] = self._load_spec_program(ps, spec, coll)
            self._fill_slots(spec, coll)
        except BaseException:
            coll.close()
            raise
        return coll

    def _create_maps(self, spec: Any, coll: EmulatedCollection, kconfig: Mapping[str, object] | None) -> None:
        from ...codecs import codec_for

        for ms in spec.maps.values():
            m = self.vm.map_from_spec(ms)
            if ms.section == ".kconfig" or ms.name == ".kconfig":
                value = spec.kconfig_data(dict(kconfig or {}))
                m.storage[0][: len(value)] = value
            btf = spec.btf
            if ms.name.startswith("."):
                coll.maps[ms.name] = DataSection(m, btf, ms.section if ms.section.startswith(".") else ms.name)
            else:
                coll.maps[ms.name] = m
            if btf is not None and getattr(ms, "btf_value_type_id", 0) and not ms.name.startswith("."):
                try:
                    if ms.btf_key_type_id:
                        m.key_codec = codec_for(btf, ms.btf_key_type_id, ms.key_size)
                    m.value_codec = codec_for(btf, ms.btf_value_type_id, ms.value_size)
                except (BpfmuxError, TypeError, ValueError):
                    m.key_codec = m.value_codec = None
            if ms.frozen:
                m.frozen = True

    def _fill_slots(self, spec: Any, coll: EmulatedCollection) -> None:
        for ms in spec.maps.values():
            for slot, name in (ms.init_slots or {}).items():
                obj = coll.programs.get(name) or coll.maps.get(name)
                if obj is None:
                    if name in coll.skipped:
                        continue
                    raise NotFoundError("program or map", name, f"slot {slot} of map {ms.name!r} refers to it")
                coll.maps[ms.name][slot] = obj.vmprog if isinstance(obj, EmulatedProgram) else obj

    def _load_spec_program(self, ps: Any, spec: Any, coll: EmulatedCollection) -> EmulatedProgram:
        def map_fd(name: str) -> int:
            if name not in coll.maps:
                raise NotFoundError("map", name, f"program {ps.name!r} refers to it")
            return coll.maps[name].fd

        # without kernel BTF, CO-RE resolves against the object's own types
        insns = ps.instructions(map_fd, self.btf or spec.btf, ksym_addr=self._ksym_addr)
        return self.load_program(insns, ps.prog_type, name=ps.name, section=ps.section,
                                 attach_type=int(ps.expected_attach_type or 0), target=ps.attach_target,
                                 flags=int(ps.flags), license=ps.license or spec.license or "", spec=ps)

    def _ksym_addr(self, name: str) -> int:
        if name in self.functions:
            return self.functions[name].addr
        raise NotFoundError("kernel symbol", name, "the emulated kernel knows only its functions")

    def load_program(self, insns: Any, prog_type: ProgType | int, *, name: str = "prog", section: str = "",
                     attach_type: int = 0, target: str | None = None, flags: int = 0, license: str = "GPL",
                     spec: Any = None) -> EmulatedProgram:
        """Load one program from instructions (map fds already in them).

        Verified first (unless the emulator was made with ``verify=False``);
        a seed multi program (``BPF_F_MULTI_FUNC``) must be a fentry/fexit
        tracing program (**Decision**: ``BPF_MODIFY_RETURN`` fails ``EINVAL``).

        :raises VerifierError: rejected, with the log.
        :raises BpfError: ``EINVAL`` a multi program with attach type fmod_ret.
        """
        from ..verifier.core import KfuncInfo, MapInfo, verify

        ptype = ProgType(prog_type)
        if ProgFlags.MULTI_FUNC in ProgFlags(flags) and ptype == ProgType.TRACING:
            if attach_type not in (AttachType.TRACE_FENTRY, AttachType.TRACE_FEXIT):
                raise BpfError(errno.EINVAL, f"{name}: BPF_F_MULTI_FUNC programs must be fentry or fexit; "
                                             "multi programs cannot modify the return value")
        insn_list = list(insns)
        max_ctx = 0
        if self.verify:
            maps = {}
            for m in self.vm.maps:
                inner = getattr(m, "inner", None)
                inner_info = MapInfo(int(inner.type), inner.key_size, inner.value_size, inner.max_entries,
                                     inner.flags, inner.name) if inner is not None and hasattr(inner, "type") else None
                maps[m.fd] = MapInfo(int(m.type), m.key_size, m.value_size, m.max_entries, m.flags, m.name, inner_info)
            kfuncs: dict[int, KfuncInfo] = {}
            if self.btf is not None:
                from ..verifier.objects import _kfuncs

                kfuncs = _kfuncs(insn_list, self.btf)
            result = verify(insn_list, ptype, attach_type=attach_type,
                            ctx=self._context(ptype, attach_type, target, flags), maps=maps, kfuncs=kfuncs,
                            gpl="GPL" in license, flags=flags, name=name)
            max_ctx = result.max_ctx_offset
        vmprog = self.vm.load(insn_list, name=name, prog_type=ptype, expected_attach_type=attach_type)
        prog = EmulatedProgram(self, vmprog, section=section, attach_type=attach_type, target=target,
                               flags=flags, spec=spec)
        prog.max_ctx_offset = max_ctx
        return prog

    def _context(self, ptype: ProgType, attach_type: int, target: str | None, flags: int) -> Any:
        multi = ProgFlags.MULTI_FUNC in ProgFlags(flags)
        if ptype != ProgType.TRACING:
            return context_for(ptype, attach_type)
        view = frame_view_for(attach_type, multi)
        if view in (FrameView.SEED_MULTI, FrameView.MAINLINE_MULTI) or not target:
            return context_for(ptype, attach_type, multi_func=multi)
        if view is FrameView.TP_BTF:
            from ..verifier.objects import _tp_btf_frame

            if self.btf is None:
                raise NotSupportedError("tp_btf without BTF", f"tp_btf/{target} needs the kernel's BTF")
            return frame_layout(view, _tp_btf_frame(self.btf, target), None, target)
        f = self.function(target)
        args = [_arg_info(p) for p in f.params]
        return frame_layout(view, args, _arg_info(f.ret) if f.ret.size else ArgInfo("ret"), f.name)

    # -- functions ---------------------------------------------------------

    def function(self, name: str | KernelFunction) -> KernelFunction:
        """A kernel function by name.

        :raises NotFoundError: no such function.
        """
        if isinstance(name, KernelFunction):
            return name
        return self.functions[name]

    def define(self, name: str, params: Iterable[Param | int] = (), ret: Param | int = 8, body: Any = None) -> KernelFunction:
        """Define a kernel function (ints are unsigned sizes), or give an existing one a body.

        :raises ParseError: ``name`` exists and no ``body`` was given (a ``ValueError``).
        """
        if name in self.functions and body is not None:
            f = self.functions[name]
            f.body = body
            return f
        return self.functions.define(name, params, ret, body)

    def call(self, function: str | KernelFunction, *args: int) -> int:
        """Call a kernel function through its patch site and its probes.

        Order: kprobes and kprobe_multi entry probes, the trampoline (multi
        entry, fentry, fmod_ret, the body, fexit, multi exit), kretprobes and
        kprobe_multi return probes. Returns the (possibly modified) return
        value, typed as the function's return type.

        :raises NotFoundError: unknown function.
        :raises BpfmuxError: wrong number of arguments.
        """
        f = self.function(function)
        if len(args) != f.nargs:
            raise BpfmuxError(f"{f.name} takes {f.nargs} arguments, got {len(args)}")
        regs = tuple(a & U64 for a in args)
        probes = (f, False) in self._kprobe_events or (f, True) in self._kprobe_events or f in self._fprobes
        sessions = self._kprobe_entry(f, regs) if probes else []
        ret = self.policy.call(f, regs)
        if probes:
            self._kprobe_return(f, regs, ret, sessions)
        return f.ret.from_u64(ret) if f.ret.size else 0

    def kprobe_hit(self, function: str | KernelFunction, *args: int, ret: int | None = None) -> None:
        """Fire only the probes of ``function``: entry probes, or return probes when ``ret`` is given."""
        f = self.function(function)
        regs = tuple(a & U64 for a in args)
        if ret is None:
            self._kprobe_entry(f, regs)
        else:
            self._kprobe_return(f, regs, ret & U64, None)

    def _kprobe_entry(self, f: KernelFunction, args: tuple[int, ...]) -> list[tuple[KprobeMultiLink, Any]]:
        ev = self._kprobe_events.get((f, False))
        if ev is not None and ev.array.items:
            ctx = kprobe_regs(f.addr, args, full=True, sp=KSTACK_TOP)
            for prog, _, cookie in list(ev.array.items):
                prog.run(ctx, context=RunContext(tracing=FuncCall(f.addr, args), cookie=cookie))
            ev.hits += 1
        sessions = []
        space = self.vm.space
        for link in list(self._fprobes.get(f, ())):
            if link.retprobe and not link.session:
                continue
            ctx = kprobe_regs(f.addr, args, full=False, sp=KSTACK_TOP)
            rc = RunContext(tracing=FuncCall(f.addr, args), cookie=link.cookies.get(f.addr, 0))
            slot = None
            if link.session:  # the u64 bpf_session_cookie() points at, kept from entry to return
                slot = space.map(bytearray(8), f"session cookie of {link.program.name}", "kernel", True)
                rc.session_cookie = slot.base
            r0 = link.program.run(ctx, context=rc)
            if slot is not None:
                if r0 == 0:
                    sessions.append((link, slot))
                else:
                    space.unmap(slot)
        return sessions

    def _kprobe_return(self, f: KernelFunction, args: tuple[int, ...], ret: int,
                       sessions: list[tuple[KprobeMultiLink, Any]] | None) -> None:
        ev = self._kprobe_events.get((f, True))
        if ev is not None and ev.array.items:
            ctx = kprobe_regs(f.addr, args, full=True, ret=ret, sp=KSTACK_TOP)
            for prog, _, cookie in list(ev.array.items):
                prog.run(ctx, context=RunContext(tracing=FuncCall(f.addr, args, ret), cookie=cookie))
            ev.hits += 1
        pending = dict(sessions or ())
        try:
            for link in list(self._fprobes.get(f, ())):
                if link.session:
                    if link not in pending:
                        continue
                elif not link.retprobe:
                    continue
                ctx = kprobe_regs(f.addr, args, full=False, ret=ret, sp=KSTACK_TOP)
                rc = RunContext(tracing=FuncCall(f.addr, args, ret), cookie=link.cookies.get(f.addr, 0),
                                session_is_return=True)
                if link.session:
                    rc.session_cookie = pending[link].base
                link.program.run(ctx, context=rc)
        finally:
            for slot in pending.values():
                self.vm.space.unmap(slot)

    # -- tracepoints -----------------------------------------------------------

    def tracepoint(self, name: str) -> TraceEvent:
        """The tracepoint ``system:event`` (or ``system/event``, or a raw
        tracepoint name such as ``sched_switch``/``sys_enter``).

        :raises NotFoundError: the kernel's formats do not know it.
        """
        key = self._tp_key(name)
        ev = self._events.get(key)
        if ev is None:
            system, event = key.split(":", 1)
            fmt = load_format(system, event)
            ev = self._events[key] = TraceEvent(key, ProgType.TRACEPOINT, fmt)
        return ev

    def _tp_key(self, name: str) -> str:
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

    def fire(self, tracepoint: str, *args: int, **fields: Any) -> int:
        """Hit a tracepoint; returns how many programs ran.

        Tracepoint programs (through perf events) get the record laid out
        from ``fields`` by the tracepoint's format; raw_tp/tp_btf programs get
        ``args`` (the ``TP_PROTO`` arguments, as u64). Probes run in
        registration order.

        :raises NotFoundError: unknown tracepoint.
        :raises BpfmuxError: a field the tracepoint does not have.
        """
        ev = self.tracepoint(tracepoint)
        ev.hits += 1
        ran = 0
        record: bytearray | None = None
        raw: bytearray | None = None
        task = self.vm.task
        for kind, owner in list(ev.probes):
            if kind == "perf":
                if record is None:
                    record = tracepoint_record(ev.format, fields, pid=task.pid)  # type: ignore[arg-type]
                for prog, _, cookie in list(ev.array.items):
                    prog.run(record, context=RunContext(cookie=cookie))
                    ran += 1
            else:
                if raw is None:
                    raw = bytearray(struct.pack(f"<{max(len(args), 1)}Q", *([a & U64 for a in args] or [0])))
                owner.program.run(raw, context=RunContext(cookie=owner.cookie))  # type: ignore[attr-defined]
                ran += 1
        return ran

    # -- perf events -------------------------------------------------------------

    def perf_event_open(self, *, tracepoint: str | None = None, kprobe: str | None = None,
                        kretprobe: str | None = None, software: str | None = None,
                        sample_period: int = 1) -> EmuPerfEvent:
        """Open an emulated perf event on a tracepoint, a kprobe or a
        sampling (software/hardware) source.

        :raises NotFoundError: unknown tracepoint or function.
        :raises BpfmuxError: not exactly one source given.
        """
        given = [x for x in (tracepoint, kprobe, kretprobe, software) if x is not None]
        if len(given) != 1:
            raise BpfmuxError("give exactly one of tracepoint=, kprobe=, kretprobe=, software=")
        if tracepoint is not None:
            pe = EmuPerfEvent(self, self.tracepoint(tracepoint))
        elif software is not None:
            pe = EmuPerfEvent(self, None, sampling={"event": software, "sample_period": sample_period})
        else:
            f = self.function(kprobe or kretprobe)  # type: ignore[arg-type]
            ret = kretprobe is not None
            ev = self._kprobe_events.get((f, ret))
            if ev is None:
                ev = self._kprobe_events[(f, ret)] = TraceEvent(
                    f"{'kretprobe' if ret else 'kprobe'}:{f.name}", ProgType.KPROBE, func=f, retprobe=ret)
            pe = EmuPerfEvent(self, ev)
        self._perf_events.add(pe)
        return pe

    def perf_sample(self, event: EmuPerfEvent, *, regs: Mapping[str, int] | None = None,
                    sample_period: int | None = None, addr: int = 0) -> int | None:
        """Deliver one sample to a sampling perf event; returns the program's r0 (``None`` without one)."""
        if event.prog is None:
            return None
        period = sample_period if sample_period is not None else event.sampling.get("sample_period", 1)
        return event.prog.run(perf_event_data(regs, period, addr), context=RunContext(cookie=event.cookie))

    # -- attaching ------------------------------------------------------------

    def attach(self, prog: EmulatedProgram, target: str | None = None, *, cookie: int = 0,
               event: EmuPerfEvent | None = None, **options: Any) -> api.Link:
        """Attach ``prog`` as its section says (``target`` overrides the section's target).

        :raises NotSupportedError: a kind the emulated kernel does not model (uprobes…).
        :raises NotFoundError: unknown function or tracepoint.
        :raises BpfError: the kernel's errors (``E2BIG``, ``EEXIST``, ``EINVAL``).
        """
        target = target or prog.target
        pt, at = prog.prog_type, prog.attach_type
        if pt == ProgType.TRACING:
            if prog.is_multi:
                if not target:
                    raise BpfmuxError(f"{prog.name}: a multi program needs a function glob")
                return self.attach_many(prog, [target], **options)
            if at == AttachType.TRACE_RAW_TP:
                return self._raw_link(prog, _need(target, prog), cookie)
            kind = _SINGLE.get(AttachType(at)) if at in set(_SINGLE) else None
            if kind is None:
                raise NotSupportedError(f"tracing attach type {at}", f"{prog.name}: the emulated kernel has no "
                                        f"trampoline for attach type {AttachType(at).name.lower()}")
            f = self.function(_need(target, prog))
            att = Attachment(prog, kind, self.policy.next_seq(), cookie=cookie)
            return TracingLink(self, prog, f, att)
        if pt == ProgType.TRACEPOINT:
            pe = self.perf_event_open(tracepoint=_need(target, prog))
            try:
                return TracepointLink(self, prog, pe, cookie)
            finally:
                pe.close()
        if pt == ProgType.RAW_TRACEPOINT:
            return self._raw_link(prog, _need(target, prog), cookie)
        if pt == ProgType.KPROBE:
            sec = prog.section
            if sec.startswith(("uprobe", "uretprobe", "usdt")):
                raise NotSupportedError("uprobes in the emulated kernel", "the emulated kernel has no user processes")
            if at in (AttachType.TRACE_KPROBE_MULTI, AttachType.TRACE_KPROBE_SESSION):
                return self.attach_many(prog, [_need(target, prog)], retprobe=sec.startswith("kretprobe"))
            f = self.function(_need(target, prog))
            ret = sec.startswith("kretprobe")
            pe = self.perf_event_open(kretprobe=f.name) if ret else self.perf_event_open(kprobe=f.name)
            try:
                return PerfEventLink(self, prog, pe, cookie)
            finally:
                pe.close()
        if pt == ProgType.PERF_EVENT:
            if event is None:
                raise BpfmuxError(f"{prog.name}: perf_event programs attach to a perf event: pass event=")
            return PerfEventLink(self, prog, event, cookie)
        raise NotSupportedError(f"attaching {pt.name.lower()} programs", f"{prog.name}: the emulated kernel "
                                "cannot attach this program type")

    def raw_tp_nargs(self, name: str) -> int | None:
        """Arguments of raw tracepoint ``name`` (its ``TP_PROTO``), from BTF; ``None`` without BTF."""
        if self.btf is None:
            return None
        from ..verifier.objects import _tp_btf_frame

        raw = self.tracepoint(name).name.split(":", 1)[1]
        try:
            return len(_tp_btf_frame(self.btf, raw))
        except NotFoundError:
            return None

    def _raw_link(self, prog: EmulatedProgram, target: str, cookie: int) -> RawTracepointLink:
        ev = self.tracepoint(target)
        nargs = self.raw_tp_nargs(target)
        if nargs is not None and prog.max_ctx_offset > 8 * nargs:
            raise BpfError(errno.EINVAL, f"{prog.name} reads {prog.max_ctx_offset} bytes of context, but raw "
                                         f"tracepoint {target} has {nargs} arguments ({8 * nargs} bytes)")
        return RawTracepointLink(self, prog, ev, cookie)

    def attach_many(self, prog: EmulatedProgram, targets: Iterable[str], cookies: Sequence[int] | None = None,
                    *, retprobe: bool = False, **options: Any) -> api.MultiLink:
        """Attach ``prog`` to many targets at once (globs allowed).

        Tracing multi programs make one tracing multi link; kprobe programs
        one kprobe_multi link; others one link per target (all or nothing).

        :raises NotFoundError: a target matches nothing.
        :raises BpfError: the kernel's errors; nothing stays attached.
        """
        names = list(targets)
        pt = prog.prog_type
        if pt == ProgType.TRACING and prog.is_multi:
            funcs = self._expand(names)
            return self.link_tracing_multi(prog, [f.btf_id or f for f in funcs], cookies)
        if pt == ProgType.KPROBE and not prog.section.startswith(("uprobe", "uretprobe")):
            funcs = self._expand(names)
            session = prog.attach_type == AttachType.TRACE_KPROBE_SESSION
            return KprobeMultiLink(self, prog, funcs, cookies, retprobe or prog.section.startswith("kretprobe"),
                                   session)
        links: list[api.Link] = []
        expanded = self._expand_tracepoints(names) if pt in (ProgType.TRACEPOINT, ProgType.RAW_TRACEPOINT) else names
        try:
            for i, t in enumerate(expanded):
                links.append(self.attach(prog, t, cookie=cookies[i] if cookies else 0, **options))
        except BaseException:
            for link in links:
                link.close()
            raise
        mech = "raw_tracepoint" if pt == ProgType.RAW_TRACEPOINT else "perf_event" if pt == ProgType.TRACEPOINT \
            else "per-target"
        return GroupLink(links, mech, expanded)

    def _expand(self, patterns: Sequence[str]) -> list[KernelFunction]:
        out: list[KernelFunction] = []
        seen: set[KernelFunction] = set()
        for p in patterns:
            found = self.functions.glob(p)
            if not found:
                raise NotFoundError("kernel function matching", p)
            for f in found:
                if f not in seen:
                    seen.add(f)
                    out.append(f)
        return out

    def _expand_tracepoints(self, patterns: Sequence[str]) -> list[str]:
        out = []
        allev = [e.replace("/", ":") for e in bundled_events()]
        for p in patterns:
            if any(c in p for c in "*?["):
                key = p.replace("/", ":")
                m = [e for e in allev if fnmatch.fnmatchcase(e, key)]
                if not m:
                    raise NotFoundError("tracepoint matching", p)
                out.extend(m)
            else:
                out.append(p)
        return out

    def link_tracing_multi(self, prog: EmulatedProgram, ids: Sequence[int | KernelFunction],
                           cookies: Sequence[int] | None = None) -> TracingMultiLink:
        """``BPF_LINK_CREATE`` of a tracing multi link from BTF ids.

        :raises BpfError: ``EINVAL`` empty list, duplicate id, an id that is
            not a function, a function that cannot take a multi trampoline
            (named), cookies of the wrong count, a program that is not a
            multi program; ``E2BIG`` more than 2**20 ids or a full trampoline.
        """
        if not prog.is_multi:
            raise BpfError(errno.EINVAL, f"{prog.name} is not a multi program (BPF_F_MULTI_FUNC or fentry.multi)")
        if not ids:
            raise BpfError(errno.EINVAL, "a tracing multi link needs at least one function")
        if len(ids) > MAX_MULTI_FUNCS:
            raise BpfError(errno.E2BIG, f"{len(ids)} functions; at most {MAX_MULTI_FUNCS} per link")
        if cookies is not None and len(cookies) != len(ids):
            raise BpfError(errno.EINVAL, f"{len(cookies)} cookies for {len(ids)} functions")
        funcs: list[KernelFunction] = []
        seen: set[KernelFunction] = set()
        with bulk():
            for i in ids:
                if isinstance(i, KernelFunction):
                    f = i
                elif self.functions.has_id(i):
                    f = self.functions.by_id(i)
                else:
                    raise BpfError(errno.EINVAL, f"BTF id {i} is not a function of this kernel")
                if f in seen:
                    raise BpfError(errno.EINVAL, f"{f.name} is listed twice")
                seen.add(f)
                funcs.append(f)
        if prog.attach_type in _MAINLINE_MULTI:
            kind, abi = _MAINLINE_MULTI[AttachType(prog.attach_type)], Abi.MAINLINE
        elif prog.attach_type == AttachType.TRACE_FSESSION_MULTI:
            raise NotSupportedError("fsession.multi in the emulated kernel")
        else:
            kind = ProgKind.MULTI_EXIT if prog.attach_type == AttachType.TRACE_FEXIT else ProgKind.MULTI_ENTRY
            abi = Abi.SEED
        cmap = {f.addr: (cookies[i] if cookies else 0) for i, f in enumerate(funcs)}
        att = Attachment(prog, kind, self.policy.next_seq(), abi=abi, cookies=cmap)
        return TracingMultiLink(self, prog, funcs, att)

    # -- BPF_PROG_TEST_RUN for tracing programs ----------------------------------

    def test_run_tracing(self, prog: EmulatedProgram) -> int:
        """What ``BPF_PROG_TEST_RUN`` does for a fentry/fexit/fmod_ret program:
        call the kernel's test functions (``net/bpf/test_run.c``) through
        their trampolines; returns the test run's ``retval``.

        :raises BpfError: ``EINVAL`` not a tracing program; ``EFAULT`` a test
            function returned the wrong value (as the kernel reports it).
        """
        at = prog.attach_type
        if prog.prog_type != ProgType.TRACING:
            raise BpfError(errno.EINVAL, f"{prog.name} is not a tracing program")
        if at in (AttachType.TRACE_FENTRY, AttachType.TRACE_FEXIT, AttachType.TRACE_FENTRY_MULTI,
                  AttachType.TRACE_FEXIT_MULTI):
            arg = self.alloc(8, "bpf_fentry_test_t")
            retval = self.alloc(4, "retval")
            checks = [
                ("bpf_fentry_test1", (1,), 2), ("bpf_fentry_test2", (2, 3), 5), ("bpf_fentry_test3", (4, 5, 6), 15),
                ("bpf_fentry_test4", (7, 8, 9, 10), 34), ("bpf_fentry_test5", (11, 12, 13, 14, 15), 65),
                ("bpf_fentry_test6", (16, 17, 18, 19, 20, 21), 111), ("bpf_fentry_test7", (0,), 0),
                ("bpf_fentry_test8", (arg,), 0), ("bpf_fentry_test9", (retval,), 0),
            ]
            if "bpf_fentry_test10" in self.functions and self.functions["bpf_fentry_test10"].btf_id:
                checks.append(("bpf_fentry_test10", (0,), 0))
            for name, args, want in checks:
                if self.call(name, *args) != want:
                    raise BpfError(errno.EFAULT, f"{name}{args} did not return {want}")
            return 0
        if at == AttachType.MODIFY_RETURN:
            b = self.alloc(struct.pack("<i", 2), "b")
            side_effect = 0
            ret = self.call("bpf_modify_return_test", 1, b) & 0xFFFF
            if struct.unpack("<i", self.read(b, 4))[0] != 2:
                side_effect += 1
            self.write(b, struct.pack("<i", 2))
            ret = (ret + self.call("bpf_modify_return_test2", 1, b, 3, 4, 5, 6, 7)) & 0xFFFF
            if struct.unpack("<i", self.read(b, 4))[0] != 2:
                side_effect += 1
            return ((side_effect & 0xFFFF) << 16) | ret
        raise BpfError(errno.EINVAL, f"{prog.name}: test runs of attach type {at} are not supported")

    # -- introspection ---------------------------------------------------------

    def sites(self) -> list[SiteInfo]:
        """Every patched function: its image kind, programs and sharing."""
        out = []
        for f, img in sorted(self.policy.sites.items(), key=lambda kv: kv[0].addr):
            out.append(SiteInfo(f.name, f.addr, img.kind, tuple(a.prog.name for a in img.plan(f)), len(img.refs),
                                img.size))
        return out

    @property
    def costs(self) -> dict[str, int]:
        """The trampoline policy's cost counters."""
        return self.policy.costs.as_dict()

    # -- cleanup -------------------------------------------------------------

    def close(self) -> None:
        """Detach every link, close every perf event, free the VM (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for link in list(self._links):
            link.close()
        for pe in list(self._perf_events):
            pe.close()
        self.vm.close()

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def __enter__(self) -> Emulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _need(target: str | None, prog: EmulatedProgram) -> str:
    if not target:
        raise BpfmuxError(f"{prog.name} (section {prog.section!r}) has no attach target; pass one")
    return target


def _arg_info(p: Param) -> ArgInfo:
    return ArgInfo(p.name, p.size or 8, p.pointer, p.target, p.signed)


def _resolve_btf(btf: Any) -> Any:
    from ...btf import Btf

    if btf is None:
        return None
    if btf == "auto":
        try:
            return Btf.vmlinux()
        except (OSError, NotFoundError, ParseError, NotSupportedError):
            return None
    if isinstance(btf, Btf):
        return btf
    if isinstance(btf, bytes | bytearray):
        return Btf.parse(bytes(btf))
    return Btf.load(os.fspath(btf))


def _kallsyms_addresses() -> Any:
    from ...host.kallsyms import KernelSymbols

    try:
        syms = KernelSymbols.load()
    except (OSError, ParseError):  # no /proc/kallsyms: deterministic addresses
        return None
    table = {s.name: s.address for s in syms.symbols if s.address}
    if not table:
        return None
    from .trampoline.functions import TEXT_BASE, TEXT_STRIDE

    return lambda name, index: table.get(name) or (TEXT_BASE + TEXT_STRIDE * index)
