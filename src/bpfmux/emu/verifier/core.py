"""The emulated kernel's verifier: reject what the kernel rejects, for the common reasons.

Interface::

    from bpfmux.emu.verifier.core import verify, MapInfo

    result = verify(insns, prog_type, attach_type=None, ctx=None,
                    maps={fd: MapInfo(...)}, helpers=None, kfuncs=None,
                    gpl=True, flags=0, log_level=1, max_insns=1_000_000)

* ``insns``: ``list[bpfmux.isa.Insn]`` (``lddw`` is one ``Insn``; jump
  offsets count 8-byte slots, as in the kernel, and messages name slots).
* ``prog_type`` / ``attach_type``: ``bpfmux.uapi.ProgType`` / ``AttachType``.
* ``ctx``: a :class:`bpfmux.abi.ContextLayout`; default
  :func:`bpfmux.abi.context_for` of the type (tracing programs should pass
  the target's frame, e.g. ``abi.frame_layout(FrameView.FENTRY, args)``).
* ``maps``: what each ``lddw`` map pseudo-immediate (fd, or index for
  ``BPF_PSEUDO_MAP_IDX``) refers to.
* ``helpers``: the helper ids this program may call; default
  :func:`bpfmux.emu.verifier.helpers.helpers_for` (facts of Linux 6.18).
* ``kfuncs``: ``{btf_id: KfuncInfo}`` for ``call`` instructions with
  ``src_reg == BPF_PSEUDO_KFUNC_CALL``; a kfunc not listed is refused.
* ``flags``: program flags (``BPF_F_MULTI_FUNC`` picks the seed multi frame).

It returns a :class:`VerifierResult` (facts the VM may use: stack depth per
subprogram, whether the program loops, the highest context offset read, the
helpers and maps used) or raises :class:`bpfmux.errors.VerifierError` with
``errno`` ``EACCES`` (unsafe program), ``EINVAL`` (malformed program, bad
helper/map use, infinite loop, unreleased reference) or ``E2BIG`` (more than
``max_insns`` instructions processed), a message saying why, and ``.log``:
the last instructions of the failing path, the reason, and the count of
instructions processed.

The model is the kernel's for a privileged (root) loader: bounded loops are
allowed, reading never-written stack is allowed, pointers may be stored to
maps and compared. Abstract interpretation explores every path with register
types (scalar with unsigned/signed bounds and known bits, context, stack,
map value (maybe null), map pointer, ringbuf record, BTF object, function),
8-byte stack slots with register spills, null checks, reference tracking for
ring buffer records, bpf-to-bpf calls and ``bpf_loop``/``for_each_map_elem``
callbacks; explored states are kept at jump targets and a state covered by an
explored one is pruned; an identical state met again on the same path is an
infinite loop.

Not modelled (rejected with a message saying so, or treated conservatively):
packet pointers (``__sk_buff->data``), dynptrs, iterators, spin locks beyond
their argument types, BTF-typed struct field accesses (loads through a
``PTR_TO_BTF_ID`` are allowed at any non-negative offset and give scalars),
global functions are verified per call site like static ones.
"""

from __future__ import annotations

import errno
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ...abi import ContextLayout, context_for
from ...errors import BpfmuxError, VerifierError
from ...isa.disasm import format_kernel, helper_name
from ...isa.insn import Insn
from ...isa.opcodes import LDDW, SIZE_BYTES, Alu, Class, Jmp, Mode
from ...uapi import AttachType, HelperId, MapFlags, MapType, ProgFlags, ProgType
from .alu import branch, is_taken, scalar_alu, scalar_end, scalar_neg, sign_extend
from .cfg import Cfg, Reject, build_cfg
from .helpers import PROTOS, Arg, HelperProto, Ret, helpers_for, map_compatible
from .state import (
    EMPTY_SLOT,
    MAX_BPF_STACK,
    MAX_VAR_OFF,
    NOT_INIT,
    S64_MIN,
    U32,
    U64,
    Frame,
    Reg,
    Slot,
    T,
    VState,
    states_exact,
    states_safe,
    to_signed,
    type_name,
)

__all__ = ["KfuncInfo", "MapInfo", "VerifierResult", "verify"]

#: Default complexity limit (the kernel's ``BPF_COMPLEXITY_LIMIT_INSNS``).
COMPLEXITY_LIMIT = 1_000_000
#: Most call frames (``MAX_CALL_FRAMES``).
MAX_CALL_FRAMES = 8
_SKB_TYPES = {ProgType.SOCKET_FILTER, ProgType.SCHED_CLS, ProgType.SCHED_ACT}
_PRIV_STACK_TYPES = {ProgType.KPROBE, ProgType.TRACEPOINT, ProgType.PERF_EVENT, ProgType.RAW_TRACEPOINT,
                     ProgType.TRACING}


@dataclass(frozen=True, slots=True)
class MapInfo:
    """What the verifier needs to know about a map.

    :ivar type: ``bpfmux.uapi.MapType``.
    :ivar key_size: key size in bytes.
    :ivar value_size: value size in bytes.
    :ivar max_entries: capacity.
    :ivar flags: ``map_flags`` (``BPF_F_RDONLY_PROG`` makes values read-only
        for programs).
    :ivar name: for messages.
    :ivar inner: for maps of maps, the inner map's description.
    """

    type: int
    key_size: int
    value_size: int
    max_entries: int = 1
    flags: int = 0
    name: str = ""
    inner: MapInfo | None = None

    @property
    def readonly(self) -> bool:
        """Programs may not write values (``BPF_F_RDONLY_PROG``)."""
        return bool(self.flags & MapFlags.RDONLY_PROG)


@dataclass(frozen=True, slots=True)
class KfuncInfo:
    """A kernel function callable with ``call`` (``BPF_PSEUDO_KFUNC_CALL``).

    :ivar name: function name.
    :ivar nargs: number of arguments (r1..r{nargs} must be initialized).
    :ivar ret: ``"void"``, ``"scalar"``, ``"ptr"`` (a kernel object, read-only,
        may be NULL) or ``"mem"`` (``mem_size`` writable bytes, e.g. ``u64 *``).
    :ivar mem_size: for ``"mem"``, the size of the pointed-to scalar.
    """

    name: str
    nargs: int = 0
    ret: str = "scalar"
    mem_size: int = 0


@dataclass(frozen=True)
class VerifierResult:
    """An accepted program and what the verifier learned about it.

    :ivar insns_processed: instructions interpreted (the kernel's "processed N insns").
    :ivar stack_depth: bytes of stack each subprogram uses, by subprogram start
        (instruction index).
    :ivar max_stack_depth: deepest combined stack of a call chain (bytes,
        frames rounded up to 16 as the x86-64 JIT does).
    :ivar has_loops: the control-flow graph has a back edge.
    :ivar max_ctx_offset: end of the highest context byte read (raw_tp attach
        checks it against the tracepoint's argument count).
    :ivar helpers: helper ids called.
    :ivar maps: map pseudo-immediates used.
    :ivar subprogs: start index of each subprogram (0 first).
    :ivar total_states: explored states kept.
    :ivar log: the verifier log.
    """

    insns_processed: int
    stack_depth: dict[int, int]
    max_stack_depth: int
    has_loops: bool
    max_ctx_offset: int
    helpers: frozenset[int]
    maps: frozenset[int]
    subprogs: tuple[int, ...]
    total_states: int
    log: str = ""


