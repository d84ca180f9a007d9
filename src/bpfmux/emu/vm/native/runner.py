"""Running native code: run state, the region table, the two callbacks.

* :class:`RegionTable` — per VM, a ``ctypes`` array of ``(host pointer,
  readable length, writable length)`` per slot (index ``slot - 0x80000000``).
  Entries are installed the first time generated code misses them (the
  ``bpfmux_mem`` callback), and cleared when the address space unmaps a
  region or changes its protection (:attr:`AddressSpace.listeners`). A
  region whose buffer cannot be exported (a read-only ``memoryview``) is
  never installed: its accesses always take the callback. The table's
  memory is charged to the VM's memory budget as it grows; when the budget
  has no room, the region is not installed and its accesses take the
  callback too (slower, same results and faults).
* :class:`NativeRun` — the ``State`` words of one run (status, tail-call
  result, table pointer and length, run budget left) and the exception a
  callback recorded.
* The run budget: :attr:`RunState.left` while Python runs, state word 14
  while native code runs; :func:`run_function` hands it to native code and
  takes it back, ``bpfmux_call`` does the reverse around helpers that may
  run program code or charge the budget (``bpf_loop``, tail calls, kfuncs,
  helpers registered by the user), so one budget covers the whole run;
  ``K_BUDGET`` is the fault when it is used up.
* ``bpfmux_mem`` / ``bpfmux_call`` — the callbacks; they never let an
  exception cross into native code: they record it, set the status, return 0.
"""

from __future__ import annotations

import ctypes
import struct
import sys
import weakref
from typing import TYPE_CHECKING, Any

from ....errors import BpfError, BpfmuxError, EmulatorFault
from .. import interp
from ..memory import FIRST_SLOT, SLOT_SHIFT, AddressSpace
from ..runtime import MAX_CALL_FRAMES, RunState
from . import codegen, engine

if TYPE_CHECKING:
    from ..accounting import MemoryBudget
    from ..machine import VM, EmuProgram

M64 = 0xFFFFFFFFFFFFFFFF
_ST = {1: struct.Struct("<B"), 2: struct.Struct("<H"), 4: struct.Struct("<I"), 8: struct.Struct("<Q")}
_SIGN = {1: struct.Struct("<b"), 2: struct.Struct("<h"), 4: struct.Struct("<i"), 8: struct.Struct("<q")}
_MASK = {1: 0xFF, 2: 0xFFFF, 4: 0xFFFFFFFF, 8: M64}
#: Slots the table covers (24 bytes each); accesses to later slots take the callback.
TABLE_SLOTS = 1 << 16
_ENTRY = ctypes.c_uint64 * 3
_TABLE_GROW = 256
_CHAR_FROM_BUFFER = ctypes.c_char.from_buffer

_W_BUDGET = codegen.W_BUDGET
_FN = ctypes.PYFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)  # the GIL stays held: callbacks re-enter Python

MESSAGES = codegen.Messages()


