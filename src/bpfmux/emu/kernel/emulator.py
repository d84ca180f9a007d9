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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import api
from ...abi import ContextLayout, context_for, frame_layout, frame_view_for
from ...abi.tracing import ArgInfo, FrameView
from ...attach import is_glob
from ...errors import (
    BpfError,
    BpfmuxError,
    InvalidArgumentError,
    NotFoundError,
    NotSupportedError,
    ParseError,
    VerifierError,
)
from ...isa.insn import Insn
from ...loader import as_spec
from ...obj.spec import ObjectSpec
from ...uapi import AttachType, BtfKind, MapFlags, MapType, ProgFlags, ProgType
from ..vm.maps import ArrayMap, EmuMap
from ..vm.runtime import RunContext
from .hooks import EmuPerfEvent, TraceEvent, perf_event_data
from .linker import EmulatedLinker
from .links import TracingMultiLink
from .loader import EmulatedLoader
from .objects import EmulatedCollection, EmulatedProgram
from .probes import KSTACK_TOP, USTACK_TOP, ProbeDispatch
from .registry import Registry
from .tracepoints import TracepointRegistry
from .trampoline import FunctionTable, KernelFunction, make_policy
from .trampoline.frame import U64, FramePool
from .trampoline.functions import Param, add_test_functions
from .userspace import UserFunctions

__all__ = ["KSTACK_TOP", "Emulator", "SiteInfo"]


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