def verify(insns: list[Insn], prog_type: int, *, attach_type: int | None = None,
           ctx: ContextLayout | None = None, maps: Mapping[int, MapInfo] | None = None,
           helpers: Iterable[int] | None = None, kfuncs: Mapping[int, KfuncInfo] | None = None,
           gpl: bool = True, flags: int = 0, log_level: int = 1, max_insns: int = COMPLEXITY_LIMIT,
           name: str = "") -> VerifierResult:
    """Verify a program (see the module docstring).

    :raises VerifierError: the program is rejected; ``.log`` says why.
    :raises NotSupportedError: no context model for ``prog_type`` and no ``ctx`` given.
    """
    if ctx is None:
        ctx = context_for(prog_type, attach_type, multi_func=bool(flags & ProgFlags.MULTI_FUNC))
    allowed = frozenset(helpers) if helpers is not None else helpers_for(prog_type, attach_type)
    v = _Verifier(list(insns), prog_type, attach_type, ctx, dict(maps or {}), allowed, dict(kfuncs or {}), gpl,
                  log_level, max_insns, name)
    return v.run()


# ---------------------------------------------------------------------------- the interpreter


def _sized_unknown(size: int) -> Reg:
    r = Reg.unknown()
    if size < 8:
        r.set_urange(0, (1 << (8 * size)) - 1)
    return r


def _render(lines: Iterable[str | tuple[int, Insn]]) -> str:
    """The log text: instructions as the kernel's verifier log prints them (``3: (b7) r0 = 0``)."""
    return "\n".join(x if isinstance(x, str) else f"{x[0]}: {format_kernel(x[1])}" for x in lines)


def _slot_of(o: int) -> tuple[int, int]:
    """Stack slot and byte index of frame offset ``o`` (negative)."""
    k = (-o - 1) // 8
    return k, o + 8 * (k + 1)