class RegionTable:
    """The native view of one :class:`AddressSpace`."""

    def __init__(self, space: AddressSpace, memory: MemoryBudget | None = None) -> None:
        self.space = space
        self.memory = memory
        self.size = 0
        self.array: Any = (ctypes.c_uint64 * 0)()
        self.exports: dict[int, Any] = {}
        self.free_runs: list[NativeRun] = []  # run states to reuse (one per run; nested runs share theirs)
        space.listeners.append(self.invalidate)

    def _grow(self, idx: int) -> bool:
        """Make room for entry ``idx``; False when the memory budget has none."""
        size = min(TABLE_SLOTS, max(idx + 1, self.size * 2, _TABLE_GROW))
        if self.memory is not None:
            try:
                self.memory.charge(24 * (size - self.size), "the native tier's region table")
            except BpfError:
                return False
        new = (ctypes.c_uint64 * (3 * size))()
        ctypes.memmove(new, self.array, 24 * self.size)
        self.array = new
        self.size = size
        for run in _RUNS.values():  # running code reads the table's address from its state
            if run.table is self:
                run.sync()
        return True

    def install(self, slot: int) -> None:
        """Give generated code direct access to the region at ``slot``, when its buffer allows."""
        idx = slot - FIRST_SLOT
        if not 0 <= idx < TABLE_SLOTS:
            return
        region = self.space.regions.get(slot)
        if region is None or not len(region.buf) or slot in self.exports:
            return
        try:
            view = _CHAR_FROM_BUFFER(region.buf)  # holds the buffer (no resizing while mapped)
        except (TypeError, ValueError, BufferError):
            return  # read-only memory: the callback serves it
        if idx >= self.size and not self._grow(idx):
            return  # no memory for a larger table: the callback serves this region
        self.exports[slot] = view
        n = len(region.buf)
        a = self.array
        a[3 * idx] = ctypes.addressof(view)
        a[3 * idx + 1] = n
        a[3 * idx + 2] = n if slot in self.space.wbufs else 0

    def invalidate(self, slot: int) -> None:
        """Forget ``slot`` (unmapped or protection changed)."""
        idx = slot - FIRST_SLOT
        if 0 <= idx < self.size:
            a = self.array
            a[3 * idx] = a[3 * idx + 1] = a[3 * idx + 2] = 0
        self.exports.pop(slot, None)


_TABLES: weakref.WeakKeyDictionary[Any, RegionTable] = weakref.WeakKeyDictionary()


def table_of(vm: VM) -> RegionTable:
    t = _TABLES.get(vm)
    if t is None:
        t = _TABLES[vm] = RegionTable(vm.space, vm.memory)
    return t


class NativeRun:
    """One run's state words and the callback's recorded exception."""

    __slots__ = ("exc", "rs", "state", "table")

    def __init__(self, rs: RunState, table: RegionTable) -> None:
        self.rs = rs
        self.table = table
        self.state = (ctypes.c_uint64 * 16)()
        self.exc: BaseException | None = None
        self.sync()

    def sync(self) -> None:
        t = self.table
        self.state[2] = ctypes.addressof(t.array)
        self.state[3] = t.size


_RUNS: dict[int, NativeRun] = {}  # state address -> run
_ACTIVE: list[NativeRun] = []  # the runs under way, innermost last


def _lost(unraisable: Any) -> None:
    """``sys.unraisablehook`` while native code runs: an exception raised
    before a callback's own ``try`` (a signal handler runs at the first
    instruction of the callback: Ctrl-C) would be printed and dropped by
    ``ctypes``; it ends the run instead."""
    if _ACTIVE and unraisable.object in (_mem, _call, _MEM_CB, _CALL_CB) and unraisable.exc_value is not None:
        run = _ACTIVE[-1]
        run.exc = unraisable.exc_value
        run.state[0] = codegen.ST_FAULT
        return
    _PREV_HOOK[-1](unraisable)


_PREV_HOOK: list[Any] = []
_BY_RS: dict[int, NativeRun] = {}  # id(RunState) -> run


def _record(run: NativeRun, exc: BaseException, pc: int | None = None) -> int:
    if isinstance(exc, EmulatorFault) and exc.pc is None and pc is not None and pc >= 0:
        exc.pc = pc
        exc.args = (f"insn {pc}: {exc.args[0]}",) + exc.args[1:]
    run.exc = exc
    run.state[0] = codegen.ST_FAULT
    return 0


_MEM_ARGS = struct.Struct("<QQQqQQ")
_CALL_ARGS = struct.Struct("<QQqqQQQQQ")
_ENTRY_ARGS = struct.Struct("<qQQQQQQ")


