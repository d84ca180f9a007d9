"""The eBPF virtual machine: loads programs, owns maps, runs them on two tiers.

See :mod:`bpfmux.emu` for an overview and examples.
"""

from __future__ import annotations

import errno
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import (
    BpfError,
    BpfmuxError,
    EmulatorFault,
    InvalidArgumentError,
    NotFoundError,
    NotSupportedError,
    VerifierError,
)
from ...isa.flow import regs_written
from ...isa.insn import Insn, canonical, decode
from ...isa.opcodes import ADDR_SPACE_CAST, CALL, LDDW, Alu, CallKind, Class, Pseudo, Source
from ...isa.validity import FlawKind, flaws
from ...uapi import MapType, ProgType
from . import interp
from .accounting import DEFAULT_MEMORY_BUDGET, MemoryBudget
from .helpers import HelperTable
from .maps import Codec, EmuMap, create_map
from .memory import SLOT_SHIFT, AddressSpace, Region
from .native import runner as _native
from .runtime import BPF_MAX_LOOPS, STACK_SIZE, Clock, Context, RunContext, RunState, Task

M64 = 0xFFFFFFFFFFFFFFFF
M32 = 0xFFFFFFFF
TIERS = ("checked", "fast", "native")
#: Instructions one run may execute unless the VM is told otherwise: 2**22,
#: well under a second of plain code on the fast tier, about three seconds on
#: the checked one, and seconds of callbacks (raise it for longer runs).
DEFAULT_RUN_BUDGET = 1 << 22


@dataclass
class RunResult:
    """What one run produced.

    :ivar r0: the program's return value (u64).
    :ivar ctx: the context buffer's contents after the run (``None`` when
        the run had no context).
    :ivar insns: instructions executed: exact on the checked tier; on the
        fast tier those of every block entered (a block cut short by a
        tail call counts whole); on the native tier too, but there a call
        ends a block, so only a legacy packet load that ends the run can
        leave a block counted whole.
    :ivar tier: the tier that ran it.
    """

    r0: int
    ctx: bytes | None
    insns: int | None
    tier: str

    @property
    def retval(self) -> int:
        """``r0`` as the kernel's test run reports it (low 32 bits)."""
        return self.r0 & M32

    @property
    def r0_signed(self) -> int:
        """``r0`` as a signed 64-bit number."""
        return self.r0 - (1 << 64) if self.r0 >> 63 else self.r0