class _Verifier:
    def __init__(self, insns: list[Insn], prog_type: int, attach_type: int | None, ctx: ContextLayout,
                 maps: dict[int, MapInfo], allowed: frozenset[int], kfuncs: dict[int, KfuncInfo], gpl: bool,
                 log_level: int, max_insns: int, name: str) -> None:
        self.insns = insns
        self.prog_type = prog_type
        self.attach_type = attach_type
        self.ctx = ctx
        self.maps = maps
        self.allowed = allowed
        self.kfuncs = kfuncs
        self.gpl = gpl
        self.log_level = log_level
        self.max_insns = max_insns
        self.name = name
        self.cfg: Cfg = None  # type: ignore[assignment]  # run() builds it first; only _reject looks earlier, and checks
        self.processed = 0
        self.next_id = 0
        self.explored: dict[int, list[VState]] = {}
        self.total_states = 0
        self.peak_states = 0
        self.pending: list[VState] = []
        self.depth: dict[int, int] = {}
        self.max_ctx_off = 0
        self.helpers_used: set[int] = set()
        self.maps_used: set[int] = set()
        self.call_edges: set[tuple[int, int]] = set()
        # log lines; an instruction is kept as (slot, insn) and formatted only when the log is read
        self.full_log: list[str | tuple[int, Insn]] = []
        self.recent: deque[str | tuple[int, Insn]] = deque(maxlen=24)
        self.idx = 0

    # ------------------------------------------------------------------ driver
    def run(self) -> VerifierResult:
        try:
            self.cfg = build_cfg(self.insns)
            self._explore()
            max_depth = self._check_stack_depth()
        except Reject as r:
            raise self._error(r) from None
        except (BpfmuxError, ArithmeticError, ValueError, IndexError, KeyError, TypeError) as exc:
            # defensive: a bug or an unmodelled corner must not leak a raw exception
            raise VerifierError(errno.EINVAL, f"bpfmux verifier could not model this program: {exc!r}",
                                log=_render(self.recent), program=self.name) from exc
        summary = self._summary()
        log = _render([*self.full_log, summary]) if self.log_level >= 2 else summary
        cfg = self.cfg
        return VerifierResult(
            self.processed, {cfg.subprogs[k]: self.depth.get(k, 0) for k in range(len(cfg.subprogs))}, max_depth,
            cfg.has_loops, self.max_ctx_off, frozenset(self.helpers_used), frozenset(self.maps_used),
            tuple(cfg.subprogs), self.total_states, log)

    def _summary(self) -> str:
        return (f"processed {self.processed} insns (limit {self.max_insns}) max_states_per_insn "
                f"{max((len(v) for v in self.explored.values()), default=0)} total_states {self.total_states} "
                f"peak_states {self.peak_states}")

    def _error(self, r: Reject) -> VerifierError:
        lines = list(self.full_log if self.log_level >= 2 else self.recent)
        lines.append(r.msg)
        lines.append(self._summary())
        where = f" (insn {r.insn})" if r.insn is not None else ""
        return VerifierError(r.errno, f"{r.msg}{where}", log=_render(lines), program=self.name)

    def _reject(self, msg: str, err: int = errno.EACCES) -> Reject:
        slot = self.cfg.slots[self.idx] if self.cfg else None
        return Reject(err, msg, slot)

    def _new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _initial(self) -> VState:
        st = VState()
        f = Frame(0, 0, -1)
        f.regs[1] = Reg.ptr(T.PTR_TO_CTX)
        fp = Reg.ptr(T.PTR_TO_STACK)
        fp.frame = 0
        f.regs[10] = fp
        st.frames.append(f)
        st.insn = 0
        return st

    def _explore(self) -> None:
        self.pending.append(self._initial())
        while self.pending:
            cur = self.pending.pop()
            self._run_path(cur)

    def _finish(self, st: VState) -> None:
        p = st.parent
        while p is not None:
            p.branches -= 1
            if p.branches > 0:
                break
            p = p.parent

    def _push(self, st: VState, idx: int) -> None:
        st.insn = idx
        if st.parent is not None:
            st.parent.branches += 1
        self.pending.append(st)

    def _run_path(self, cur: VState) -> None:
        cfg = self.cfg
        insns = self.insns
        idx = cur.insn
        while True:
            self.processed += 1
            if self.processed > self.max_insns:
                self.idx = idx
                raise Reject(errno.E2BIG, f"BPF program is too large. Processed {self.processed} insn")
            self.idx = idx
            if cfg.prune[idx] and self._visited(idx, cur):
                self._log_line(f"{cfg.slots[idx]}: safe")
                self._finish(cur)
                return
            insn = insns[idx]
            self._log_line((cfg.slots[idx], insn))
            nxt = self._step(cur, idx, insn)
            if nxt < 0:
                self._finish(cur)
                return
            idx = nxt

    def _log_line(self, line: str | tuple[int, Insn]) -> None:
        self.recent.append(line)
        if self.log_level >= 2:
            self.full_log.append(line)

    def _visited(self, idx: int, cur: VState) -> bool:
        live = self.cfg.live[idx]
        lst = self.explored.get(idx)
        if lst is None:
            lst = self.explored[idx] = []
        keep: list[VState] = []
        pruned = False
        for pos, old in enumerate(lst):
            if old.branches > 0:
                if states_exact(old, cur, live):
                    raise Reject(errno.EINVAL, f"infinite loop detected at insn {self.cfg.slots[idx]}",
                                 self.cfg.slots[idx])
            elif states_safe(old, cur, live):
                old.hit += 1
                keep.extend(lst[pos:])
                pruned = True
                break
            old.miss += 1
            # like the kernel: a state that keeps missing is not worth comparing against
            if old.miss > old.hit * 3 + 3:
                self.total_states -= 1
                continue
            keep.append(old)
        lst[:] = keep
        if pruned:
            return True
        cp = cur.copy()
        cp.branches = 1
        cp.parent = cur.parent
        cp.insn = idx
        cur.parent = cp
        cur.last_cp_processed = self.processed
        lst.append(cp)
        self.total_states += 1
        self.peak_states = max(self.peak_states, self.total_states)
        return False

    # ------------------------------------------------------------------ registers
    def _read(self, fr: Frame, r: int) -> Reg:
        reg = fr.regs[r]
        if reg.type == T.NOT_INIT:
            raise self._reject(f"R{r} !read_ok")
        return reg

    def _write(self, fr: Frame, r: int, val: Reg) -> None:
        if r == 10:
            raise self._reject("frame pointer is read only")
        fr.regs[r] = val

    # ------------------------------------------------------------------ one instruction
    def _step(self, st: VState, idx: int, insn: Insn) -> int:
        cls = insn.opcode & 7
        fr = st.frames[-1]
        if cls in (Class.ALU, Class.ALU64):
            self._alu(fr, insn)
            return idx + 1
        if cls == Class.LDX:
            base = self._read(fr, insn.src)
            if insn.dst == 10:
                raise self._reject("frame pointer is read only")
            size = SIZE_BYTES[insn.opcode & 0x18]
            val = self._mem(st, base, insn.src, insn.off, size, False, None)
            if insn.opcode & 0xE0 == Mode.MEMSX and val.type == T.SCALAR:
                val = sign_extend(val, 8 * size, 64)
            self._write(fr, insn.dst, val)
            return idx + 1
        if cls == Class.ST:
            base = self._read(fr, insn.dst)
            size = SIZE_BYTES[insn.opcode & 0x18]
            imm = insn.imm & ((1 << (8 * size)) - 1) if size < 8 else insn.imm
            self._mem(st, base, insn.dst, insn.off, size, True, Reg.const(imm))
            return idx + 1
        if cls == Class.STX:
            base = self._read(fr, insn.dst)
            val = self._read(fr, insn.src)
            size = SIZE_BYTES[insn.opcode & 0x18]
            if insn.opcode & 0xE0 == Mode.ATOMIC:
                self._atomic(st, fr, insn, base, val, size)
                return idx + 1
            self._mem(st, base, insn.dst, insn.off, size, True, val)
            return idx + 1
        if cls == Class.LD:
            if insn.opcode == LDDW:
                self._lddw(fr, insn, idx)
                return idx + 1
            return self._ld_abs(fr, insn, idx)
        # jumps
        jop = insn.opcode & 0xF0
        if jop == Jmp.JA:
            return self.cfg.targets[idx]
        if jop == Jmp.EXIT:
            return self._exit(st, idx)
        if jop == Jmp.CALL:
            if insn.src == 1:
                return self._pseudo_call(st, idx)
            if insn.src == 2:
                return self._kfunc(st, fr, insn, idx)
            return self._helper(st, fr, insn, idx)
        return self._cond(st, fr, insn, idx)

    # ------------------------------------------------------------------ ALU
    def _alu(self, fr: Frame, insn: Insn) -> None:
        op = insn.opcode
        bits = 64 if op & 7 == Class.ALU64 else 32
        aop = op & 0xF0
        d = insn.dst
        if d == 10:
            raise self._reject("frame pointer is read only")
        if aop == Alu.MOV:
            if op & 0x08:
                src = self._read(fr, insn.src)
                if insn.off:
                    if src.type != T.SCALAR:
                        raise self._reject(f"R{insn.src} sign-extension part of pointer")
                    fr.regs[d] = sign_extend(src, insn.off, bits)
                elif bits == 64:
                    if src.type == T.SCALAR and not src.is_const and src.id == 0:
                        src = src.copy()
                        src.id = self._new_id()
                        fr.regs[insn.src] = src
                    fr.regs[d] = src
                else:
                    if src.type != T.SCALAR:
                        fr.regs[d] = _sized_unknown(4)
                    else:
                        fr.regs[d] = scalar_alu(Alu.OR, src, Reg.const(0), 32)
            else:
                fr.regs[d] = Reg.const(insn.imm if bits == 64 else insn.imm & U32)
            return
        dst = self._read(fr, d)
        if aop == Alu.NEG or aop == Alu.END:
            if dst.type != T.SCALAR:
                raise self._reject(f"R{d} pointer arithmetic prohibited")
            if aop == Alu.NEG:
                fr.regs[d] = scalar_neg(dst, bits)
            else:
                swap = bits == 64 or bool(op & 0x08)
                fr.regs[d] = scalar_end(dst, insn.imm, swap, bits)
            return
        if op & 0x08:
            src = self._read(fr, insn.src)
        else:
            src = Reg.const(insn.imm if bits == 64 else insn.imm & U32)
        if dst.type == T.SCALAR and src.type == T.SCALAR:
            res = scalar_alu(aop, dst, src, bits, insn.off)
            if dst.btf and aop in (Alu.ADD, Alu.SUB) and src.is_const and bits == 64:
                res.btf = dst.btf
            fr.regs[d] = res
            return
        fr.regs[d] = self._ptr_alu(insn, aop, bits, dst, src)

    def _ptr_alu(self, insn: Insn, aop: int, bits: int, dst: Reg, src: Reg) -> Reg:
        d = insn.dst
        if dst.type != T.SCALAR and src.type != T.SCALAR:
            if aop == Alu.SUB and bits == 64:
                return Reg.unknown()
            raise self._reject(f"R{d} pointer {_ALU_NAMES.get(aop, '?')} pointer prohibited")
        if bits == 32:
            raise self._reject(f"R{d} 32-bit pointer arithmetic prohibited")
        ptr, off = (dst, src) if dst.type != T.SCALAR else (src, dst)
        if aop not in (Alu.ADD, Alu.SUB):
            raise self._reject(f"R{d} bitwise operator {_ALU_NAMES.get(aop, '?')} on pointer prohibited"
                               if aop in (Alu.AND, Alu.OR, Alu.XOR) else
                               f"R{d} pointer arithmetic with {_ALU_NAMES.get(aop, '?')} operator prohibited")
        if aop == Alu.SUB and ptr is src:
            raise self._reject(f"R{d} tried to subtract pointer from scalar")
        if aop == Alu.SUB and ptr.type == T.PTR_TO_STACK:
            raise self._reject(f"R{d} subtraction from stack pointer prohibited")
        if ptr.null:
            raise self._reject(f"R{d} pointer arithmetic on {type_name(ptr)} prohibited, null-check it first")
        if ptr.type in (T.CONST_PTR_TO_MAP, T.PTR_TO_FUNC):
            raise self._reject(f"R{d} pointer arithmetic on {type_name(ptr)} prohibited")
        kind = type_name(ptr)
        if off.is_const and abs(to_signed(off.tv)) >= MAX_VAR_OFF:
            raise self._reject(f"math between {kind} pointer and {to_signed(off.tv)} is not allowed", errno.EINVAL)
        if not off.is_const and off.smin == S64_MIN:
            raise self._reject(f"math between {kind} pointer and register with unbounded min value is not allowed",
                               errno.EINVAL)
        if not off.is_const and (off.smin >= MAX_VAR_OFF or off.smin <= -MAX_VAR_OFF):
            raise self._reject(f"value {off.smin} makes {kind} pointer be out of bounds", errno.EINVAL)
        res = ptr.copy()
        res.id = 0
        if off.is_const:
            c = to_signed(off.tv)
            res.off = ptr.off + c if aop == Alu.ADD else ptr.off - c
            if abs(res.off) >= MAX_VAR_OFF:
                raise self._reject(f"{kind} pointer offset {res.off} is not allowed", errno.EINVAL)
            return res
        if ptr.type == T.PTR_TO_CTX:
            # kernel: allowed, but any access through it is then rejected
            pass
        var = scalar_alu(aop, ptr, off, 64)
        res.umin, res.umax, res.smin, res.smax, res.tv, res.tm = var.umin, var.umax, var.smin, var.smax, var.tv, var.tm
        return res

    # ------------------------------------------------------------------ memory
    def _mem(self, st: VState, base: Reg, regno: int, off: int, size: int, write: bool, val: Reg | None) -> Reg:
        t = base.type
        if t == T.SCALAR:
            if base.btf and not write:
                return _sized_unknown(size) if size < 8 else self._btf_load()
            raise self._reject(f"R{regno} invalid mem access 'scalar'")
        if base.null:
            raise self._reject(f"R{regno} invalid mem access '{type_name(base)}'")
        if t == T.PTR_TO_STACK:
            return self._stack_access(st, base, regno, off, size, write, val)
        if t == T.PTR_TO_CTX:
            return self._ctx_access(base, regno, off, size, write, val)
        if t == T.PTR_TO_MAP_VALUE:
            m: MapInfo | None = base.map
            if write and m is not None and m.readonly:
                raise self._reject(f"write into map forbidden, value_size={m.value_size} off={base.off + off} "
                                   f"size={size}")
            self._bounds(base, regno, off, size, m.value_size if m else 0, "map value",
                         f"value_size={m.value_size if m else 0}")
            return _sized_unknown(size)
        if t == T.PTR_TO_MEM:
            if write and base.rdonly:
                raise self._reject(f"R{regno} cannot write into rdonly_mem")
            self._bounds(base, regno, off, size, base.size, "memory", f"mem_size={base.size}")
            return _sized_unknown(size)
        if t == T.PTR_TO_MAP_KEY:
            if write:
                raise self._reject(f"R{regno} cannot write into map_key")
            self._bounds(base, regno, off, size, base.size, "map key", f"key_size={base.size}")
            return _sized_unknown(size)
        if t == T.PTR_TO_BTF_ID:
            if write:
                raise self._reject(f"only read is supported (R{regno} is {type_name(base)})")
            if not base.is_const:
                raise self._reject(f"R{regno} is {type_name(base)} invalid variable offset: off={base.off}")
            if base.off + off < 0:
                raise self._reject(f"R{regno} is {type_name(base)} invalid negative access: off={base.off + off}")
            return _sized_unknown(size) if size < 8 else self._btf_load()
        if t == T.CONST_PTR_TO_MAP:
            if write:
                raise self._reject(f"only read from bpf_map is supported (R{regno})")
            if base.off + off < 0:
                raise self._reject(f"R{regno} invalid mem access 'map_ptr'")
            return _sized_unknown(size)
        raise self._reject(f"R{regno} invalid mem access '{type_name(base)}'")

    def _btf_load(self) -> Reg:
        r = Reg.unknown()
        r.btf = "?"
        return r

    def _bounds(self, base: Reg, regno: int, off: int, size: int, limit: int, what: str, desc: str) -> None:
        if base.is_const:
            start = base.off + off + to_signed(base.tv)
            if start < 0 or start + size > limit:
                raise self._reject(f"invalid access to {what}, {desc} off={start} size={size}")
            return
        lo = base.off + off + base.smin
        if lo < 0:
            raise self._reject(f"R{regno} min value is negative, either use unsigned index or do a if "
                               f"(index >=0) check.")
        if base.umax >= MAX_VAR_OFF:
            raise self._reject(f"R{regno} unbounded memory access, make sure to bounds check any such access")
        end = base.off + off + base.umax
        if end + size > limit:
            raise self._reject(f"invalid access to {what}, {desc} off={end} size={size}")

    def _ctx_access(self, base: Reg, regno: int, off: int, size: int, write: bool, val: Reg | None) -> Reg:
        if base.off:
            raise self._reject(f"dereference of modified ctx ptr R{regno} off={base.off} disallowed")
        if not base.is_const:
            raise self._reject(f"variable ctx access var_off=({base.tv:#x}; {base.tm:#x}) disallowed")
        if base.tv:
            raise self._reject(f"dereference of modified ctx ptr R{regno} off={to_signed(base.tv)} disallowed")
        verdict = self.ctx.check(off, size, write)
        if not verdict.ok:
            raise self._reject(verdict.reason)
        if not write:
            self.max_ctx_off = max(self.max_ctx_off, off + size)
        if write:
            return NOT_INIT
        if verdict.load == "ptr_to_packet":
            raise self._reject(f"{self.ctx.name}: packet pointers are not modelled by the bpfmux verifier",
                               errno.EINVAL)
        if verdict.load == "ptr_to_btf_id":
            r = Reg.ptr(T.PTR_TO_BTF_ID)
            r.btf = verdict.field.btf_type if verdict.field else None
            return r
        return _sized_unknown(size)

    def _stack_frame(self, st: VState, base: Reg) -> Frame:
        return st.frames[base.frame]

    def _stack_access(self, st: VState, base: Reg, regno: int, off: int, size: int, write: bool,
                      val: Reg | None) -> Reg:
        fr = self._stack_frame(st, base)
        verb = "write to" if write else "read from"
        if base.is_const:
            o = base.off + off + to_signed(base.tv)
            if o < -MAX_BPF_STACK or o + size > 0:
                raise self._reject(f"invalid {verb} stack R{regno} off={o} size={size}")
            if o % size:
                raise self._reject(f"misaligned stack access off {o} size {size}")
            self._note_depth(fr, -o)
            if write:
                self._stack_write(fr, o, size, val)  # type: ignore[arg-type]  # a write always comes with its value
                return NOT_INIT
            return self._stack_read(fr, o, size)
        lo = base.off + off + base.smin
        hi = base.off + off + base.smax
        if base.smin < -MAX_VAR_OFF or base.smax > MAX_VAR_OFF or lo < -MAX_BPF_STACK or hi + size > 0:
            raise self._reject(f"invalid variable-offset {verb} stack R{regno} var_off=({base.tv:#x}; "
                               f"{base.tm:#x}) off={base.off + off} size={size}", errno.EINVAL)
        self._note_depth(fr, -lo)
        if write:
            if val is not None and val.type != T.SCALAR:
                raise self._reject(f"spilled ptr in range of var-offset stack write; insn R{regno}")
            self._stack_clobber(fr, lo, hi + size)
            return NOT_INIT
        return _sized_unknown(size)

    def _note_depth(self, fr: Frame, d: int) -> None:
        if d > self.depth.get(fr.subprog, 0):
            self.depth[fr.subprog] = d

    def _stack_clobber(self, fr: Frame, lo: int, hi: int, kind: str = "m") -> None:
        """Mark bytes ``[lo, hi)`` as written with data."""
        o = lo
        while o < hi:
            k, bi = _slot_of(o)
            n = min(8 - bi, hi - o)
            slot = fr.stack.get(k, EMPTY_SLOT)
            b = list(slot.bytes)
            if slot.spill is not None:
                b = ["m" if c == "s" else c for c in b]
            for i in range(bi, bi + n):
                b[i] = kind
            fr.stack[k] = Slot("".join(b))
            o += n

    def _stack_write(self, fr: Frame, o: int, size: int, val: Reg) -> None:
        k, bi = _slot_of(o)
        if val.type != T.SCALAR and val.type != T.NOT_INIT:
            if size != 8:
                raise self._reject("invalid size of register spill")
            fr.stack[k] = Slot("ssssssss", val, 8)
            return
        if bi == 0 and val.type == T.SCALAR and (size == 8 or val.umax < (1 << (8 * size))):
            slot = fr.stack.get(k, EMPTY_SLOT)
            tail = slot.bytes[size:]
            if slot.spill is not None:
                tail = tail.replace("s", "m")
            fr.stack[k] = Slot("s" * size + tail, val, size)
            return
        self._stack_clobber(fr, o, o + size, "z" if val.is_null_const else "m")

    def _stack_read(self, fr: Frame, o: int, size: int) -> Reg:
        k, bi = _slot_of(o)
        slot = fr.stack.get(k, EMPTY_SLOT)
        sp = slot.spill
        if sp is not None and bi == 0 and slot.bytes[:size] == "s" * size:
            if size == slot.spill_size:
                return sp
            if sp.type != T.SCALAR:
                raise self._reject("invalid size of register fill")
            if size < slot.spill_size and sp.umax < (1 << (8 * size)):
                r = sp.copy()
                r.id = 0
                return r
            return _sized_unknown(size)
        seg = slot.bytes[bi:bi + size]
        if sp is not None and sp.type != T.SCALAR and "s" in seg:
            # part of a spilled pointer: privileged programs read it as data
            return _sized_unknown(size)
        if seg == "z" * size:
            return Reg.const(0)
        return _sized_unknown(size)

    def _atomic(self, st: VState, fr: Frame, insn: Insn, base: Reg, val: Reg, size: int) -> None:
        if base.type == T.PTR_TO_CTX:
            raise self._reject(f"BPF_ATOMIC stores into R{insn.dst} ctx is not allowed")
        if base.type not in (T.PTR_TO_STACK, T.PTR_TO_MAP_VALUE, T.PTR_TO_MEM, T.NOT_INIT) or base.null:
            raise self._reject(f"R{insn.dst} invalid mem access '{type_name(base)}'")
        if insn.imm == 0xF1:
            self._read(fr, 0)
        old = self._mem(st, base, insn.dst, insn.off, size, False, None)
        self._mem(st, base, insn.dst, insn.off, size, True, Reg.unknown() if size == 8 else _sized_unknown(size))
        if insn.imm == 0xF1:
            fr.regs[0] = old if old.type == T.SCALAR else Reg.unknown()
        elif insn.imm & 1:
            if insn.src == 10:
                raise self._reject("frame pointer is read only")
            fr.regs[insn.src] = old if old.type == T.SCALAR else Reg.unknown()

    # ------------------------------------------------------------------ ld_imm64 / ld_abs
    def _map(self, key: int) -> MapInfo:
        m = self.maps.get(key)
        if m is None:
            raise self._reject(f"fd {key} is not pointing to valid bpf_map", errno.EBADF)
        self.maps_used.add(key)
        return m

    def _lddw(self, fr: Frame, insn: Insn, idx: int) -> None:
        kind = insn.src
        imm = insn.imm & U64
        if kind == 0:
            fr.regs[insn.dst] = Reg.const(imm)
        elif kind in (1, 5):
            r = Reg.ptr(T.CONST_PTR_TO_MAP)
            r.map = self._map(imm & U32)
            self._write(fr, insn.dst, r)
        elif kind in (2, 6):
            m = self._map(imm & U32)
            off = imm >> 32
            if m.type not in (MapType.ARRAY,) or off >= m.value_size:
                raise self._reject(f"invalid access to map value pointer, value_size={m.value_size} off={off}",
                                   errno.EINVAL)
            r = Reg.ptr(T.PTR_TO_MAP_VALUE, off)
            r.map = m
            self._write(fr, insn.dst, r)
        elif kind == 3:
            r = Reg.ptr(T.PTR_TO_BTF_ID)
            r.btf = "ksym"
            self._write(fr, insn.dst, r)
        elif kind == 4:
            r = Reg.ptr(T.PTR_TO_FUNC)
            r.subprog = self.cfg.subprogs.index(self.cfg.targets[idx])
            self._write(fr, insn.dst, r)
        else:
            raise self._reject("invalid bpf_ld_imm64 insn", errno.EINVAL)

    def _ld_abs(self, fr: Frame, insn: Insn, idx: int) -> int:
        if self.prog_type not in _SKB_TYPES:
            raise self._reject("BPF_LD_[ABS|IND] instructions not allowed for this program type", errno.EINVAL)
        r6 = self._read(fr, 6)
        if r6.type != T.PTR_TO_CTX:
            raise self._reject("at the time of BPF_LD_ABS|IND R6 != pointer to skb")
        if insn.opcode & 0xE0 == Mode.IND:
            self._read(fr, insn.src)
        for r in range(1, 6):
            fr.regs[r] = NOT_INIT
        fr.regs[0] = _sized_unknown(SIZE_BYTES[insn.opcode & 0x18])
        return idx + 1

    # ------------------------------------------------------------------ branches
    def _cond(self, st: VState, fr: Frame, insn: Insn, idx: int) -> int:
        op = insn.opcode & 0xF0
        bits = 32 if insn.opcode & 7 == Class.JMP32 else 64
        target = self.cfg.targets[idx]
        a = self._read(fr, insn.dst)
        if insn.opcode & 0x08:
            b = self._read(fr, insn.src)
        else:
            b = Reg.const(insn.imm if bits == 64 else insn.imm & U32)
        # null checks of maybe-null pointers
        if a.null and op in (Jmp.JEQ, Jmp.JNE) and bits == 64 and b.is_null_const:
            other = st.copy()
            # jump taken: JEQ -> null, JNE -> non-null
            self._mark_null(other, a.id, is_null=(op == Jmp.JEQ))
            self._mark_null(st, a.id, is_null=(op != Jmp.JEQ))
            self._push(other, target)
            return idx + 1
        if a.type != T.SCALAR or b.type != T.SCALAR:
            taken = self._ptr_taken(op, a, b)
            if taken is True:
                return target
            if taken is False:
                return idx + 1
            self._push(st.copy(), target)
            return idx + 1
        taken = is_taken(op, a, b, bits)
        if taken is True:
            return target
        if taken is False:
            return idx + 1
        t_side = branch(op, a, b, bits, True)
        f_side = branch(op, a, b, bits, False)
        if t_side is not None:
            other = st.copy() if f_side is not None else st
            ofr = other.frames[-1]
            self._set_narrowed(other, ofr, insn, t_side)
            if f_side is None:
                return target
            self._push(other, target)
        if f_side is not None:
            self._set_narrowed(st, fr, insn, f_side)
            return idx + 1
        # neither side possible: the value set was empty (cannot happen for sound inputs)
        return -1

    def _set_narrowed(self, st: VState, fr: Frame, insn: Insn, sides: tuple[Reg, Reg]) -> None:
        na, nb = sides
        self._replace_linked(st, fr, insn.dst, na)
        if insn.opcode & 0x08:
            self._replace_linked(st, fr, insn.src, nb)

    def _replace_linked(self, st: VState, fr: Frame, r: int, val: Reg) -> None:
        old = fr.regs[r]
        if r == 10:
            return
        fr.regs[r] = val
        if old.id and old.type == T.SCALAR:
            for i, x in enumerate(fr.regs):
                if i != r and x.id == old.id and x.type == T.SCALAR:
                    c = val.copy()
                    c.id = old.id
                    fr.regs[i] = c
            for k, slot in list(fr.stack.items()):
                sp = slot.spill
                if sp is not None and sp.id == old.id and sp.type == T.SCALAR and slot.spill_size == 8:
                    c = val.copy()
                    c.id = old.id
                    fr.stack[k] = Slot(slot.bytes, c, slot.spill_size)

    def _ptr_taken(self, op: int, a: Reg, b: Reg) -> bool | None:
        ptr, other = (a, b) if a.type != T.SCALAR else (b, a)
        if ptr.null or not other.is_null_const or ptr.type in (T.SCALAR, T.PTR_TO_BTF_ID):
            return None
        if op == Jmp.JEQ:
            return False
        if op == Jmp.JNE:
            return True
        return None

    def _mark_null(self, st: VState, pid: int, is_null: bool) -> None:
        ref = 0
        for f in st.frames:
            for i, x in enumerate(f.regs):
                if x.null and x.id == pid:
                    ref = ref or x.ref
                    f.regs[i] = Reg.const(0) if is_null else self._nonnull(x)
            for k, slot in list(f.stack.items()):
                sp = slot.spill
                if sp is not None and sp.null and sp.id == pid:
                    ref = ref or sp.ref
                    f.stack[k] = Slot(slot.bytes, Reg.const(0) if is_null else self._nonnull(sp), slot.spill_size)
        if is_null and ref:
            st.refs.pop(ref, None)

    @staticmethod
    def _nonnull(x: Reg) -> Reg:
        c = x.copy()
        c.null = False
        return c

    # ------------------------------------------------------------------ calls
    def _pseudo_call(self, st: VState, idx: int) -> int:
        target = self.cfg.targets[idx]
        caller = st.frames[-1]
        if len(st.frames) >= MAX_CALL_FRAMES:
            raise self._reject(f"the call stack of {len(st.frames) + 1} frames is too deep", errno.E2BIG)
        sub = self.cfg.subprogs.index(target)
        if any(f.subprog == sub for f in st.frames):
            raise self._reject(f"recursive call from insn {self.cfg.slots[idx]}", errno.EINVAL)
        self.call_edges.add((caller.subprog, sub))
        self._enter(st, sub, idx, [caller.regs[i] for i in range(1, 6)])
        return target

    def _enter(self, st: VState, sub: int, callsite: int, args: list[Reg]) -> Frame:
        f = Frame(len(st.frames), sub, callsite)
        for i, r in enumerate(args, 1):
            f.regs[i] = r
        fp = Reg.ptr(T.PTR_TO_STACK)
        fp.frame = f.frameno
        f.regs[10] = fp
        st.frames.append(f)
        return f

    def _exit(self, st: VState, idx: int) -> int:
        fr = st.frames[-1]
        r0 = self._read(fr, 0)
        if len(st.frames) > 1:
            callee = st.frames.pop()
            caller = st.frames[-1]
            if r0.type == T.PTR_TO_STACK:
                raise self._reject("cannot return stack pointer to the caller", errno.EINVAL)
            if callee.is_callback:
                if r0.type != T.SCALAR or r0.smin < 0 or r0.smax > 1:
                    raise self._reject(f"At callback return the register R0 has {r0.describe()} should have been "
                                       f"in [0, 1]", errno.EINVAL)
                caller.regs[0] = Reg.unknown()
                nxt = callee.cb_ret_insn
            else:
                caller.regs[0] = r0
                nxt = callee.callsite + 1
            for i in range(1, 6):
                caller.regs[i] = NOT_INIT
            return nxt
        if st.refs:
            rid, at = next(iter(st.refs.items()))
            raise self._reject(f"Unreleased reference id={rid} alloc_insn={self.cfg.slots[at]}", errno.EINVAL)
        self._check_return(r0)
        return -1

    def _check_return(self, r0: Reg) -> None:
        if self.prog_type == ProgType.TRACING and self.attach_type in (AttachType.TRACE_FENTRY,
                                                                      AttachType.TRACE_FEXIT):
            if r0.type != T.SCALAR or r0.smin != 0 or r0.smax != 0 or r0.umax != 0:
                raise self._reject(f"At program exit the register R0 has {r0.describe()} should have been in "
                                   f"[0, 0]", errno.EINVAL)

    def _kfunc(self, st: VState, fr: Frame, insn: Insn, idx: int) -> int:
        info = self.kfuncs.get(insn.imm)
        if info is None:
            raise self._reject(f"calling kernel function {insn.imm} is not allowed (not known to the bpfmux "
                               f"verifier)", errno.EINVAL)
        for regno in range(1, info.nargs + 1):
            self._read(fr, regno)
        for regno in range(1, 6):
            fr.regs[regno] = NOT_INIT
        if info.ret == "void":
            fr.regs[0] = NOT_INIT
        elif info.ret == "ptr":
            r = Reg.ptr(T.PTR_TO_BTF_ID)
            r.btf = info.name
            fr.regs[0] = r
        elif info.ret == "mem":
            r = Reg.ptr(T.PTR_TO_MEM)
            r.size = info.mem_size
            fr.regs[0] = r
        else:
            fr.regs[0] = Reg.unknown()
        return idx + 1

    def _helper(self, st: VState, fr: Frame, insn: Insn, idx: int) -> int:
        hid = insn.imm
        name = helper_name(hid)
        if hid not in HelperId._value2member_map_ or hid == 0:
            raise self._reject(f"invalid func unknown#{hid}", errno.EINVAL)
        if hid not in self.allowed:
            raise self._reject(f"program of this type cannot use helper {name}#{hid}", errno.EINVAL)
        proto = PROTOS.get(hid)
        if proto is None:
            raise self._reject(f"helper {name}#{hid} is not modelled by the bpfmux verifier", errno.EINVAL)
        if proto.gpl_only and not self.gpl:
            raise self._reject("cannot call GPL-restricted function from non-GPL compatible program",
                               errno.EINVAL)
        self.helpers_used.add(hid)
        meta = _CallMeta()
        for i, kind in enumerate(proto.args):
            self._check_arg(st, fr, proto, i + 1, kind, meta)
        m = meta.map
        if m is not None and not map_compatible(hid, m.type):
            if hid == HelperId.tail_call:
                raise self._reject("expected prog array map for tail call", errno.EINVAL)
            raise self._reject(f"cannot pass map_type {int(m.type)} into func {name}#{hid}", errno.EINVAL)
        # result
        ret = proto.ret
        r0: Reg
        if ret == Ret.INTEGER:
            r0 = Reg.unknown()
        elif ret == Ret.VOID:
            r0 = NOT_INIT
        elif ret in (Ret.MAP_VALUE_OR_NULL, Ret.MAP_VALUE):
            m = meta.map
            if m is not None and m.type in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
                r0 = Reg.ptr(T.CONST_PTR_TO_MAP)
                r0.map = m.inner
            else:
                r0 = Reg.ptr(T.PTR_TO_MAP_VALUE)
                r0.map = m
            nonnull = ret == Ret.MAP_VALUE or (
                m is not None and m.type in (MapType.ARRAY, MapType.PERCPU_ARRAY) and hid == HelperId.map_lookup_elem
                and meta.const_key is not None and meta.const_key < m.max_entries)
            if not nonnull:
                r0.null = True
                r0.id = self._new_id()
        elif ret == Ret.ALLOC_MEM_OR_NULL:
            r0 = Reg.ptr(T.PTR_TO_MEM)
            r0.size = meta.alloc_size
            r0.null = True
            r0.id = self._new_id()
            r0.ref = r0.id
            st.refs[r0.ref] = idx
        elif ret in (Ret.BTF_ID, Ret.BTF_ID_OR_NULL, Ret.MEM_OR_BTF_ID_OR_NULL):
            r0 = Reg.ptr(T.PTR_TO_BTF_ID)
            r0.btf = {HelperId.get_current_task_btf: "task_struct", HelperId.task_pt_regs: "pt_regs"}.get(
                HelperId(hid), None)
            if ret != Ret.BTF_ID:
                r0.null = True
                r0.id = self._new_id()
        else:  # pragma: no cover - every Ret is handled above
            r0 = Reg.unknown()
        if meta.release:
            self._release(st, meta.release)
        callback = meta.callback
        for r in range(1, 6):
            fr.regs[r] = NOT_INIT
        fr.regs[0] = r0
        if callback is not None:
            return self._enter_callback(st, idx, proto, callback, meta)
        return idx + 1

    def _enter_callback(self, st: VState, idx: int, proto: HelperProto, cb: Reg, meta: _CallMeta) -> int:
        if len(st.frames) >= MAX_CALL_FRAMES:
            raise self._reject(f"the call stack of {len(st.frames) + 1} frames is too deep", errno.E2BIG)
        # the path where the callback never runs
        skip = st.copy()
        skip.frames[-1].regs[0] = Reg.unknown()
        self._push(skip, idx + 1)
        sub = cb.subprog
        caller = st.frames[-1]
        self.call_edges.add((caller.subprog, sub))
        if proto.id == HelperId.loop:
            index = Reg.unknown()
            index.set_urange(0, U32)
            args = [index, meta.cb_ctx or Reg.const(0)]
        else:  # for_each_map_elem
            m = meta.map
            mp = Reg.ptr(T.CONST_PTR_TO_MAP)
            mp.map = m
            key = Reg.ptr(T.PTR_TO_MAP_KEY)
            key.size = m.key_size if m else 0
            val = Reg.ptr(T.PTR_TO_MAP_VALUE)
            val.map = m
            args = [mp, key, val, meta.cb_ctx or Reg.const(0)]
        f = self._enter(st, sub, idx, args)
        f.is_callback = True
        f.cb_ret_insn = idx + 1
        return self.cfg.subprogs[sub]

    def _release(self, st: VState, ref: int) -> None:
        st.refs.pop(ref, None)
        for f in st.frames:
            for i, x in enumerate(f.regs):
                if x.ref == ref:
                    f.regs[i] = Reg.unknown()
            for k, slot in list(f.stack.items()):
                if slot.spill is not None and slot.spill.ref == ref:
                    f.stack[k] = Slot(slot.bytes.replace("s", "m"))

    # ------------------------------------------------------------------ helper arguments
    def _check_arg(self, st: VState, fr: Frame, proto: HelperProto, argno: int, kind: Arg, meta: _CallMeta) -> None:
        reg = self._read(fr, argno)
        name = f"{proto.name}#{proto.id}"
        rn = f"R{argno}"
        if kind == Arg.ANYTHING:
            return
        if kind == Arg.CONST_MAP_PTR:
            if reg.type != T.CONST_PTR_TO_MAP or reg.null:
                raise self._reject(f"{rn} type={type_name(reg)} expected=map_ptr")
            meta.map = reg.map
            return
        if kind in (Arg.CONST_SIZE, Arg.CONST_SIZE_OR_ZERO):
            self._check_size(st, fr, argno, reg, kind == Arg.CONST_SIZE_OR_ZERO, meta)
            return
        if kind == Arg.CONST_ALLOC_SIZE_OR_ZERO:
            if reg.type != T.SCALAR or not reg.is_const:
                raise self._reject(f"{rn} is not a known constant'")
            meta.alloc_size = reg.tv
            return
        if kind in (Arg.PTR_TO_CTX, Arg.PTR_TO_CTX_OR_NULL):
            if kind == Arg.PTR_TO_CTX_OR_NULL and reg.is_null_const:
                return
            if reg.type != T.PTR_TO_CTX:
                raise self._reject(f"{rn} type={type_name(reg)} expected=ctx")
            if reg.off or not reg.is_const or reg.tv:
                raise self._reject(f"dereference of modified ctx ptr {rn} off={reg.off} disallowed")
            return
        if kind in (Arg.PTR_TO_MAP_KEY, Arg.PTR_TO_MAP_VALUE, Arg.PTR_TO_UNINIT_MAP_VALUE,
                    Arg.PTR_TO_MAP_VALUE_OR_NULL):
            m = meta.map
            if kind == Arg.PTR_TO_MAP_VALUE_OR_NULL and reg.is_null_const:
                return
            if m is None:
                raise self._reject(f"invalid map_ptr to access map->{'key' if kind == Arg.PTR_TO_MAP_KEY else 'value'}")
            size = m.key_size if kind == Arg.PTR_TO_MAP_KEY else m.value_size
            if size == 0:
                raise self._reject(f"{rn} invalid zero-sized read")
            write = kind == Arg.PTR_TO_UNINIT_MAP_VALUE
            self._helper_mem(st, argno, reg, size, write, meta, zero_ok=False)
            if kind == Arg.PTR_TO_MAP_KEY:
                meta.const_key = self._const_key(st, reg, size)
            return
        if kind in (Arg.PTR_TO_MEM, Arg.PTR_TO_MEM_OR_NULL, Arg.PTR_TO_UNINIT_MEM, Arg.PTR_TO_UNINIT_MEM_OR_NULL):
            if kind in (Arg.PTR_TO_MEM_OR_NULL, Arg.PTR_TO_UNINIT_MEM_OR_NULL) and reg.is_null_const:
                meta.mem_null = True
                return
            # the size comes in the next argument; remember the pointer
            meta.mem_reg = (argno, reg, kind in (Arg.PTR_TO_UNINIT_MEM, Arg.PTR_TO_UNINIT_MEM_OR_NULL))
            if not self._is_mem_ptr(reg):
                raise self._reject(f"{rn} type={type_name(reg)} expected=fp, pkt, pkt_meta, map_key, map_value, "
                                   f"mem, ringbuf_mem, buf, trusted_ptr_")
            return
        if kind in (Arg.PTR_TO_LONG, Arg.PTR_TO_INT):
            size = 8 if kind == Arg.PTR_TO_LONG else 4
            if reg.type not in (T.PTR_TO_STACK, T.PTR_TO_MAP_VALUE, T.PTR_TO_MEM) or reg.null:
                raise self._reject(f"{rn} type={type_name(reg)} expected=fp, pkt, pkt_meta, map_key, map_value, "
                                   f"mem, ringbuf_mem, buf")
            self._helper_mem(st, argno, reg, size, True, meta, zero_ok=False)
            return
        if kind == Arg.PTR_TO_ALLOC_MEM:
            if reg.type != T.PTR_TO_MEM or not reg.ref:
                raise self._reject(f"{rn} type={type_name(reg)} expected=ringbuf_mem")
            if reg.null:
                raise self._reject(f"{rn} type={type_name(reg)} expected=ringbuf_mem")
            if reg.off or not reg.is_const or reg.tv:
                raise self._reject(f"{rn} must have zero offset when passed to release func")
            if reg.ref not in st.refs:
                raise self._reject(f"{rn} must be referenced when passed to release function", errno.EINVAL)
            meta.release = reg.ref
            return
        if kind == Arg.PTR_TO_FUNC:
            if reg.type != T.PTR_TO_FUNC:
                raise self._reject(f"{rn} type={type_name(reg)} expected=func")
            meta.callback = reg
            return
        if kind == Arg.PTR_TO_STACK_OR_NULL:
            if reg.is_null_const:
                meta.cb_ctx = reg
                return
            if reg.type != T.PTR_TO_STACK:
                raise self._reject(f"{rn} type={type_name(reg)} expected=fp")
            meta.cb_ctx = reg
            return
        if kind == Arg.PTR_TO_CONST_STR:
            if reg.type != T.PTR_TO_MAP_VALUE or reg.null:
                raise self._reject(f"{rn} type={type_name(reg)} expected=map_value")
            if reg.map is None or not reg.map.readonly:
                raise self._reject(f"{rn} does not point to a readonly map'")
            if not reg.is_const:
                raise self._reject(f"{rn} is not a constant address'")
            return
        if kind in (Arg.PTR_TO_BTF_ID, Arg.PTR_TO_BTF_ID_OR_NULL, Arg.PTR_TO_PERCPU_BTF_ID):
            if kind == Arg.PTR_TO_BTF_ID_OR_NULL and reg.is_null_const:
                return
            if reg.type != T.PTR_TO_BTF_ID or reg.null:
                raise self._reject(f"{rn} type={type_name(reg)} expected=ptr_")
            return
        if kind in (Arg.PTR_TO_TIMER, Arg.PTR_TO_SPIN_LOCK):
            if reg.type != T.PTR_TO_MAP_VALUE or reg.null:
                raise self._reject(f"{rn} type={type_name(reg)} expected=map_value")
            return
        raise self._reject(f"{rn} argument kind {kind.value} of {name} is not modelled", errno.EINVAL)

    @staticmethod
    def _is_mem_ptr(reg: Reg) -> bool:
        return (reg.type in (T.PTR_TO_STACK, T.PTR_TO_MAP_VALUE, T.PTR_TO_MEM, T.PTR_TO_MAP_KEY, T.PTR_TO_BTF_ID)
                and not reg.null)

    def _check_size(self, st: VState, fr: Frame, argno: int, reg: Reg, zero_ok: bool, meta: _CallMeta) -> None:
        rn = f"R{argno}"
        if reg.type != T.SCALAR:
            raise self._reject(f"{rn} type={type_name(reg)} expected=scalar")
        if reg.smin < 0:
            raise self._reject(f"{rn} min value is negative, either use unsigned or 'var &= const'")
        if reg.umin == 0 and not zero_ok:
            raise self._reject(f"{rn} invalid zero-sized read: u64=[{reg.umin},{reg.umax}]")
        if reg.umax >= MAX_VAR_OFF:
            raise self._reject(f"{rn} unbounded memory access, use 'var &= const' or 'if (var < const)'")
        if meta.mem_null:
            if reg.umax != 0:
                raise self._reject(f"R{argno - 1} type=scalar expected=fp, pkt, pkt_meta, map_key, map_value, mem, "
                                   f"ringbuf_mem, buf")
            meta.mem_null = False
            return
        if meta.mem_reg is None:
            return
        pno, ptr, write = meta.mem_reg
        meta.mem_reg = None
        self._helper_mem(st, pno, ptr, reg.umax, write, meta, zero_ok)

    def _helper_mem(self, st: VState, regno: int, reg: Reg, size: int, write: bool, meta: _CallMeta,
                    zero_ok: bool) -> None:
        """Check that a helper may access ``size`` bytes at ``reg``."""
        rn = f"R{regno}"
        if size == 0:
            if zero_ok:
                return
        t = reg.type
        if t == T.PTR_TO_STACK and not reg.null:
            fr = self._stack_frame(st, reg)
            lo = reg.off + reg.smin
            hi = reg.off + reg.smax + size
            if lo < -MAX_BPF_STACK or hi > 0:
                off = reg.off + (reg.smin if reg.is_const else 0)
                verb = "write to" if write else "read from"
                raise self._reject(f"invalid {verb} stack {rn} off={off} size={size}", errno.EINVAL)
            self._note_depth(fr, -lo)
            if write:
                self._stack_clobber(fr, lo, hi)
            return
        if t == T.PTR_TO_MAP_VALUE and not reg.null:
            m: MapInfo | None = reg.map
            if write and m is not None and m.readonly:
                raise self._reject(f"write into map forbidden, value_size={m.value_size} off={reg.off} size={size}")
            self._bounds(reg, regno, 0, size, m.value_size if m else 0, "map value",
                         f"value_size={m.value_size if m else 0}")
            return
        if t == T.PTR_TO_MEM and not reg.null:
            if write and reg.rdonly:
                raise self._reject(f"{rn} cannot write into rdonly_mem")
            self._bounds(reg, regno, 0, size, reg.size, "memory", f"mem_size={reg.size}")
            return
        if t == T.PTR_TO_MAP_KEY and not reg.null:
            if write:
                raise self._reject(f"{rn} cannot write into map_key")
            self._bounds(reg, regno, 0, size, reg.size, "map key", f"key_size={reg.size}")
            return
        if t == T.PTR_TO_BTF_ID and not reg.null and not write:
            return
        raise self._reject(f"{rn} type={type_name(reg)} expected=fp, pkt, pkt_meta, map_key, map_value, mem, "
                           f"ringbuf_mem, buf, trusted_ptr_")

    def _const_key(self, st: VState, reg: Reg, size: int) -> int | None:
        """The key's value when it is a known constant on the stack."""
        if reg.type != T.PTR_TO_STACK or not reg.is_const or size not in (1, 2, 4, 8):
            return None
        o = reg.off + to_signed(reg.tv)
        if o % size:
            return None
        v = self._stack_read(self._stack_frame(st, reg), o, size)
        return v.tv if v.type == T.SCALAR and v.is_const else None

    # ------------------------------------------------------------------ stack depth
    def _check_stack_depth(self) -> int:
        cfg = self.cfg
        # Linux >= 6.13 on x86-64 gives tracing programs private stacks: each
        # frame may use 512 bytes, the combined limit does not apply
        priv = self.prog_type in _PRIV_STACK_TYPES
        n = len(cfg.subprogs)
        rounded = [max(16, (self.depth.get(k, 0) + 15) // 16 * 16) if self.depth.get(k, 0) else 0
                   for k in range(n)]
        children: dict[int, list[int]] = {}
        for a, b in self.call_edges:
            children.setdefault(a, []).append(b)
        best = 0

        def walk(k: int, acc: int, depth: int) -> None:
            nonlocal best
            acc += rounded[k]
            if acc > MAX_BPF_STACK and not priv:
                raise Reject(errno.EACCES, f"combined stack size of {depth} calls is {acc}. Too large")
            best = max(best, acc)
            if depth > MAX_CALL_FRAMES:
                return
            for c in children.get(k, ()):
                walk(c, acc, depth + 1)

        walk(0, 0, 1)
        return best


class _CallMeta:
    __slots__ = ("map", "mem_reg", "mem_null", "alloc_size", "release", "callback", "cb_ctx", "const_key")

    def __init__(self) -> None:
        self.map: MapInfo | None = None
        self.mem_reg: tuple[int, Reg, bool] | None = None
        self.mem_null = False
        self.alloc_size = 0
        self.release = 0
        self.callback: Reg | None = None
        self.cb_ctx: Reg | None = None
        self.const_key: int | None = None


_ALU_NAMES: dict[int, str] = {
    Alu.ADD: "+=", Alu.SUB: "-=", Alu.MUL: "*=", Alu.DIV: "/=", Alu.OR: "|=", Alu.AND: "&=", Alu.LSH: "<<=",
    Alu.RSH: ">>=", Alu.MOD: "%=", Alu.XOR: "^=", Alu.ARSH: "s>>=",
}