def _mem(st: int) -> int:
    run = _RUNS[st]
    addr, size, flags, pc, value, extra = _MEM_ARGS.unpack_from(run.state, 32)
    try:
        space = run.table.space
        kind = flags & 0xFF
        write = kind != codegen.A_READ
        buf, off = space.check(addr, size, write, pc)
        run.table.install(addr >> SLOT_SHIFT)
        st_ = _ST[size]
        if kind == codegen.A_READ:
            return int(st_.unpack_from(buf, off)[0])
        if kind == codegen.A_WRITE:
            st_.pack_into(buf, off, value & _MASK[size])
            return 0
        if kind & 4:  # access check only (an unknown atomic operation faults next)
            return 0
        imm = flags >> 8
        mask = _MASK[size]
        old = int(st_.unpack_from(buf, off)[0])
        v = value & mask
        if imm == 0xF1:
            if old == extra & mask:
                st_.pack_into(buf, off, v)
            return old
        if imm == 0xE1:
            st_.pack_into(buf, off, v)
            return old
        base = imm & ~1
        new = {0x00: (old + v) & mask, 0x40: old | v, 0x50: old & v, 0xA0: old ^ v}[base]
        st_.pack_into(buf, off, new)
        return old
    except BaseException as e:
        return _record(run, e, pc)


def _give(run: NativeRun, left: int) -> None:
    """Hand the run budget ``left`` to native code."""
    run.state[_W_BUDGET] = left & M64


def _take(run: NativeRun) -> int:
    """The run budget native code left."""
    left = run.state[_W_BUDGET]
    return left - (1 << 64) if left >> 63 else left


_RUNS_CODE: dict[Any, bool] = {}  # helper function -> whether it may run program code or charge the budget


def _runs_code(fn: Any) -> bool:
    known = _RUNS_CODE.get(fn)
    if known is None:
        from ..translate import _may_run_code

        known = _RUNS_CODE[fn] = _may_run_code(fn)
    return known


def _call(st: int) -> int:
    run = _RUNS[st]
    state = run.state
    kind, ident, pc, depth, r1, r2, r3, r4, r5 = _CALL_ARGS.unpack_from(state, 32)
    rs = run.rs
    if kind == 0 and ident != 12:  # the common case first: a helper
        fn = rs.vm.helpers.table.get(ident)
        if fn is not None:
            rs.depth = depth
            rs.pc = pc
            try:
                if not _RUNS_CODE.get(fn, True) or not _runs_code(fn):  # one dict look-up on the hot path
                    return int(fn(rs, r1, r2, r3, r4, r5)) & M64
                rs.left = _take(run)
                r0 = int(fn(rs, r1, r2, r3, r4, r5)) & M64
                _give(run, rs.left)
                return r0
            except BaseException as e:
                return _record(run, e, pc)
    if kind == codegen.K_BUDGET:
        return _record(run, interp.budget_fault(rs.vm.run_budget, pc), pc)
    if kind in (codegen.K_HELPER, codegen.K_KFUNC, codegen.K_CALLX):
        rs.left = _take(run)
        try:
            return _call_out(run, kind, ident, pc, depth, r1, r2, r3, r4, r5)
        finally:
            _give(run, rs.left)
    return _call_out(run, kind, ident, pc, depth, r1, r2, r3, r4, r5)