class Emulator(api.Kernel):
    """An emulated kernel (:class:`bpfmux.api.Kernel`).

    It delegates to small parts: the VM (:attr:`vm`), the function table
    (:attr:`functions`) and trampoline policy (:attr:`policy`), the
    tracepoints (:attr:`tracepoints`), the kprobe dispatch (:attr:`kprobes`),
    the links and perf events still open (:attr:`registry`), and the linker
    that makes links (:attr:`linker`, what ``program.attach()`` calls).

    :param btf: where the function table and tracing frames come from:
        ``"auto"`` (the running kernel's ``/sys/kernel/btf/vmlinux`` when
        present, else only the built-in test functions), ``None`` (built-in
        test functions only), a :class:`~bpfmux.btf.Btf`, or a path/bytes of a
        BTF blob or an ELF object with ``.BTF``.
    :param policy: trampoline policy: ``clone`` (default), ``filter``,
        ``per-function``.
    :param tier: VM tier, ``fast`` (default), ``checked`` or ``native``
        (LLVM; the fast tier when llvmlite is missing: :attr:`tier` says
        which runs).
    :param verify: verify programs at load (default true).
    :param kallsyms: take function addresses from ``/proc/kallsyms`` when it
        shows real addresses (default false: deterministic addresses).
    :param ncpus: CPUs of the emulated kernel (per-CPU maps keep one value
        each); default: this machine's possible CPUs, as the live kernel.
    :param run_budget: instructions one program run may execute, callbacks
        and tail calls included (default 2**22; see
        :attr:`bpfmux.emu.vm.machine.VM.run_budget`).
    :param memory_budget: bytes the emulated kernel may hold (maps, ring
        buffers, stacks, :meth:`alloc`); default 1 GiB. Past it, creating a
        map or allocating fails with ``BpfError`` ``ENOMEM``.
    :raises ParseError: unknown policy (a ``ValueError``), or malformed BTF.
    :raises InvalidArgumentError: a budget below 1.
    """

    kind = "emulated"

    def __init__(self, btf: Any = "auto", *, policy: str = "clone", tier: str = "fast", verify: bool = True,
                 kallsyms: bool = False, ncpus: int | None = None, run_budget: int | None = None,
                 memory_budget: int | None = None) -> None:
        from ...host.cpus import possible_cpus
        from ..vm.accounting import DEFAULT_MEMORY_BUDGET
        from ..vm.machine import DEFAULT_RUN_BUDGET, VM

        self.policy = make_policy(policy)
        self.vm = VM(tier=tier, ncpus=ncpus if ncpus is not None else possible_cpus(),
                     run_budget=DEFAULT_RUN_BUDGET if run_budget is None else run_budget,
                     memory_budget=DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget)
        self.memory = KernelMemory(self.vm.space)
        self.policy.frames = FramePool(self.vm.space)
        self.verify = verify
        self.btf = _resolve_btf(btf)
        addresses = _kallsyms_addresses() if kallsyms else None
        self.functions = FunctionTable.from_btf(self.btf, addresses) if self.btf is not None else FunctionTable()
        add_test_functions(self.functions, self.memory)
        if self.btf is not None:
            self._register_kfuncs()
        self.vm.ksym_resolver = self._ksym_address
        self.registry = Registry()
        self.tracepoints = TracepointRegistry(self.btf)
        self.kprobes = ProbeDispatch(self.vm.space)
        self.uprobes = ProbeDispatch(self.vm.space, kind="uprobe", multi_full_regs=True, stack_top=USTACK_TOP,
                                     tgid=lambda: self.vm.task.tgid)
        self.user_functions = UserFunctions()
        self.linker = EmulatedLinker(self)
        self._regions: list[Any] = []
        self._closed = False

    def __repr__(self) -> str:
        return f"<Emulator policy={self.policy.name}{' closed' if self._closed else ''}>"

    def _register_kfuncs(self) -> None:
        """Make the kfuncs the emulated kernel implements callable by their BTF ids."""
        from ..vm.helpers.tracing import KFUNCS

        assert self.btf is not None
        for name, fn in KFUNCS.items():
            for fid in self.btf.find_ids(name):
                if self.btf.kind_of(fid) == BtfKind.FUNC:
                    self.vm.register_kfunc(fid, fn, name)

    def _ksym_address(self, btf_id: int) -> int | None:
        """The address an ``lddw`` of BTF id ``btf_id`` loads: a function's
        (``&bpf_fentry_test1``, ``bpf_ksym_exists(kfunc)``), or for a typed
        ``__ksym`` variable zeroed memory of its type's size, allocated once
        (a per-CPU variable, of the ``.data..percpu`` section, one copy per
        CPU, which ``bpf_this_cpu_ptr``/``bpf_per_cpu_ptr`` pick)."""
        if self.functions.has_id(btf_id):
            try:
                return self.functions.by_id(btf_id).addr
            except (NotFoundError, ParseError):
                return None
        if self.btf is None:
            return None
        from ...btf.layout import sizeof
        from ...btf.types import Var

        try:
            t = self.btf[btf_id]
            if not isinstance(t, Var):
                return None
            size = sizeof(self.btf, self.btf[t.type_id])
        except (IndexError, KeyError, ParseError, BpfmuxError):
            return None
        if not self._is_percpu(btf_id):
            return self.alloc(max(size, 8), name=t.name)
        one = max(size, 8)
        base = self.alloc(one * self.vm.ncpus, name=t.name)
        self.vm.percpu_vars[base] = one
        return base

    def _is_percpu(self, var_id: int) -> bool:
        """True when BTF variable ``var_id`` lies in the ``.data..percpu`` section."""
        from ...btf.types import Datasec

        assert self.btf is not None
        for ds_id in self.btf.find_ids(".data..percpu"):
            ds = self.btf[ds_id]
            if isinstance(ds, Datasec) and any(v.type_id == var_id for v in ds.vars):
                return True
        return False

    # -- memory -------------------------------------------------------------

    def alloc(self, data: bytes | int, name: str = "kmem") -> int:
        """Allocate kernel memory (``bytes`` to copy in, or a size); returns its address.

        :raises BpfError: ``ENOMEM`` past the memory budget.
        :raises BpfmuxError: more than 4 GiB, or a negative size.
        """
        size = data if isinstance(data, int) else len(data)
        if size < 0:
            raise InvalidArgumentError(f"cannot allocate {size} bytes")
        self.vm.memory.charge(size, f"kernel memory {name!r}")
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

    # -- the contract: loading ----------------------------------------------------

    def load(self, spec_or_path: ObjectSpec | str | bytes | os.PathLike[str], *,
             programs: Iterable[str] | None = None, kconfig: Mapping[str, object] | None = None,
             log_level: int = 0, partial: bool = False) -> EmulatedCollection:
        """Load an object (see :meth:`bpfmux.api.Kernel.load`): maps created
        (global data filled, ``.rodata`` frozen), programs relocated against
        this emulator's BTF, verified and loaded.

        :param partial: programs that fail are recorded in ``coll.failed``
            with their errors, the others load.
        :raises VerifierError: a program was rejected (``.log`` says why).
        :raises NotFoundError: an attach target or map is missing, or a name
            in ``programs`` is not a program of the object.
        :raises NotSupportedError: something the emulator does not model.
        :raises ParseError: the object is malformed.
        """
        spec = as_spec(spec_or_path)
        coll = EmulatedCollection(spec)
        EmulatedLoader(self, spec, coll).load(programs, kconfig, log_level, partial)
        return coll

    def create_map(self, map_type: MapType | int, key_size: int, value_size: int, max_entries: int, *,
                   name: str = "", flags: MapFlags | int = 0, inner: api.Map | None = None) -> EmuMap:
        """Create one map (see :meth:`bpfmux.api.Kernel.create_map`).

        :raises NotSupportedError: a map type the emulator does not model.
        :raises BpfError: the kernel's refusals (sizes, flags).
        """
        if inner is not None and not isinstance(inner, EmuMap):
            raise InvalidArgumentError(f"inner map {inner!r} is not a map of this emulator")
        return self.vm.create_map(map_type, key_size, value_size, max_entries, flags=int(flags), name=name,
                                  inner=inner)

    def load_program(self, insns: Sequence[Insn] | bytes, prog_type: ProgType | int, *, name: str = "prog",
                     section: str = "", attach_type: AttachType | int | None = None,
                     attach_target: str | None = None, flags: ProgFlags | int = 0, license: str = "GPL",
                     log_level: int = 0, spec: Any = None) -> EmulatedProgram:
        """Load one program from instructions (map fds already in them); see
        :meth:`bpfmux.api.Kernel.load_program`.

        Verified first (unless the emulator was made with ``verify=False``);
        a seed multi program (``BPF_F_MULTI_FUNC``) must be a fentry/fexit
        tracing program (**Decision**: ``BPF_MODIFY_RETURN`` fails ``EINVAL``).

        :raises VerifierError: rejected, with the log.
        :raises NotFoundError: ``attach_target`` is not a function (tracepoint) of this kernel.
        :raises BpfError: ``EINVAL`` a multi program with attach type fmod_ret.
        """
        from ...isa.insn import decode
        from ..verifier.core import KfuncInfo, MapInfo, verify

        ptype = ProgType(prog_type)
        at = AttachType(int(attach_type)) if attach_type is not None else None
        pflags = ProgFlags(int(flags))
        if ProgFlags.MULTI_FUNC in pflags and ptype == ProgType.TRACING:
            if at not in (AttachType.TRACE_FENTRY, AttachType.TRACE_FEXIT):
                raise BpfError(errno.EINVAL, f"{name}: BPF_F_MULTI_FUNC programs must be fentry or fexit; "
                                             "multi programs cannot modify the return value")
        if ptype == ProgType.SYSCALL and ProgFlags.SLEEPABLE not in pflags:
            raise VerifierError(errno.EINVAL, f"loading program {name!r}: the verifier rejected it",
                                log="Syscall programs can only be sleepable\n", program=name)
        insn_list = decode(bytes(insns)) if isinstance(insns, bytes | bytearray) else list(insns)
        max_ctx = 0
        if self.verify:
            maps = {}
            for m in self.vm.maps:
                inner = getattr(m, "inner", None)  # maps of maps only
                inner_info = MapInfo(int(inner.type), inner.key_size, inner.value_size, inner.max_entries,
                                     inner.flags, inner.name) if inner is not None else None
                frozen = None  # a frozen read-only array's value: the kernel reads constants from it
                if isinstance(m, ArrayMap) and m.frozen and int(m.type) == MapType.ARRAY and m.max_entries == 1:
                    frozen = bytes(m.data[: m.value_size])
                maps[m.fd] = MapInfo(int(m.type), m.key_size, m.value_size, m.max_entries, m.flags, m.name, inner_info,
                                     frozen)
            kfuncs: dict[int, KfuncInfo] = {}
            if self.btf is not None:
                from ..verifier.objects import _kfuncs

                kfuncs = _kfuncs(insn_list, self.btf)
            result = verify(insn_list, ptype, attach_type=int(at) if at is not None else None,
                            ctx=self._context(ptype, at, attach_target, pflags), maps=maps, kfuncs=kfuncs,
                            gpl="GPL" in license, flags=int(pflags), name=name,
                            func_info=bool(getattr(spec, "func_info", None)))
            max_ctx = result.max_ctx_offset
        vmprog = self.vm.load(insn_list, name=name, prog_type=ptype, expected_attach_type=int(at or 0))
        prog = EmulatedProgram(self, vmprog, section=section, attach_type=at, attach_target=attach_target,
                               flags=pflags, spec=spec)
        prog.max_ctx_offset = max_ctx
        return prog

    def _context(self, ptype: ProgType, attach_type: int | None, target: str | None, flags: int) -> ContextLayout:
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
        :raises InvalidArgumentError: wrong number of arguments.
        """
        f = function if isinstance(function, KernelFunction) else self.functions[function]
        if len(args) != len(f.params):
            raise InvalidArgumentError(f"{f.name} takes {f.nargs} arguments, got {len(args)}")
        regs = args
        for a in args:
            if not 0 <= a <= U64:
                regs = tuple(a & U64 for a in args)
                break
        probes = self.kprobes
        if probes.events or probes.fprobes:
            probed = probes.probed(f)
            sessions = probes.entry(f, regs) if probed else []
        else:
            probed = False
        policy = self.policy  # policy.call in line: this is every emulated call's path
        policy.costs.calls += 1
        img = policy.sites.get(f)
        ret = f.call_body(regs) if img is None else img.fn(f.addr, regs, f)
        if probed:
            probes.exit(f, regs, ret, sessions)
        if f.raw_ret:
            return ret
        r = f.ret
        return r.from_u64(ret) if r.size else 0

    def kprobe_hit(self, function: str | KernelFunction, *args: int, ret: int | None = None) -> None:
        """Fire only the probes of ``function``: entry probes, or return probes when ``ret`` is given.

        :raises NotFoundError: unknown function.
        """
        f = self.function(function)
        regs = tuple(a & U64 for a in args)
        if ret is None:
            self.kprobes.entry(f, regs)
        else:
            self.kprobes.exit(f, regs, ret & U64, None)

    def user_call(self, target: str, *args: int, ret: int = 0) -> None:
        """A call of a user function by the current task (:attr:`vm.task <bpfmux.emu.vm.machine.VM.task>`):
        its uprobes and uprobe_multi links run on entry, its uretprobes (and
        sessions' return half) with ``ret`` on return.

        :param target: ``BINARY:SYMBOL`` or ``BINARY:0xOFFSET`` (a path or a
            library name, resolved on this machine).
        :raises ParseError: a malformed target.
        :raises NotFoundError: no such binary or symbol.
        """
        f = self.user_functions.resolve(target)
        regs = tuple(a & U64 for a in args)
        if self.uprobes.probed(f):
            sessions = self.uprobes.entry(f, regs)
            self.uprobes.exit(f, regs, ret & U64, sessions)

    def syscall(self, name: str, *args: int, ret: int = 0) -> int:
        """A system call by the current task, as the kernel's syscall path
        shows it: ``raw_syscalls:sys_enter`` (a ``pt_regs`` pointer and the
        number; the record with ``id`` and ``args``), ``syscalls:sys_enter_NAME``,
        the function ``__x64_sys_NAME`` when the function table has it (its
        kprobes and trampolines run, and it returns ``ret``), then the exit
        tracepoints with ``ret``. Returns how many programs the tracepoints ran.

        :raises NotFoundError: an x86-64 syscall bpfmux does not know.
        """
        from .syscalls import emulate_syscall

        return emulate_syscall(self, name, args, ret)

    def sample(self, event: str = "cpu_clock", *, regs: Mapping[str, int] | None = None) -> int:
        """One sample on every open sampling perf event of ``event``
        (``cpu_clock``, ``page_faults``, …); returns how many programs ran."""
        ran = 0
        for pe in list(self.registry.perf_events):
            if isinstance(pe, EmuPerfEvent) and pe.event is None and pe.sampling.get("event") == event:
                ran += self.perf_sample(pe, regs=regs) is not None
        return ran

    # -- tracepoints -----------------------------------------------------------

    def tracepoint(self, name: str) -> TraceEvent:
        """The tracepoint ``system:event`` (or ``system/event``, or a raw
        tracepoint name such as ``sched_switch``).

        :raises NotFoundError: the kernel's formats do not know it.
        """
        return self.tracepoints.get(name)

    def fire(self, tracepoint: str, *args: int, **fields: Any) -> int:
        """Hit a tracepoint; returns how many programs ran.

        Tracepoint programs (through perf events) get the record laid out
        from ``fields`` by the tracepoint's format; raw_tp/tp_btf programs get
        one u64 slot per ``TP_PROTO`` argument (from BTF): ``args`` in order
        (all of them), or else the ``fields`` named after arguments, the
        rest 0 — ``fire("raw_syscalls:sys_enter", id=39)`` gives both kinds
        the syscall number. Probes run in registration order.

        :raises NotFoundError: unknown tracepoint.
        :raises BpfmuxError: a field that is neither in the tracepoint's
            format nor an argument of its prototype, or positional ``args``
            fewer or more than the prototype's when raw programs are attached.
        """
        return self.tracepoints.fire(tracepoint, args, fields, self.vm.task.pid)

    def raw_tp_nargs(self, name: str) -> int | None:
        """Arguments of raw tracepoint ``name`` (its ``TP_PROTO``), from BTF; ``None`` without BTF.

        :raises NotFoundError: unknown tracepoint.
        """
        return self.tracepoints.raw_nargs(name)

    # -- perf events -------------------------------------------------------------

    def perf_event_open(self, *, tracepoint: str | None = None, kprobe: str | None = None,
                        kretprobe: str | None = None, software: str | None = None,
                        sample_period: int = 1) -> EmuPerfEvent:
        """Open an emulated perf event on a tracepoint, a kprobe or a
        sampling (software/hardware) source.

        :raises NotFoundError: unknown tracepoint or function.
        :raises InvalidArgumentError: not exactly one source given.
        """
        given = [x for x in (tracepoint, kprobe, kretprobe, software) if x is not None]
        if len(given) != 1:
            raise InvalidArgumentError("give exactly one of tracepoint=, kprobe=, kretprobe=, software=")
        if tracepoint is not None:
            return EmuPerfEvent(self.registry, self.tracepoints.get(tracepoint))
        if software is not None:
            return EmuPerfEvent(self.registry, None, sampling={"event": software, "sample_period": sample_period})
        f = self.function(given[0])
        return EmuPerfEvent(self.registry, self.kprobes.event(f, kretprobe is not None))

    def perf_sample(self, event: EmuPerfEvent, *, regs: Mapping[str, int] | None = None,
                    sample_period: int | None = None, addr: int = 0) -> int | None:
        """Deliver one sample to a sampling perf event; returns the program's r0 (``None`` without one)."""
        if event.prog is None:
            return None
        period = sample_period if sample_period is not None else event.sampling.get("sample_period", 1)
        return event.prog.run(perf_event_data(regs, period, addr), context=RunContext(cookie=event.cookie))

    # -- what the kernel has ------------------------------------------------------

    def tracepoint_names(self, pattern: str = "*:*") -> list[tuple[str, str]]:
        """The emulated kernel's tracepoints (see :meth:`bpfmux.api.Kernel.tracepoint_names`)."""
        key = pattern.replace("/", ":")
        out = []
        for n in self.tracepoints.names():
            if fnmatch.fnmatchcase(n, key):
                cat, _, name = n.partition(":")
                out.append((cat, name))
        return sorted(out)

    def function_names(self, pattern: str) -> list[str]:
        """Functions of the emulated kernel's table (see :meth:`bpfmux.api.Kernel.function_names`).

        :raises NotFoundError: a glob that matches nothing.
        """
        if not is_glob(pattern):
            return [pattern]
        found = [f.name for f in self.functions.glob(pattern)]
        if not found:
            raise NotFoundError("kernel function", pattern, "the glob matches no function of the emulated kernel")
        return found

    @property
    def tier(self) -> str:
        """The VM tier programs run on (``"native"`` asked without llvmlite: ``"fast"``)."""
        return self.vm.tier_in_use

    def supports(self, feature: str) -> bool:
        """What the emulated kernel models (see :meth:`bpfmux.api.Kernel.supports`):
        every probe kind; tracing programs need its BTF-free test functions or BTF.

        :raises InvalidArgumentError: an unknown feature name.
        """
        if feature not in api.FEATURES:
            raise InvalidArgumentError(f"unknown feature {feature!r}; one of {', '.join(api.FEATURES)}")
        if feature == "btf":
            return self.btf is not None
        return True

    def btf_id(self, name: str, kind: str = "func") -> int:
        """From the emulator's BTF; functions of its table by their ids
        (see :meth:`bpfmux.api.Kernel.btf_id`).

        :raises NotFoundError: no such type.
        """
        if self.btf is not None:
            ids = self.btf.find_ids(name, kind)
            if ids:
                return ids[0]
        if kind == "func" and name in self.functions and self.functions[name].btf_id:
            return self.functions[name].btf_id
        raise NotFoundError(f"kernel {kind}", name, "the emulated kernel's BTF does not have it")

    # -- tracing multi links ------------------------------------------------------

    def link_tracing_multi(self, prog: EmulatedProgram, ids: Sequence[int | KernelFunction],
                           cookies: Sequence[int] | None = None) -> TracingMultiLink:
        """``BPF_LINK_CREATE`` of a tracing multi link from BTF ids.

        :raises BpfError: ``EINVAL`` empty list, duplicate id, an id that is
            not a function, a function that cannot take a multi trampoline
            (named), cookies of the wrong count, a program that is not a
            multi program; ``E2BIG`` more than 2**20 ids or a full trampoline.
        """
        return self.linker.link_tracing_multi(prog, ids, cookies)

    # -- BPF_PROG_TEST_RUN for tracing programs ----------------------------------

    def test_run_tracing(self, prog: EmulatedProgram) -> int:
        """What ``BPF_PROG_TEST_RUN`` does for a fentry/fexit/fmod_ret program:
        call the kernel's test functions (``net/bpf/test_run.c``) through
        their trampolines; returns the test run's ``retval``.

        :raises BpfError: ``EINVAL`` not a tracing program; ``EFAULT`` a test
            function returned the wrong value (as the kernel reports it).
        """
        from .testrun import test_run_tracing

        return test_run_tracing(self, prog)

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
        """Detach every link, close every perf event, free the VM (idempotent).

        :raises BaseException: the first error a close raised, after everything was closed.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self.registry.close_all()
        finally:
            if self.policy.frames is not None:
                self.policy.frames.close()
            self.vm.close()

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed


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