class EmuProgram:
    """A program loaded into a :class:`VM`.

    :ivar name: its name; :ivar prog_type: its :class:`~bpfmux.uapi.ProgType`.
    :ivar fd: its emulated fd (what prog arrays store); :ivar id: its id.
    :ivar insns: the instructions as given (relocations unresolved).
    :ivar code: one ``(opcode, dst, src, off, imm)`` tuple per slot, with
        ``lddw`` pseudo loads resolved to addresses.
    :ivar slots: the instruction starting at each slot as the VM runs it
        (see :func:`runnable`), ``None`` where none can run (code for
        :mod:`bpfmux.isa.flow`).
    :ivar code_addr: address of slot 0 (``BPF_PSEUDO_FUNC`` addresses are
        ``code_addr + 8 * slot``).
    :ivar entries: slots where functions start (0, call and callback targets).
    """

    def __init__(self, vm: VM, insns: Sequence[Insn], name: str, prog_type: int, tier: str | None,
                 fd_array: Sequence[int] | None, expected_attach_type: int = 0) -> None:
        self.vm = vm
        self.name = name
        self.prog_type = prog_type
        self.expected_attach_type = expected_attach_type
        self.insns = list(insns)
        self.tier = tier
        self._closed = False
        self.code_addr = vm.space.add_handle(self)
        self.code: list[tuple[int, int, int, int, int]] = []
        self.slots: list[Insn | None] = []
        self.invalid: dict[int, str] = {}
        self.entries: set[int] = {0}
        try:
            self._prepare(fd_array)
        except BaseException:
            vm.space.remove_handle(self.code_addr)
            raise
        self.fd, self.id = vm._register_prog(self)
        self._fast: dict[int, Callable[..., int]] | None = None
        self._fast_version: object = None
        self._entry: Callable[[int, Context | None], int] | None = None
        self._fast_source: str | None = None
        self._native: Any = None  # (version, compiled code or why none): bpfmux.emu.vm.native.runner.compiled

    # -- loading ------------------------------------------------------------

    def _prepare(self, fd_array: Sequence[int] | None) -> None:
        code = self.code
        slots = self.slots
        self._nslots = sum(i.size for i in self.insns)
        for insn in self.insns:
            pc = len(code)
            insn, problem = runnable(insn)
            op, dst, src, off, imm = insn.opcode, insn.dst, insn.src, insn.off, insn.imm
            slots.append(None if problem is not None else insn)
            if problem is not None:
                self.invalid[pc] = problem
                code.append((interp.INVALID, 0, 0, 0, 0))
            elif op == LDDW:
                code.append((op, dst, 0, off, self._resolve_lddw(pc, src, imm & M64, fd_array)))
            else:
                code.append((op, dst, src, off, imm))
                if op == CALL and src == CallKind.PSEUDO_CALL:
                    self.entries.add(pc + 1 + imm)
            if op == LDDW:
                code.append((interp.MIDDLE_OF_LDDW, 0, 0, 0, 0))
                slots.append(None)
        for pc in list(self.entries):
            if not 0 <= pc < len(code):
                self.entries.discard(pc)

    def _resolve_lddw(self, pc: int, src: int, imm: int, fd_array: Sequence[int] | None) -> int:
        vm = self.vm
        if src == 0:
            return imm
        if src in (Pseudo.MAP_FD, Pseudo.MAP_VALUE, Pseudo.MAP_IDX, Pseudo.MAP_IDX_VALUE):
            ref = imm & M32
            if src in (Pseudo.MAP_IDX, Pseudo.MAP_IDX_VALUE):
                if fd_array is None or ref >= len(fd_array):
                    raise VerifierError(errno.EINVAL, f"{self.name}: insn {pc} refers to fd_array[{ref}] but "
                                        "no such fd_array entry was given (load(..., fd_array=))",
                                        program=self.name)
                ref = fd_array[ref]
            mp = vm._fds.get(ref)
            if not isinstance(mp, EmuMap):
                raise VerifierError(errno.EBADF, f"{self.name}: insn {pc}: fd {ref} is not a map of this VM; "
                                    "create maps with VM.create_map() and relocate with their .fd",
                                    program=self.name)
            if src in (Pseudo.MAP_FD, Pseudo.MAP_IDX):
                return mp.handle
            off = imm >> 32
            return mp.direct_value_addr(off)
        if src == Pseudo.FUNC:
            rel = imm & M32
            if rel & 0x80000000:
                rel -= 1 << 32
            target = pc + 1 + rel
            if not 0 <= target < self._nslots:
                raise VerifierError(errno.EINVAL, f"{self.name}: insn {pc}: function address points outside "
                                    "the program", program=self.name)
            self.entries.add(target)
            return self.func_addr(target)
        if src == Pseudo.BTF_ID:
            addr = vm.ksym_address(imm & M32)
            if addr is None:
                raise NotSupportedError("ksym", f"{self.name}: insn {pc} loads kernel symbol BTF id "
                                        f"{imm & M32}; give its address in VM.ksyms")
            return addr
        raise VerifierError(errno.EINVAL, f"{self.name}: insn {pc}: unknown lddw pseudo source {src}",
                            program=self.name)

    # -- running ---------------------------------------------------------------

    def run(self, ctx: bytes | bytearray | memoryview | None = None, *, tier: str | None = None,
            context: RunContext | None = None, regs: Mapping[int, int] | None = None, ctx_offset: int = 0,
            ctx_writable: bool = True) -> RunResult:
        """Run the program once.

        :param ctx: the context. ``bytes`` are copied; a ``bytearray`` (or
            writable ``memoryview``) is mapped as is, so the program's writes
            land in it. ``r1`` points at byte ``ctx_offset`` of it.
        :param tier: ``"checked"``, ``"fast"`` or ``"native"`` (default: the
            program's, else the VM's; ``"native"`` runs on the fast tier when
            the program cannot be compiled natively, and the result's
            ``tier`` says so).
        :param context: per-call context (traced call, cookie, task, CPU…).
        :param regs: initial values of r1-r5 (override the ``ctx`` pointer).
        :param ctx_writable: map the context read-only when false.
        :raises EmulatorFault: the program faulted.
        :raises BpfmuxError: bad arguments (unknown tier, closed program).
        """
        if self._closed:
            raise BpfmuxError(f"program {self.name!r} is closed")
        tier = tier or self.tier or self.vm.tier
        if tier not in TIERS:
            raise BpfmuxError(f"unknown tier {tier!r}; use one of {', '.join(TIERS)}")
        vm = self.vm
        space = vm.space
        region: Region | None = None
        buf: bytearray | memoryview | None = None
        if ctx is not None:
            buf = ctx if isinstance(ctx, bytearray | memoryview) and ctx_writable else bytearray(ctx)
            region = space.map(buf, f"{self.name}:ctx", "ctx", ctx_writable)
        args = [0, 0, 0, 0, 0]
        if region is not None:
            args[0] = region.base + ctx_offset
        if regs:
            for r, v in regs.items():
                if not 1 <= r <= 5:
                    raise BpfmuxError(f"regs may set r1-r5 only, not r{r}")
                args[r - 1] = v & M64
        try:
            r0, rs, tier = self._execute(tier, args, context)
        finally:
            if region is not None:
                space.unmap(region)
        executed = rs.insns if tier == "checked" else vm.run_budget - rs.left
        return RunResult(r0 & M64, None if buf is None else bytes(buf), executed, tier)

    def _execute(self, tier: str, args: list[int], context: Context | None) -> tuple[int, RunState, str]:
        """Run the main function on ``tier`` with r1-r5 = ``args``; returns ``(r0, run state, tier run)``."""
        vm = self.vm
        if tier == "native":
            if _native.compiled_or_none(self) is None:
                tier = "fast"  # not compilable natively (or no llvmlite): see native_code()
        rs = RunState(vm, self, tier, context)
        vm._running += 1
        try:
            if tier == "checked":
                r0 = interp.interpret(rs, self, 0, args, 0)
            elif tier == "native":
                r0 = _native.run_function(rs, self, 0, args, 0)
            else:
                r0 = self._run_fast(rs, args)
        finally:
            vm._running -= 1
            rs.finish()
            if not vm._running:
                vm._flush()
        return r0, rs, tier

    def run_at(self, addr: int, context: Context | None = None) -> int:
        """Run once with ``r1 = addr``, a context the caller has mapped (a
        trampoline's frame); returns ``r0``.

        The lean entry of hooks that run programs on every call: no mapping,
        no copy of the context, no :class:`RunResult`; faults, budgets and
        tiers as :meth:`run`. :meth:`entry` is the same as a function.

        :raises EmulatorFault: the program faulted.
        :raises BpfmuxError: the program is closed.
        """
        return self.entry()(addr, context)

    def entry(self) -> Callable[[int, Context | None], int]:
        """:meth:`run_at` as a function bound to this program (made once): what a hook keeps to run it often."""
        run = self._entry
        if run is None:
            run = self._entry = self._make_entry()
        return run

    def _make_entry(self) -> Callable[[int, Context | None], int]:
        prog = self
        vm = self.vm
        pool = vm._run_states

        def run_at(addr: int, context: Context | None) -> int:
            if prog._closed:
                raise BpfmuxError(f"program {prog.name!r} is closed")
            tier = prog.tier or vm.tier
            if tier != "fast":
                return prog._execute(tier, [addr, 0, 0, 0, 0], context)[0] & M64
            fn = prog.fast_function(0)
            rs = pool.pop() if pool else RunState(vm, prog, "fast", context)
            vm._running += 1
            try:
                rs.restart(prog, "fast", context)
                return fn(rs, addr, 0, 0, 0, 0, 0) & M64
            except Exception as e:
                fast_fault(rs, e)
                raise
            finally:
                vm._running -= 1
                try:
                    if rs.reservations or rs.locks or rs.deferred:
                        rs.settle()
                finally:
                    pool.append(rs)
                    if not vm._running and vm._pending:
                        vm._flush()

        return run_at

    def _run_fast(self, rs: RunState, args: list[int]) -> int:
        fn = self.fast_function(0)
        try:
            return fn(rs, args[0], args[1], args[2], args[3], args[4], 0)
        except Exception as e:
            fast_fault(rs, e)
            raise

    def fast_function(self, pc: int) -> Callable[..., int]:
        """The fast tier's compiled function for the function starting at
        slot ``pc`` (compiled on first use, cached; compiled again when the
        VM's helpers, kfuncs or maps changed since: :meth:`VM.code_version`)."""
        fns = self._fast
        version = self.vm.code_version()
        if fns is not None and self._fast_version == version:
            fn = fns.get(pc)
            if fn is not None:
                return fn
        from . import translate

        if fns is None or self._fast_version != version:
            fns = self._fast = translate.compile_program(self)
            self._fast_version = version
        fn = fns.get(pc)
        if fn is None:
            self.entries.add(pc)
            fns = self._fast = translate.compile_program(self)
            fn = fns[pc]
        return fn

    def call_subprogram(self, rs: RunState, pc: int, args: list[int], depth: int) -> int:
        """Run the function at slot ``pc`` with r1-r5 = ``args`` at call
        depth ``depth`` on the run's tier; return its ``r0`` (used for
        callbacks)."""
        if rs.tier == "checked":
            return interp.interpret(rs, self, pc, args, depth)
        if rs.tier == "native":
            return _native.run_function(rs, self, pc, args, depth)
        return self.fast_function(pc)(rs, args[0], args[1], args[2], args[3], args[4], depth)

    # -- misc ------------------------------------------------------------------

    def close(self) -> None:
        """Release the program's fd and code address. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self.vm.space.remove_handle(self.code_addr)
        self.vm._unregister_prog(self)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._closed

    def __enter__(self) -> EmuProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def func_addr(self, slot: int) -> int:
        """The ``BPF_PSEUDO_FUNC`` address of the function at ``slot``."""
        return self.code_addr + 8 * slot

    def __repr__(self) -> str:
        return f"<EmuProgram {self.name!r} fd={self.fd} {len(self.code)} slots>"


def runnable(insn: Insn) -> tuple[Insn, str | None]:
    """The instruction as the VM runs it, and why it never can (``None`` when it can).

    The VM runs every valid encoding (:mod:`bpfmux.isa.validity`) except
    ``addr_space_cast`` (no arenas) and writes to r10. It is lenient where the
    meaning is clear: fields the operation does not use are ignored (set to
    zero in the returned instruction) and a 32-bit ``imm`` may be given
    unsigned. An ``lddw`` of an unknown pseudo source is left to the loader,
    which refuses it.
    """
    insn = canonical(insn)
    unused: dict[str, int] = {}
    for flaw in flaws(insn):
        if flaw.kind is FlawKind.RESERVED:
            if flaw.field != "imm2":  # the loader reads only the low word of a map reference
                unused[flaw.field] = 0
            continue
        if insn.opcode == LDDW and flaw.kind is FlawKind.OPERAND:
            break
        return insn, str(flaw)
    if unused:
        insn = insn.replace(**unused)
    if 10 in regs_written(insn):
        return insn, "r10 (frame pointer) is read-only"
    if insn.opcode == Class.ALU64 | Alu.MOV | Source.X and insn.off == ADDR_SPACE_CAST:
        return insn, "addr_space_cast (arena) is not supported"
    return insn, None


def resolve_function(rs: RunState, addr: int) -> tuple[EmuProgram, int]:
    """``(program, slot)`` of a ``BPF_PSEUDO_FUNC`` address.

    :raises EmulatorFault: ``addr`` is not the address of an instruction.
    """
    prog = rs.space.handle(addr)
    if isinstance(prog, EmuProgram):
        off = addr - prog.code_addr
        if off % 8 == 0 and 0 <= off // 8 < len(prog.code):
            return prog, off // 8
    raise rs.fault(f"{addr:#x} is not the address of a BPF function", addr)


class VM:
    """The emulated kernel's BPF machinery: address space, maps, programs,
    helpers, current task, clock and CPUs.

    :param ncpus: number of emulated CPUs (per-CPU maps have one value each).
    :param cpu: the CPU programs run on unless a :class:`RunContext` says
        otherwise.
    :param tier: default tier, ``"fast"``, ``"checked"`` or ``"native"``
        (see :attr:`tier_in_use`).
    :param seed: seed of ``bpf_get_prandom_u32``.
    :param task: the current task (default pid/tgid 1, comm ``bpfmux-emu``).
    :param clock: the clock (default follows the host's monotonic clock).
    :param helpers: the helper table (default: every built-in helper).

    :ivar trace_log: messages of ``bpf_trace_printk`` and friends.
    :ivar on_trace: called with each such message (optional).
    :ivar kfuncs: BTF id → kfunc implementation (same signature as helpers).
    :ivar ksyms: BTF id → address, for ``lddw`` of kernel symbols.
    :ivar ksym_resolver: ``btf_id -> address | None`` for ids not in
        :attr:`ksyms` (the emulated kernel gives its functions' and
        variables' addresses); what it returns is kept in :attr:`ksyms`.
    :ivar symbolize: ``addr -> name | None`` for ``%pS`` (optional).
    :param memory_budget: bytes the emulated kernel may hold: maps, ring
        buffers, stack frames (default :data:`~.accounting.DEFAULT_MEMORY_BUDGET`,
        1 GiB); what does not fit fails with ``ENOMEM``.
    :param run_budget: instructions one run may execute, callbacks
        (``bpf_loop``, ``bpf_for_each_map_elem``…) and tail calls included
        (default :data:`DEFAULT_RUN_BUDGET`).

    :ivar run_budget: the run budget: a run that executes more instructions
        ends with an :class:`~bpfmux.errors.EmulatorFault` ("run budget of N
        instructions exhausted"); the checked tier stops at the first
        instruction past it, the fast tier at the next loop head or function
        entry. ``max_insns`` is the same value under its former name.
    :ivar memory: the :class:`~.accounting.MemoryBudget` everything above is charged to.
    :ivar max_loop_iterations: no longer used (the run budget bounds loops);
        kept so that code setting it still runs.
    :ivar may_goto_budget: how many ``may_goto`` fall-throughs one run gets
        (the kernel's ``BPF_MAX_LOOPS``, 8M).
    :ivar hz: the tick rate of ``bpf_jiffies64``.
    """

    def __init__(self, *, ncpus: int = 1, cpu: int = 0, tier: str = "fast", seed: int = 0,
                 task: Task | None = None, clock: Clock | None = None, helpers: HelperTable | None = None,
                 run_budget: int = DEFAULT_RUN_BUDGET, memory_budget: int = DEFAULT_MEMORY_BUDGET) -> None:
        if ncpus < 1:
            raise BpfmuxError("a VM needs at least one CPU")
        if run_budget < 1:
            raise InvalidArgumentError(f"run_budget must be at least 1 instruction, not {run_budget}")
        if tier not in TIERS:
            raise BpfmuxError(f"unknown tier {tier!r}; use one of {', '.join(TIERS)}")
        self.memory = MemoryBudget(memory_budget)
        self.space = AddressSpace()
        self.ncpus = ncpus
        self.cpu = cpu
        self.tier = tier
        self.task = task or Task()
        self.clock = clock or Clock()
        self.helpers = helpers if helpers is not None else HelperTable()
        self.random = random.Random(seed)
        self.trace_log: list[str] = []
        self.on_trace: Callable[[str], None] | None = None
        self.kfuncs: dict[int, Callable[..., int]] = {}
        self.kfunc_names: dict[int, str] = {}
        self._kfunc_version = 0
        self._maps_version = 0
        self.ksyms: dict[int, int] = {}
        self.ksym_resolver: Callable[[int], int | None] | None = None
        self.percpu_vars: dict[int, int] = {}  # base address of a per-CPU kernel variable → one CPU's size
        self.symbolize: Callable[[int], str | None] | None = None
        self.run_budget = run_budget
        self.max_loop_iterations = 1 << 24
        self.may_goto_budget = BPF_MAX_LOOPS
        self.hz = 250
        self._fds: dict[int, object] = {}
        self._next_fd = 3
        self._next_map_id = 1
        self._next_prog_id = 1
        self._free_frames: list[Region] = []
        #: finished run states the lean entry (``run_at``) reuses: as many as runs were ever nested
        self._run_states: list[RunState] = []
        self._running = 0
        self._pending: list[Region] = []
        self._closed = False

    @property
    def max_insns(self) -> int:
        """The run budget under its former name (see :attr:`run_budget`)."""
        return self.run_budget

    @max_insns.setter
    def max_insns(self, value: int) -> None:
        self.run_budget = value

    def ksym_address(self, btf_id: int) -> int | None:
        """The address of the kernel symbol with BTF id ``btf_id``:
        :attr:`ksyms`, else :attr:`ksym_resolver` (``None``: unknown)."""
        addr = self.ksyms.get(btf_id)
        if addr is None and self.ksym_resolver is not None:
            addr = self.ksym_resolver(btf_id)
            if addr is not None:
                self.ksyms[btf_id] = addr
        return addr

    @property
    def tier_in_use(self) -> str:
        """The tier programs run on by default: :attr:`tier`, except that
        ``"native"`` without llvmlite runs the fast tier (a program the
        native tier cannot translate also runs there; ``RunResult.tier``
        says per run)."""
        if self.tier == "native":
            from .native import available

            return "native" if available() else "fast"
        return self.tier

    # -- maps ----------------------------------------------------------------

    def create_map(self, map_type: MapType | int, key_size: int, value_size: int, max_entries: int, *,
                   flags: int = 0, name: str = "", inner: EmuMap | None = None, key_codec: Codec | None = None,
                   value_codec: Codec | None = None, map_extra: int = 0) -> EmuMap:
        """Create a map (see :mod:`bpfmux.emu.vm.maps`); its ``fd`` is what
        ``lddw`` map relocations use.

        :raises NotSupportedError: unknown map type.
        :raises BpfError: ``EINVAL`` sizes or flags the kernel would refuse.
        """
        return create_map(self, map_type, key_size, value_size, max_entries, flags=flags, name=name, inner=inner,
                          key_codec=key_codec, value_codec=value_codec, map_extra=map_extra)

    def map_from_spec(self, spec: Any, inner: EmuMap | None = None) -> EmuMap:
        """Create a map from a map spec (an object with ``name``, ``type``
        (or ``map_type``), ``key_size``, ``value_size``, ``max_entries``,
        optional ``flags``/``map_flags``, ``inner`` (a spec), initial
        ``value``/``data``/``contents`` (global data) and ``frozen``), such
        as :class:`bpfmux.obj.MapSpec`.

        :raises NotSupportedError: unknown map type.
        :raises BpfError: the kernel would refuse these parameters.
        """
        mtype = getattr(spec, "type", None)
        if mtype is None:
            mtype = spec.map_type
        flags = getattr(spec, "flags", None)
        if flags is None:
            flags = getattr(spec, "map_flags", 0)
        if inner is None:
            inner_spec = getattr(spec, "inner", None) or getattr(spec, "inner_map", None)
            if inner_spec is not None:
                inner = self.map_from_spec(inner_spec)
        max_entries = spec.max_entries
        if int(mtype) == MapType.PERF_EVENT_ARRAY and max_entries == 0:
            max_entries = self.ncpus  # libbpf: one slot per possible CPU
        mp = self.create_map(mtype, spec.key_size, spec.value_size, max_entries, flags=int(flags or 0),
                             name=spec.name or "", inner=inner)
        data = None
        for attr in ("value", "data", "contents"):
            data = getattr(spec, attr, None)
            if data is not None:
                break
        if isinstance(data, bytes | bytearray) and data and hasattr(mp, "storage"):
            mp.storage[0][: len(data)] = data
        if getattr(spec, "frozen", False) is True:
            mp.freeze()
        return mp

    def map_by_fd(self, fd: int) -> EmuMap:
        """The map with emulated fd ``fd``.

        :raises NotFoundError: no such map.
        """
        obj = self._fds.get(fd)
        if not isinstance(obj, EmuMap):
            raise NotFoundError("map fd", str(fd), "create maps with VM.create_map()")
        return obj

    def prog_by_fd(self, fd: int) -> EmuProgram:
        """The program with emulated fd ``fd``.

        :raises NotFoundError: no such program.
        """
        obj = self._fds.get(fd)
        if not isinstance(obj, EmuProgram):
            raise NotFoundError("program fd", str(fd), "load programs with VM.load()")
        return obj

    @property
    def maps(self) -> list[EmuMap]:
        """Every open map."""
        return [o for o in self._fds.values() if isinstance(o, EmuMap)]

    @property
    def programs(self) -> list[EmuProgram]:
        """Every loaded program."""
        return [o for o in self._fds.values() if isinstance(o, EmuProgram)]

    # -- programs ----------------------------------------------------------------

    def load(self, insns: Sequence[Insn] | bytes, *, name: str = "prog", prog_type: ProgType | int = ProgType.UNSPEC,
             tier: str | None = None, fd_array: Sequence[int] | None = None,
             expected_attach_type: int = 0) -> EmuProgram:
        """Load a program.

        ``insns`` are :class:`~bpfmux.isa.Insn` objects (or raw instruction
        bytes) with map relocations already applied: ``lddw`` with
        ``BPF_PSEUDO_MAP_FD``/``MAP_VALUE`` carrying the fds of maps of this
        VM (e.g. from ``ProgramSpec.instructions(map_fd=...)``), or
        ``MAP_IDX``/``MAP_IDX_VALUE`` indices into ``fd_array``. No
        verification happens here (see :mod:`bpfmux.emu.verifier.core`).

        :raises VerifierError: ``EBADF`` an fd is not a map of this VM,
            ``EINVAL`` a malformed pseudo load.
        :raises NotSupportedError: a kernel symbol load without an address in
            :attr:`ksyms`.
        :raises ParseError: undecodable instruction bytes.
        """
        if self._closed:
            raise BpfmuxError("the VM is closed")
        if isinstance(insns, bytes | bytearray | memoryview):
            insns = decode(bytes(insns), source=name)
        if tier is not None and tier not in TIERS:
            raise BpfmuxError(f"unknown tier {tier!r}; use one of {', '.join(TIERS)}")
        return EmuProgram(self, insns, name, int(prog_type), tier, fd_array, expected_attach_type)

    def code_version(self) -> tuple[int, int, int]:
        """What compiled fast-tier code depends on: the helper table's, the kfuncs' and the maps' versions
        (code compiled under another version is compiled again)."""
        return (self.helpers.version, self._kfunc_version, self._maps_version)

    def register_kfunc(self, btf_id: int, fn: Callable[..., int], name: str | None = None) -> None:
        """Make ``call`` of kfunc ``btf_id`` run ``fn(rs, r1, ..., r5)``."""
        self.kfuncs[btf_id] = fn
        self.kfunc_names[btf_id] = name or str(getattr(fn, "__name__", f"kfunc_{btf_id}"))
        self._kfunc_version += 1

    # -- bookkeeping ----------------------------------------------------------------

    def _new_fd(self, obj: object) -> int:
        fd = self._next_fd
        self._next_fd += 1
        self._fds[fd] = obj
        return fd

    def _register_map(self, mp: EmuMap) -> tuple[int, int, int]:
        mid = self._next_map_id
        self._next_map_id += 1
        return self._new_fd(mp), mid, self.space.add_handle(mp)

    def _unregister_map(self, mp: EmuMap) -> None:
        self._maps_version += 1  # fast-tier code that calls this map's methods directly is rebuilt
        self._fds.pop(mp._fd, None)
        self.space.remove_handle(mp.handle)

    def _register_prog(self, prog: EmuProgram) -> tuple[int, int]:
        pid = self._next_prog_id
        self._next_prog_id += 1
        return self._new_fd(prog), pid

    def _unregister_prog(self, prog: EmuProgram) -> None:
        self._fds.pop(prog.fd, None)

    def _acquire_frame(self) -> Region:
        if self._free_frames:
            return self._free_frames.pop()
        self.memory.charge(STACK_SIZE + 512, "a program stack frame")  # frames stay in the pool until close
        return self.space.map(STACK_SIZE, "stack", "stack", True)

    def _release_frame(self, region: Region) -> None:
        self._free_frames.append(region)

    def retire(self, region: Region) -> None:
        """Unmap ``region`` once no program is running (RCU-like)."""
        if self._running:
            self._pending.append(region)
        else:
            self.space.unmap(region)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        for region in pending:
            self.space.unmap(region)

    def close(self) -> None:
        """Close every map and program. Idempotent."""
        if self._closed:
            return
        for obj in list(self._fds.values()):
            obj.close()  # type: ignore[attr-defined]  # _fds holds maps and programs: both close()
        self._closed = True

    def __enter__(self) -> VM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def address_of(self, obj: EmuMap | EmuProgram) -> int:
        """The handle address of a map or the code address of a program."""
        return obj.handle if isinstance(obj, EmuMap) else obj.code_addr

    def region_at(self, addr: int) -> Region | None:
        """The region containing ``addr`` (see :class:`AddressSpace`)."""
        return self.space.region_at(addr)


__all__ = ["DEFAULT_RUN_BUDGET", "TIERS", "VM", "EmuProgram", "RunResult", "SLOT_SHIFT", "BpfError", "resolve_function"]


def fast_fault(rs: RunState, e: Exception) -> None:
    """In an ``except`` block around fast-tier code: raise the :class:`EmulatorFault` that ``e`` stands for;
    return when ``e`` is to be re-raised as it is (a fault, given its instruction; or not the program's).

    :raises EmulatorFault: ``e`` is a Python error the program's code caused.
    """
    if isinstance(e, EmulatorFault):
        _locate_fault(e)
        return
    fault = _fast_fault(rs, e)
    if fault is not None:
        raise fault from None


def _locate_fault(e: EmulatorFault) -> None:
    """Give a fast-tier fault its instruction (from the traceback being handled)."""
    from . import translate

    translate.locate_fault(e, sys.exc_info()[2])


#: what Python raises in fast-tier code that is the program's fault (bad memory access, …)
_CONVERTIBLE = (KeyError, IndexError, TypeError, ValueError, OverflowError, RecursionError, MemoryError)


def _fast_fault(rs: RunState, e: Exception) -> EmulatorFault | None:
    """The :class:`EmulatorFault` a Python exception in fast-tier code stands for, or ``None`` (a bug to re-raise)."""
    import struct

    from . import translate

    if isinstance(e, (*_CONVERTIBLE, struct.error)):
        return translate.convert_exception(rs, e, sys.exc_info()[2])
    return None