def _call_out(run: NativeRun, kind: int, ident: int, pc: int, depth: int, r1: int, r2: int, r3: int, r4: int,
              r5: int) -> int:
    rs = run.rs
    try:
        if kind == codegen.K_HELPER or kind == codegen.K_KFUNC:
            vm = rs.vm
            if kind == codegen.K_HELPER:
                fn = vm.helpers.table.get(ident)
                if fn is None:
                    raise EmulatorFault(f"insn {pc}: unknown helper {interp.s32(ident)}; register it with "
                                        "VM.helpers.register()", pc=pc)
            else:
                fn = vm.kfuncs.get(ident)
                if fn is None:
                    raise EmulatorFault(f"insn {pc}: unknown kfunc (BTF id {interp.s32(ident)}); register it with "
                                        "VM.register_kfunc()", pc=pc)
            rs.depth = depth
            rs.pc = pc
            if kind == codegen.K_HELPER and ident == 12:
                tgt: Any = fn(rs, r1, r2, r3, r4, r5)  # the tail-call helper returns the target program or None
                if tgt is None:
                    return 0  # a failed tail call: the program goes on (r0 is left as it was)
                r0 = run_function(rs, tgt, 0, [r1, r2, r3, r4, r5], depth)
                run.state[1] = r0 & M64
                run.state[0] = codegen.ST_TAIL
                return 0
            return int(fn(rs, r1, r2, r3, r4, r5)) & M64
        if kind == codegen.K_FRAME:  # the frame of a bpf-to-bpf call at depth ``ident``
            base, _buf = rs.frame(ident)
            run.table.install(base >> SLOT_SHIFT)
            return base
        if kind == codegen.K_FAULT:
            text, fpc = MESSAGES.items[ident]
            raise EmulatorFault(text, pc=fpc)
        if kind == codegen.K_MAYGOTO:
            if rs.loops_left <= 0:
                return 1
            rs.loops_left -= 1
            return 0
        if kind == codegen.K_LDPKT:
            where = interp.s32(r2) + (interp.s32(r1) if r3 else 0)
            value = interp.ld_packet(rs, pc, ident, where)
            if value is None:
                run.state[0] = codegen.ST_END
                return 0
            return value
        if kind == codegen.K_CALLX:
            return _callx(run, pc, ident, [r1, r2, r3, r4, r5], depth)
        raise BpfmuxError(f"native tier: unknown callback kind {kind}")
    except BaseException as e:
        return _record(run, e, pc)


def _callx(run: NativeRun, pc: int, target: int, args: list[int], depth: int) -> int:
    from ..machine import EmuProgram

    rs = run.rs
    callee = rs.space.handle(target) if target >= 1 << 32 else None
    if callee is None:
        fn = rs.vm.helpers.table.get(target)
        if fn is None:
            raise EmulatorFault(f"insn {pc}: unknown helper {target}; register it with VM.helpers.register()",
                                pc=pc)
        if target == 12:
            raise EmulatorFault(f"insn {pc}: a tail call through callx is not supported", pc=pc)
        rs.depth = depth
        rs.pc = pc
        return int(fn(rs, *args)) & M64
    if not isinstance(callee, EmuProgram):
        raise EmulatorFault(f"insn {pc}: callx to {target:#x}, which is not code", pc=pc, address=target)
    off = target - callee.code_addr
    if off % 8 or not 0 <= off // 8 < len(callee.code):
        raise EmulatorFault(f"insn {pc}: callx to {target:#x}, not an instruction of {callee.name}", pc=pc,
                            address=target)
    if depth + 1 >= MAX_CALL_FRAMES:
        raise EmulatorFault(f"insn {pc}: call depth exceeds {MAX_CALL_FRAMES} frames", pc=pc)
    return run_function(rs, callee, off // 8, args, depth + 1)


_MEM_CB = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(_mem)
_CALL_CB = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(_call)
SYMBOLS = {
    "bpfmux_cb_mem": ctypes.cast(_MEM_CB, ctypes.c_void_p).value or 0,
    "bpfmux_cb_call": ctypes.cast(_CALL_CB, ctypes.c_void_p).value or 0,
}


class Compiled:
    """A program's native functions: slot → callable, and the compile time
    (0 when identical code was compiled before)."""

    def __init__(self, functions: dict[int, Any], seconds: float, module: engine.NativeModule) -> None:
        self.functions = functions
        self.seconds = seconds
        self.module = module  # keeps the machine code alive


class Fallback:
    """Why a program runs on the fast tier instead."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


def compiled(prog: EmuProgram) -> Compiled | Fallback:
    """The native code of ``prog`` (compiled on first use, cached per program),
    or why there is none."""
    hit = prog._native
    version = len(prog.entries)  # entries only grow
    if hit is not None and hit[0] == version:
        return hit[1]
    result: Compiled | Fallback
    if not engine.available():
        result = Fallback("llvmlite is not installed (pip install bpfmux[native])")
    else:
        try:
            gen = codegen.ModuleGen(prog, "P_", MESSAGES)
            ir, entries = gen.build(sorted(prog.entries))
            module, prefix, new = engine.compile_ir(ir, SYMBOLS)
        except codegen.Unsupported as e:
            result = Fallback(str(e))
        else:
            fns = {e: _FN(module.addresses[f"{prefix}e{e}"]) for e in entries}
            result = Compiled(fns, module.seconds if new else 0.0, module)
    prog._native = (version, result)
    return result


def compiled_or_none(prog: EmuProgram) -> Compiled | None:
    """:func:`compiled` when it compiled, else ``None``."""
    c = compiled(prog)
    return c if isinstance(c, Compiled) else None


def _run_fast(rs: RunState, prog: EmuProgram, pc: int, args: list[int], depth: int) -> int:
    """A function of a program the native tier cannot run, on the fast tier
    (a tail-call or ``callx`` target): Python errors of its generated code
    become the fault the fast tier reports."""
    from .. import translate

    try:
        return prog.fast_function(pc)(rs, *args, depth)
    except EmulatorFault as e:
        translate.locate_fault(e, sys.exc_info()[2])
        raise
    except (KeyError, IndexError, TypeError, ValueError, OverflowError, RecursionError, struct.error) as e:
        fault = translate.convert_exception(rs, e, sys.exc_info()[2])
        if fault is None:
            raise
        raise fault from None


def run_function(rs: RunState, prog: EmuProgram, pc: int, args: list[int], depth: int) -> int:
    """Run the function of ``prog`` at slot ``pc`` in run ``rs`` (natively
    when it compiles, else on the fast tier); return its ``r0``.

    :raises EmulatorFault: the program faulted.
    """
    comp = compiled(prog)
    fn = comp.functions.get(pc) if isinstance(comp, Compiled) else None
    if fn is None and isinstance(comp, Compiled):
        prog.entries.add(pc)
        comp = compiled(prog)
        fn = comp.functions.get(pc) if isinstance(comp, Compiled) else None
    if fn is None:
        return _run_fast(rs, prog, pc, args, depth)
    run = _BY_RS.get(id(rs))
    own = run is None
    if run is None:
        table = table_of(rs.vm)
        if table.free_runs:
            run = table.free_runs.pop()
            run.rs = rs
            run.sync()
        else:
            run = NativeRun(rs, table)
        addr = ctypes.addressof(run.state)
        _RUNS[addr] = run
        _BY_RS[id(rs)] = run
        _ACTIVE.append(run)
        _PREV_HOOK.append(sys.unraisablehook)
        sys.unraisablehook = _lost
    else:
        addr = ctypes.addressof(run.state)
    table = run.table
    exports = table.exports
    base, _buf = rs.frame(depth)
    if base >> SLOT_SHIFT not in exports:
        table.install(base >> SLOT_SHIFT)
    a1 = args[0] & M64
    if a1 >> SLOT_SHIFT not in exports:
        table.install(a1 >> SLOT_SHIFT)  # r1 is mostly the context: give the code direct access up front
    try:
        state = run.state
        _ENTRY_ARGS.pack_into(state, 56, depth, a1, args[1] & M64, args[2] & M64, args[3] & M64,
                              args[4] & M64, base + 512)
        _give(run, rs.left)
        r0 = int(fn(addr))
        rs.left = _take(run)
        status = state[0]
        if status:
            run.state[0] = 0
            if status == codegen.ST_END:
                return 0
            exc, run.exc = run.exc, None
            if exc is None:  # pragma: no cover - the status is set only with an exception
                raise BpfmuxError("native tier: a fault without an exception")
            raise exc
        return r0 & M64
    finally:
        if own:
            sys.unraisablehook = _PREV_HOOK.pop()
            _ACTIVE.pop()
            _RUNS.pop(addr, None)
            _BY_RS.pop(id(rs), None)
            run.exc = None
            run.state[0] = 0
            if len(table.free_runs) < 8:
                table.free_runs.append(run)
