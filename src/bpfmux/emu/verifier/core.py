"""The emulated kernel's verifier: accept and reject what the kernel does, with its errno.

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
  ``BPF_PSEUDO_MAP_IDX``) refers to; an fd not listed is ``EBADF``.
* ``helpers``: the helper ids this program may call; default
  :func:`bpfmux.emu.verifier.helpers.helpers_for` (facts of Linux 6.18).
* ``kfuncs``: ``{btf_id: KfuncInfo}`` for ``call`` instructions with
  ``src_reg == BPF_PSEUDO_KFUNC_CALL``; an id not listed is not a function.
* ``func_info``: the program has BTF function information (required by
  function pointers, e.g. ``bpf_loop`` callbacks).
* ``flags``: program flags (``BPF_F_SLEEPABLE``; ``BPF_F_MULTI_FUNC`` picks
  the seed multi frame).

It returns a :class:`VerifierResult` or raises
:class:`bpfmux.errors.VerifierError` with the kernel's ``errno`` and a
message in the kernel's words; ``.log`` holds the last instructions of the
failing path, the reason and the count of instructions processed.

The model is the kernel's for a privileged (root) loader, and follows the
kernel's algorithm: load-time checks of every instruction (:mod:`.cfg`),
then exploration of every path with the kernel's value tracking
(:mod:`.alu`, :mod:`.branch`, :mod:`.bounds`), state pruning at the
kernel's prune points with precision tracking (:mod:`.precision`), bounded
loops unrolled, ``may_goto`` loops and callbacks (``bpf_loop``,
``for_each_map_elem``) iterated until their states converge (imprecise
scalars widened), infinite loops detected when an identical state comes
back. Memory accesses are :mod:`.memory`'s, calls :mod:`.calls`'.

Not modelled (rejected with a message saying so): packet pointers
(``__sk_buff->data``), dynptrs, iterators, arenas; BTF-typed struct fields
are read at any non-negative offset and give scalars; global functions are
verified per call site like static ones.
"""

from __future__ import annotations

import errno
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ...abi import ContextLayout, context_for
from ...errors import BpfmuxError, VerifierError
from ...isa.disasm import format_kernel
from ...isa.insn import Insn
from ...isa.opcodes import LDDW, SIZE_BYTES, Alu, Class, Jmp, Mode
from ...uapi import ProgFlags, ProgType
from .alu import fork_width, scalar_alu, scalar_end, scalar_neg
from .bounds import coerce_size_sx, coerce_subreg_size_sx, is_sane, mark_32_known, sanitize, sync, zext_32_to_64
from .branch import FLIP, REVERSE, branch_taken, refine
from .calls import CallsMixin
from .cfg import Cfg, Reject, build_cfg
from .encoding import reserved_error
from .helpers import helpers_for
from .precision import DST_STACK, SRC_STACK, Backtrack, mark_precise
from .reg import ADD_CONST, NOT_INIT, S32_MAX, S64_MAX, S64_MIN, Reg, T, s32, s64, type_name
from .state import EXACT, MAX_VAR_OFF, NOT_EXACT, RANGE_WITHIN, Frame, Slot, VState, maybe_looping, states_equal
from .tnum import U32, U64, t_add

__all__ = ["KfuncInfo", "MapInfo", "VerifierResult", "verify"]

#: Default complexity limit (the kernel's ``BPF_COMPLEXITY_LIMIT_INSNS``).
COMPLEXITY_LIMIT = 1_000_000
#: Most paths waiting to be explored (``BPF_COMPLEXITY_LIMIT_JMP_SEQ``).
JMP_SEQ_LIMIT = 8192
_LINKED_REGS_MAX = 6


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
    :ivar frozen: the contents of a frozen read-only array's single value
        (the kernel reads constant-offset loads from it as known values).
    """

    type: int
    key_size: int
    value_size: int
    max_entries: int = 1
    flags: int = 0
    name: str = ""
    inner: MapInfo | None = None
    frozen: bytes | None = None

    @property
    def readonly(self) -> bool:
        """Programs may not write values (``BPF_F_RDONLY_PROG``)."""
        from ...uapi import MapFlags

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
           name: str = "", func_info: bool = False) -> VerifierResult:
    """Verify a program (see the module docstring).

    :raises VerifierError: the program is rejected; ``.log`` says why.
    :raises NotSupportedError: no context model for ``prog_type`` and no ``ctx`` given.
    """
    if ctx is None:
        ctx = context_for(prog_type, attach_type, multi_func=bool(flags & ProgFlags.MULTI_FUNC))
    allowed = frozenset(helpers) if helpers is not None else helpers_for(prog_type, attach_type)
    v = _Verifier(list(insns), prog_type, attach_type, ctx, dict(maps or {}), allowed, dict(kfuncs or {}), gpl,
                  log_level, max_insns, name, flags, func_info)
    return v.run()


def _render(lines: Iterable[str | tuple[int, Insn]]) -> str:
    """The log text: instructions as the kernel's verifier log prints them (``3: (b7) r0 = 0``)."""
    return "\n".join(x if isinstance(x, str) else f"{x[0]}: {format_kernel(x[1])}" for x in lines)


_ALU_NAMES: dict[int, str] = {
    Alu.ADD: "+=", Alu.SUB: "-=", Alu.MUL: "*=", Alu.DIV: "/=", Alu.OR: "|=", Alu.AND: "&=", Alu.LSH: "<<=",
    Alu.RSH: ">>=", Alu.NEG: "neg", Alu.MOD: "%=", Alu.XOR: "^=", Alu.MOV: "=", Alu.ARSH: "s>>=", Alu.END: "endian",
}


class _Verifier(CallsMixin):
    def __init__(self, insns: list[Insn], prog_type: int, attach_type: int | None, ctx: ContextLayout,
                 maps: dict[int, MapInfo], allowed: frozenset[int], kfuncs: dict[int, KfuncInfo], gpl: bool,
                 log_level: int, max_insns: int, name: str, flags: int, func_info: bool) -> None:
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
        self.flags = flags
        self.func_info = func_info
        self.sleepable = bool(flags & ProgFlags.SLEEPABLE)
        self.cfg: Cfg = None  # type: ignore[assignment]  # run() builds it before anything reads it
        self.processed = 0
        self.jmps = 0
        self.prev_jmps = 0
        self.prev_processed = 0
        self.id_gen = 0
        self.explored: dict[tuple, list[VState]] = {}
        self.max_states_per_insn = 0
        self.total_states = 0
        self.peak_states = 0
        self.pending: list[VState] = []
        self.depth: dict[int, int] = {}
        self.max_ctx_off = 0
        self.helpers_used: set[int] = set()
        self.maps_used: set[int] = set()
        self.call_edges: set[tuple[int, int]] = set()
        self.full_log: list[str | tuple[int, Insn]] = []
        self.recent: deque[str | tuple[int, Insn]] = deque(maxlen=24)
        self.cur: VState = None  # type: ignore[assignment]  # _do_check() sets it before anything reads it
        self.idx = 0
        self.prev_idx = -1
        self.cur_hist: list | None = None
        self.seen = bytearray(len(insns))
        self.encoding_ok = bytearray(len(insns))

    # ------------------------------------------------------------------ driver
    def run(self) -> VerifierResult:
        try:
            if self.prog_type == ProgType.SYSCALL and not self.sleepable:
                raise Reject(errno.EINVAL, "Syscall programs can only be sleepable")
            self.cfg = build_cfg(self.insns, self.maps, self.kfuncs, self.gpl, self.sleepable)
            self._do_check()
            max_depth = self._check_stack_depth()
            self._check_dead_callbacks()
        except Reject as r:
            raise self._error(r) from None
        except (BpfmuxError, ArithmeticError, ValueError, IndexError, KeyError, TypeError, AttributeError) as exc:
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
                f"{self.max_states_per_insn} total_states {self.total_states} peak_states {self.peak_states}")

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
        self.id_gen += 1
        return self.id_gen

    def _log_line(self, line: str | tuple[int, Insn]) -> None:
        self.recent.append(line)
        if self.log_level >= 2:
            self.full_log.append(line)

    def _initial(self) -> VState:
        st = VState()
        f = Frame(0, 0, -1)
        f.regs[1] = Reg.ptr(T.PTR_TO_CTX)
        fp = Reg.ptr(T.PTR_TO_STACK)
        f.regs[10] = fp
        st.frames.append(f)
        st.insn = 0
        return st

    def _do_check(self) -> None:
        cfg = self.cfg
        insns = self.insns
        prune = cfg.prune
        jmp_point = cfg.jmp_point
        self.cur = self._initial()
        self.idx = 0
        self.prev_idx = -1
        max_insns = self.max_insns
        seen = self.seen
        while True:
            idx = self.idx
            self.cur_hist = None
            self.processed += 1
            if self.processed > max_insns:
                raise self._reject(f"BPF program is too large. Processed {self.processed} insn", errno.E2BIG)
            st = self.cur
            st.last_insn = self.prev_idx
            if prune[idx] and self._is_state_visited(idx):
                self._log_line(f"{cfg.slots[idx]}: safe")
                if not self._path_done():
                    return
                continue
            if jmp_point[idx]:
                self._push_hist(0)
            seen[idx] = 1
            insn = insns[idx]
            self._log_line((cfg.slots[idx], insn))
            self.prev_idx = idx
            nxt = self._step(st, idx, insn)
            if nxt < 0:
                if not self._path_done():
                    return
                continue
            self.idx = nxt

    def _check_dead_callbacks(self) -> None:
        """The kernel removes the code no path reached, whole subprograms
        included; a function pointer that pointed at a removed subprogram
        then points at the next subprogram left, or past the end. When more
        than one subprogram is left, one pointing past the end makes the
        kernel fail as it splits the program for the JIT (``EFAULT``)."""
        cfg = self.cfg
        starts = cfg.subprogs
        alive = [bool(self.seen[s]) for s in starts]
        if sum(alive) <= 1:
            return
        for i, insn in enumerate(self.insns):
            if insn.opcode != LDDW or insn.src != 4 or not self.seen[i]:
                continue
            k = starts.index(cfg.targets[i])
            if not any(alive[k:]):
                self.idx = i
                raise self._reject(f"verifier bug: No program to jit at insn {cfg.slots[i]} (subprog < 0)",
                                   errno.EFAULT)

    def _path_done(self) -> bool:
        """The current path ended: update the explored states, take the next pending path."""
        self._update_branch_counts(self.cur)
        if not self.pending:
            return False
        st = self.pending.pop()
        self.cur = st
        self.idx = st.insn
        self.prev_idx = st.last_insn
        return True

    def _update_branch_counts(self, st: VState | None) -> None:
        while st is not None:
            st.branches -= 1
            if st.branches == 0 and st.parent is not None and st.loop_entry is not None:
                self._update_loop_entry(st.parent, st.loop_entry)
            if st.branches:
                break
            st = st.parent

    def _push_branch(self, idx: int, prev_idx: int) -> VState:
        """Queue a copy of the current state to explore from ``idx`` (``push_stack``)."""
        cur = self.cur
        st = cur.copy()
        st.insn = idx
        st.last_insn = prev_idx
        st.hist = [list(h) for h in cur.hist]
        self.pending.append(st)
        if len(self.pending) > JMP_SEQ_LIMIT:
            raise self._reject(f"The sequence of {len(self.pending)} jumps is too complex.", errno.E2BIG)
        if st.parent is not None:
            st.parent.branches += 1
        return st

    # ------------------------------------------------------------------ jump history and precision
    def _push_hist(self, flags: int, linked: list | None = None) -> None:
        h = self.cur_hist
        if h is not None:
            h[2] |= flags
            if linked:
                h[3] = linked
            return
        h = [self.idx, self.prev_idx, flags, linked]
        self.cur.hist.append(h)
        self.cur_hist = h

    def _mark_precise(self, regno: int) -> None:
        """Make ``regno`` of the current frame precise in the explored states (``mark_chain_precision``)."""
        st = self.cur
        bt = Backtrack(len(st.frames) - 1)
        bt.set(regno)
        mark_precise(self, bt)

    # ------------------------------------------------------------------ loops (the kernel's loop entries)
    @staticmethod
    def _get_loop_entry(st: VState) -> VState | None:
        top = st.loop_entry
        while top is not None and top.loop_entry is not None and top is not top.loop_entry:
            top = top.loop_entry
        s: VState | None = st
        while s is not None and s.loop_entry is not top:
            old = s.loop_entry
            s.loop_entry = top
            s = old
        return top

    def _update_loop_entry(self, cur: VState, hdr: VState) -> None:
        cur1 = self._get_loop_entry(cur) or cur
        hdr1 = self._get_loop_entry(hdr) or hdr
        if hdr1.branches and hdr1.dfs_depth <= cur1.dfs_depth:
            cur.loop_entry = hdr
            hdr.used_as_loop_entry = True

    # ------------------------------------------------------------------ state pruning
    def _live_masks(self, st: VState, idx: int) -> list[int]:
        """Live registers per frame: the current instruction's for the innermost frame,
        what a caller reads after the call returns for the others."""
        live = self.cfg.live
        frames = st.frames
        out = []
        for i in range(len(frames) - 1):
            site = frames[i + 1].callsite
            if frames[i + 1].is_callback:
                out.append(live[site] | 0x7FF)  # the call runs again: its arguments and the caller's registers
            else:
                out.append(live[site + 1] & 0x3C0 if site + 1 < len(live) else 0x3C0)
        out.append(live[idx])
        return out

    def _state_key(self, st: VState, idx: int) -> tuple:
        return (idx, *(f.callsite for f in st.frames))

    def _is_state_visited(self, idx: int) -> bool:
        cfg = self.cfg
        cur = self.cur
        force_new = cfg.force_cp[idx] or len(cur.hist) > 40
        add_new = force_new or (self.jmps - self.prev_jmps >= 2 and self.processed - self.prev_processed >= 8)
        key = self._state_key(cur, idx)
        lst = self.explored.get(key)
        if lst is None:
            lst = self.explored[key] = []
        live = None
        tmp = self.id_gen + 1000
        keep: list[VState] = []
        hit = False
        count = 0
        for sl in lst:
            count += 1
            if hit:
                keep.append(sl)
                continue
            if live is None:
                live = self._live_masks(cur, idx)
            if sl.branches:
                matched = False
                if cfg.insns[idx].opcode == (Class.JMP | Jmp.JCOND):
                    if sl.may_goto_depth != cur.may_goto_depth and states_equal(sl, cur, live, RANGE_WITHIN, tmp):
                        self._update_loop_entry(cur, sl)
                        matched = True
                if not matched and cfg.calls_callback[idx]:
                    if states_equal(sl, cur, live, RANGE_WITHIN, tmp):
                        matched = True
                    skip_loop_check = True
                else:
                    skip_loop_check = False
                if matched:
                    hit = True
                    self._hit(sl, idx)
                    keep.append(sl)
                    continue
                if not skip_loop_check and maybe_looping(sl, cur) and \
                        sl.may_goto_depth == cur.may_goto_depth and \
                        sl.callback_unroll_depth == cur.callback_unroll_depth and \
                        states_equal(sl, cur, live, EXACT, tmp):
                    raise self._reject(f"infinite loop detected at insn {cfg.slots[idx]}", errno.EINVAL)
                if not force_new and self.jmps - self.prev_jmps < 20 and self.processed - self.prev_processed < 100:
                    add_new = False
            else:
                loop_entry = self._get_loop_entry(sl)
                force_exact = loop_entry is not None and loop_entry.branches > 0
                if states_equal(sl, cur, live, RANGE_WITHIN if force_exact else NOT_EXACT, tmp):
                    if force_exact and loop_entry is not None:
                        self._update_loop_entry(cur, loop_entry)
                    hit = True
                    self._hit(sl, idx)
                    keep.append(sl)
                    continue
            if add_new:
                sl.miss += 1
            n = 64 if cfg.force_cp[idx] and sl.branches > 0 else 3
            if sl.miss > sl.hit * n + n:
                self.peak_states -= 1
                continue
            keep.append(sl)
        lst[:] = keep
        if count > self.max_states_per_insn:
            self.max_states_per_insn = count
        if hit:
            return True
        if not add_new:
            return False
        self.total_states += 1
        self.peak_states += 1
        self.prev_jmps = self.jmps
        self.prev_processed = self.processed
        self._forget_precision(cur)
        new = cur.copy()
        new.insn = idx
        new.branches = 1
        new.hist = cur.hist
        new.last_insn = cur.last_insn
        cur.parent = new
        cur.first_insn = idx
        cur.hist = []
        self.cur_hist = None
        cur.dfs_depth = new.dfs_depth + 1
        lst.insert(0, new)
        return False

    def _hit(self, sl: VState, idx: int) -> None:
        sl.hit += 1
        if self.cfg.jmp_point[idx]:
            self._push_hist(0)
        # precision the explored state relied on is needed by the current path too
        bt = Backtrack(len(self.cur.frames) - 1)
        live = self._live_masks(self.cur, idx)
        for fr, f in enumerate(sl.frames):
            mask = live[fr]
            for i in range(10):
                r = f.regs[i]
                if r.type == T.SCALAR and r.precise and mask >> i & 1:
                    bt.regs[fr] |= 1 << i
            for k, slot in f.stack.items():
                sp = slot.spill
                if sp is not None and slot.spilled and sp.type == T.SCALAR and sp.precise:
                    bt.slots[fr] |= 1 << k
        mark_precise(self, bt)

    @staticmethod
    def _forget_precision(st: VState) -> None:
        """Scalars of a new explored state start imprecise (children mark what they need)."""
        for f in st.frames:
            regs = f.regs
            for i in range(10):
                r = regs[i]
                if r.precise and r.type == T.SCALAR:
                    c = r.copy()
                    c.precise = False
                    regs[i] = c
            for k, slot in f.stack.items():
                sp = slot.spill
                if sp is not None and sp.precise and sp.type == T.SCALAR:
                    c = sp.copy()
                    c.precise = False
                    f.stack[k] = Slot(slot.bytes, c)

    # ------------------------------------------------------------------ registers
    def _read(self, fr: Frame, r: int) -> Reg:
        if r > 10:
            raise self._reject(f"R{r} is invalid", errno.EINVAL)
        reg = fr.regs[r]
        if reg.type == T.NOT_INIT:
            raise self._reject(f"R{r} !read_ok")
        return reg

    def _check_dst(self, r: int) -> None:
        if r > 10:
            raise self._reject(f"R{r} is invalid", errno.EINVAL)
        if r == 10:
            raise self._reject("frame pointer is read only")

    def _encoding(self, insn: Insn) -> None:
        """The reserved-field check of the current instruction (once: it depends on the instruction alone)."""
        ok = self.encoding_ok
        if ok[self.idx]:
            return
        msg = reserved_error(insn)
        if msg is not None:
            raise self._reject(msg, errno.EINVAL)
        ok[self.idx] = 1

    # ------------------------------------------------------------------ one instruction
    def _step(self, st: VState, idx: int, insn: Insn) -> int:
        op = insn.opcode
        cls = op & 7
        fr = st.frames[-1]
        if cls == Class.ALU or cls == Class.ALU64:
            self._alu(st, fr, insn, idx)
            return idx + 1
        if cls == Class.LDX:
            self._read(fr, insn.src)
            self._check_dst(insn.dst)
            size = SIZE_BYTES[op & 0x18]
            self._check_mem_access(st, insn.src, insn.off, size, False, insn.dst, False, op & 0xE0 == Mode.MEMSX)
            self._check_sane_dst(fr, insn.dst)
            return idx + 1
        if cls == Class.STX:
            if op & 0xE0 == Mode.ATOMIC:
                self._encoding(insn)
                self._atomic(st, fr, insn)
                return idx + 1
            self._encoding(insn)
            self._read(fr, insn.src)
            self._read(fr, insn.dst)
            self._check_mem_access(st, insn.dst, insn.off, SIZE_BYTES[op & 0x18], True, insn.src, False, False)
            return idx + 1
        if cls == Class.ST:
            self._encoding(insn)
            self._read(fr, insn.dst)
            self._check_mem_access(st, insn.dst, insn.off, SIZE_BYTES[op & 0x18], True, -1, False, False,
                                   st_imm=insn.imm)
            return idx + 1
        if cls == Class.LD:
            if op == LDDW:
                self._ld_imm64(st, fr, insn, idx)
                return idx + 1
            return self._ld_abs(st, fr, insn, idx)
        # jumps
        self.jmps += 1
        jop = op & 0xF0
        if jop == Jmp.CALL:
            self._encoding(insn)
            if insn.src == 1:
                return self._pseudo_call(st, idx)
            if insn.src == 2:
                return self._kfunc(st, fr, insn, idx)
            return self._helper(st, fr, insn, idx)
        if jop == Jmp.JA:
            self._encoding(insn)
            return self.cfg.targets[idx]
        if jop == Jmp.EXIT:
            self._encoding(insn)
            return self._exit(st, idx)
        if jop == Jmp.JCOND:
            self._encoding(insn)
            return self._may_goto(st, idx)
        return self._cond(st, fr, insn, idx)

    def _check_sane_dst(self, fr: Frame, r: int) -> None:
        reg = fr.regs[r]
        if reg.type == T.SCALAR and not is_sane(reg):
            c = reg.copy()
            sanitize(c)
            fr.regs[r] = c

    # ------------------------------------------------------------------ ALU
    def _alu(self, st: VState, fr: Frame, insn: Insn, idx: int) -> None:
        op = insn.opcode
        aop = op & 0xF0
        alu32 = op & 7 == Class.ALU
        d = insn.dst
        self._encoding(insn)
        if aop == Alu.NEG or aop == Alu.END:
            dst = self._read(fr, d)
            self._check_dst(d)
            if dst.type != T.SCALAR:
                fr.regs[d] = Reg.unknown()
                return
            r = dst.copy()
            r.precise = False
            if aop == Alu.NEG:
                r.id = 0
                r.off = 0
                scalar_neg(r, alu32)
            else:
                swap = not alu32 or bool(op & 0x08)
                if not scalar_end(r, insn.imm, swap):
                    return
            fr.regs[d] = r
            return
        if aop == Alu.MOV:
            if op & 0x08:
                moved = self._read(fr, insn.src)
                self._check_dst(d)
                self._mov_reg(fr, insn, moved, alu32)
            else:
                self._check_dst(d)
                fr.regs[d] = Reg.const(insn.imm & U32 if alu32 else insn.imm)
            return
        src: Reg | None = self._read(fr, insn.src) if op & 0x08 else None
        dst = self._read(fr, d)
        if (aop == Alu.DIV or aop == Alu.MOD) and not op & 0x08 and insn.imm == 0:
            raise self._reject("div by zero", errno.EINVAL)
        if aop in (Alu.LSH, Alu.RSH, Alu.ARSH) and not op & 0x08:
            limit = 32 if alu32 else 64
            if not 0 <= insn.imm < limit:
                raise self._reject(f"invalid shift {insn.imm}", errno.EINVAL)
        self._check_dst(d)
        if src is None:
            src = Reg.const(insn.imm & U32 if alu32 else insn.imm)
        if dst.type != T.SCALAR or src.type != T.SCALAR:
            self._ptr_alu(fr, insn, aop, alu32, dst, src)
            return
        if op & 0x08 and dst.precise:
            self._mark_precise(insn.src)
        if (aop == Alu.AND or aop == Alu.OR) and src.tm == 0:
            w = fork_width(dst)
            if w:
                other = self._push_branch(idx, idx)
                r = dst.copy()
                if w == 64:
                    r.set_const(0)
                    r.id = 0
                    r.off = 0
                else:
                    mark_32_known(r, 0)
                other.frames[-1].regs[d] = r
                r = dst.copy()
                if w == 64:
                    r.set_const(-1)
                    r.id = 0
                    r.off = 0
                else:
                    mark_32_known(r, -1)
                dst = r
        r = dst.copy()
        old_id = r.id
        scalar_alu(r, src, aop, alu32)
        sanitize(r)
        r.btf = dst.btf if dst.btf and aop in (Alu.ADD, Alu.SUB) and src.tm == 0 and not alu32 else None
        r.id = 0
        r.off = 0
        if (aop == Alu.ADD or aop == Alu.SUB) and old_id and not old_id & ADD_CONST and \
                not (op & 0x08 and insn.src == d):
            self._link_const(r, dst, src, aop, alu32, old_id)
        fr.regs[d] = r

    @staticmethod
    def _link_const(r: Reg, dst: Reg, src: Reg, aop: int, alu32: bool, old_id: int) -> None:
        """``r = dst +/- constant``: keep ``r`` linked to the registers ``dst`` was
        linked to, with the constant as offset (what a later comparison learns
        about one of them is then known about the others)."""
        if alu32:
            if src.tm & U32 or src.s32min != src.s32max or src.u32min != src.u32max:
                return
            off = s32(src.tv)
        else:
            if src.tm or src.smin != src.smax or src.umin != src.umax:
                return
            off = s64(src.tv)
            if not -(1 << 31) <= off <= S32_MAX:
                return
        if aop == Alu.SUB:
            if off == -(1 << 31):
                return
            off = -off
        if alu32 and not (dst.umax <= U32 and dst.umin + off >= 0 and dst.umax + off <= U32):
            return
        r.id = old_id | ADD_CONST
        r.off = off

    def _mov_reg(self, fr: Frame, insn: Insn, src: Reg, alu32: bool) -> None:
        d = insn.dst
        s = insn.src
        off = insn.off
        if not alu32:
            if off == 0:
                if src.type == T.SCALAR:
                    src = self._assign_id(fr, s, src)
                fr.regs[d] = src
                return
            if src.type != T.SCALAR:
                fr.regs[d] = Reg.unknown()
                return
            no_sext = src.umax < (1 << (off - 1))
            if no_sext:
                src = self._assign_id(fr, s, src)
            r = src.copy()
            if not no_sext:
                r.id = 0
                r.off = 0
            coerce_size_sx(r, off >> 3)
            fr.regs[d] = r
            return
        if src.type != T.SCALAR:
            r = Reg.unknown()
        elif off == 0:
            fits = src.umax.bit_length() <= 32
            if fits:
                src = self._assign_id(fr, s, src)
            r = src.copy()
            if not fits:
                r.id = 0
                r.off = 0
        else:
            no_sext = src.umax < (1 << (off - 1))
            if no_sext:
                src = self._assign_id(fr, s, src)
            r = src.copy()
            if not no_sext:
                r.id = 0
                r.off = 0
            coerce_subreg_size_sx(r, off >> 3)
        zext_32_to_64(r)
        sync(r)
        sanitize(r)
        fr.regs[d] = r

    def _assign_id(self, fr: Frame, s: int, src: Reg) -> Reg:
        """Give a copied scalar an id so that what a comparison learns about one copy applies to both."""
        if src.id & ADD_CONST:
            src = src.copy()
            src.id = 0
            src.off = 0
            fr.regs[s] = src
        if not src.id and src.tm != 0:
            src = src.copy()
            src.id = self._new_id()
            fr.regs[s] = src
        return src

    def _ptr_alu(self, fr: Frame, insn: Insn, aop: int, alu32: bool, dst: Reg, src: Reg) -> None:
        d = insn.dst
        if src.type != T.SCALAR and dst.type != T.SCALAR:
            if aop == Alu.SUB:
                fr.regs[d] = Reg.unknown()
                return
            raise self._reject(f"R{d} pointer {_ALU_NAMES.get(aop, '?')} pointer prohibited")
        if dst.type == T.SCALAR:  # scalar += pointer
            self._mark_precise(d)
            ptr, off = src, dst
        else:
            if insn.opcode & 0x08:
                self._mark_precise(insn.src)
            ptr, off = dst, src
        known = off.tm == 0
        if (known and (off.smin != off.smax or off.umin != off.umax)) or off.smin > off.smax or off.umin > off.umax:
            fr.regs[d] = Reg.unknown()
            return
        if alu32:
            if aop == Alu.SUB:
                fr.regs[d] = Reg.unknown()
                return
            raise self._reject(f"R{d} 32-bit pointer arithmetic prohibited")
        kind = type_name(ptr)
        if ptr.null:
            raise self._reject(f"R{d} pointer arithmetic on {kind} prohibited, null-check it first")
        t = ptr.type
        if t == T.CONST_PTR_TO_MAP:
            if not (known and off.smin == 0 and aop == Alu.ADD):
                raise self._reject(f"R{d} pointer arithmetic on {kind} prohibited")
        elif t not in (T.PTR_TO_CTX, T.PTR_TO_MAP_VALUE, T.PTR_TO_MAP_KEY, T.PTR_TO_STACK, T.PTR_TO_BTF_ID,
                       T.PTR_TO_MEM, T.PTR_TO_FUNC):
            raise self._reject(f"R{d} pointer arithmetic on {kind} prohibited")
        self._sane_offset(off, kind)
        self._sane_offset(ptr, kind)
        r = ptr.copy()
        r.precise = False
        r.s32min, r.s32max, r.u32min, r.u32max = -(1 << 31), S32_MAX, 0, U32
        if aop == Alu.ADD:
            c = off.smin
            if known and -(1 << 31) <= ptr.off + c <= S32_MAX:
                r.off = ptr.off + c
            else:
                lo, hi = ptr.smin + off.smin, ptr.smax + off.smax
                if not (S64_MIN <= lo <= S64_MAX and S64_MIN <= hi <= S64_MAX):
                    r.smin, r.smax = S64_MIN, S64_MAX
                else:
                    r.smin, r.smax = lo, hi
                lo, hi = ptr.umin + off.umin, ptr.umax + off.umax
                if lo > U64 or hi > U64:
                    r.umin, r.umax = 0, U64
                else:
                    r.umin, r.umax = lo, hi
                r.tv, r.tm = t_add(ptr.tv, ptr.tm, off.tv, off.tm)
        elif aop == Alu.SUB:
            if ptr is not dst:
                raise self._reject(f"R{d} tried to subtract pointer from scalar")
            if t == T.PTR_TO_STACK:
                raise self._reject(f"R{d} subtraction from stack pointer prohibited")
            c = off.smin
            if known and -(1 << 31) <= ptr.off - c <= S32_MAX:
                r.off = ptr.off - c
            else:
                from .tnum import t_sub

                lo, hi = ptr.smin - off.smax, ptr.smax - off.smin
                if not (S64_MIN <= lo <= S64_MAX and S64_MIN <= hi <= S64_MAX):
                    r.smin, r.smax = S64_MIN, S64_MAX
                else:
                    r.smin, r.smax = lo, hi
                if ptr.umin < off.umax:
                    r.umin, r.umax = 0, U64
                else:
                    r.umin, r.umax = ptr.umin - off.umax, ptr.umax - off.umin
                r.tv, r.tm = t_sub(ptr.tv, ptr.tm, off.tv, off.tm)
        elif aop in (Alu.AND, Alu.OR, Alu.XOR):
            raise self._reject(f"R{d} bitwise operator {_ALU_NAMES[aop]} on pointer prohibited")
        else:
            raise self._reject(f"R{d} pointer arithmetic with {_ALU_NAMES.get(aop, '?')} operator prohibited")
        self._sane_offset(r, kind)
        sync(r)
        sanitize(r)
        fr.regs[d] = r

    def _sane_offset(self, reg: Reg, kind: str) -> None:
        if reg.tm == 0:
            val = s64(reg.tv)
            if val >= MAX_VAR_OFF or val <= -MAX_VAR_OFF:
                raise self._reject(f"math between {kind} pointer and {val} is not allowed", errno.EINVAL)
        if reg.off >= MAX_VAR_OFF or reg.off <= -MAX_VAR_OFF:
            raise self._reject(f"{kind} pointer offset {reg.off} is not allowed", errno.EINVAL)
        if reg.smin == S64_MIN:
            raise self._reject(f"math between {kind} pointer and register with unbounded min value is not allowed",
                               errno.EINVAL)
        if reg.smin >= MAX_VAR_OFF or reg.smin <= -MAX_VAR_OFF:
            raise self._reject(f"value {reg.smin} makes {kind} pointer be out of bounds", errno.EINVAL)

    # ------------------------------------------------------------------ ld_imm64 / ld_abs
    def _ld_imm64(self, st: VState, fr: Frame, insn: Insn, idx: int) -> None:
        self._encoding(insn)
        self._check_dst(insn.dst)
        kind = insn.src
        imm = insn.imm & U64
        d = insn.dst
        if kind == 0:
            fr.regs[d] = Reg.const(imm)
            return
        if kind in (1, 5):
            r = Reg.ptr(T.CONST_PTR_TO_MAP)
            r.map = self.maps[imm & U32]
            self.maps_used.add(imm & U32)
            fr.regs[d] = r
            return
        if kind in (2, 6):
            m = self.maps[imm & U32]
            self.maps_used.add(imm & U32)
            r = Reg.ptr(T.PTR_TO_MAP_VALUE, imm >> 32)
            r.map = m
            fr.regs[d] = r
            return
        if kind == 3:
            r = Reg.ptr(T.PTR_TO_BTF_ID)
            r.btf = "ksym"
            fr.regs[d] = r
            return
        # kind == 4: a function pointer
        if not self.func_info:
            raise self._reject("missing btf func_info", errno.EINVAL)
        r = Reg.ptr(T.PTR_TO_FUNC)
        r.subprog = self.cfg.subprogs.index(self.cfg.targets[idx])
        fr.regs[d] = r

    def _ld_abs(self, st: VState, fr: Frame, insn: Insn, idx: int) -> int:
        from .memory import SKB_TYPES

        if self.prog_type not in SKB_TYPES:
            raise self._reject("BPF_LD_[ABS|IND] instructions not allowed for this program type", errno.EINVAL)
        self._encoding(insn)
        r6 = self._read(fr, 6)
        if st.refs:
            raise self._reject("BPF_LD_[ABS|IND] cannot be mixed with socket references", errno.EINVAL)
        if r6.type != T.PTR_TO_CTX:
            raise self._reject("at the time of BPF_LD_ABS|IND R6 != pointer to skb", errno.EINVAL)
        if insn.opcode & 0xE0 == Mode.IND:
            self._read(fr, insn.src)
        self._check_ptr_off(r6, 6)
        for r in range(0, 6):
            fr.regs[r] = NOT_INIT
        fr.regs[0] = Reg.unknown()
        return idx + 1

    # ------------------------------------------------------------------ branches
    def _may_goto(self, st: VState, idx: int) -> int:
        prev = self._find_prev_entry(st.parent, idx) if st.parent is not None else None
        q = self._push_branch(idx + 1, idx)
        q.may_goto_depth += 1
        if prev is not None:
            self._widen(prev, q)
        return self.cfg.targets[idx]

    def _find_prev_entry(self, ref: VState, idx: int) -> VState | None:
        """The nearest explored state at ``idx`` on the current path (a previous loop iteration)."""
        key = self._state_key(ref, idx)
        for s in self.explored.get(key, ()):
            if s.insn == idx and s.branches and s.dfs_depth < ref.dfs_depth:
                return s
        return None

    def _widen(self, old: VState, cur: VState) -> None:
        """Forget the values of imprecise scalars that changed since the previous
        iteration (so that a loop's states converge)."""
        from .state import IdMap, _regs_exact

        ids = IdMap(self.id_gen + 1000)
        for fo, fc in zip(old.frames, cur.frames, strict=False):
            for i in range(11):
                o, c = fo.regs[i], fc.regs[i]
                if o.type != T.SCALAR or c.type != T.SCALAR or o.precise or c.precise or _regs_exact(o, c, ids):
                    continue
                fc.regs[i] = Reg.unknown()
            for k, os_ in fo.stack.items():
                cs = fc.stack.get(k)
                if cs is None or not os_.spilled or not cs.spilled:
                    continue
                o, c = os_.spill, cs.spill  # type: ignore[assignment]  # 'spilled' means spill is not None
                if o.type != T.SCALAR or c.type != T.SCALAR or o.precise or c.precise or _regs_exact(o, c, ids):
                    continue
                fc.stack[k] = Slot(cs.bytes, Reg.unknown())

    def _cond(self, st: VState, fr: Frame, insn: Insn, idx: int) -> int:
        op = insn.opcode
        jop = op & 0xF0
        j32 = op & 7 == Class.JMP32
        target = self.cfg.targets[idx]
        a = self._read(fr, insn.dst)
        flags = 0
        if op & 0x08:
            self._encoding(insn)
            b = self._read(fr, insn.src)
            if b.type == T.PTR_TO_STACK:
                flags |= SRC_STACK
        else:
            self._encoding(insn)
            b = Reg.const(insn.imm)
        if a.type == T.PTR_TO_STACK:
            flags |= DST_STACK
        if flags:
            self._push_hist(flags)
        a_ptr = a.type != T.SCALAR
        b_ptr = b.type != T.SCALAR
        if a_ptr or b_ptr:
            pred = self._ptr_branch_taken(a, b, jop, j32)
        else:
            pred = branch_taken(a, b, jop, j32)
        if pred >= 0:
            if not a_ptr:
                self._mark_precise(insn.dst)
            if op & 0x08 and not b_ptr:
                self._mark_precise(insn.src)
            return target if pred == 1 else idx + 1
        # linked scalars
        linked: list[tuple[int, int, bool]] = []
        if op & 0x08 and not b_ptr and b.id:
            self._collect_linked(st, b.id, linked)
        if not a_ptr and a.id:
            self._collect_linked(st, a.id, linked)
        if len(linked) > 1:
            self._push_hist(0, linked)
        other = self._push_branch(target, idx)
        ofr = other.frames[-1]
        if not a_ptr and not b_ptr:
            same = bool(op & 0x08) and insn.src == insn.dst
            ta = a.copy()
            tb = ta if same else b.copy()
            refine(ta, tb, jop, j32)
            fa = a.copy()
            fb = fa if same else b.copy()
            refine(fa, fb, REVERSE[jop], j32)
            ofr.regs[insn.dst] = ta
            fr.regs[insn.dst] = fa
            if op & 0x08:
                ofr.regs[insn.src] = tb
                fr.regs[insn.src] = fb
                if b.id:
                    self._sync_linked(st, fr.regs[insn.src], linked)
                    self._sync_linked(other, ofr.regs[insn.src], linked)
            if a.id:
                self._sync_linked(st, fr.regs[insn.dst], linked)
                self._sync_linked(other, ofr.regs[insn.dst], linked)
        if not j32 and op & 0x08 and a_ptr and b_ptr and a.type != T.PTR_TO_BTF_ID and b.type != T.PTR_TO_BTF_ID:
            eq = ofr if jop == Jmp.JEQ else fr if jop == Jmp.JNE else None
            if eq is not None:
                if not a.null and b.null and self._not_null(a):
                    eq.regs[insn.src] = self._nonnull(b)
                if not b.null and a.null and self._not_null(b):
                    eq.regs[insn.dst] = self._nonnull(a)
        if not j32 and not op & 0x08 and insn.imm == 0 and jop in (Jmp.JEQ, Jmp.JNE) and a.null:
            self._mark_ptr_or_null(st, a, jop == Jmp.JNE)
            self._mark_ptr_or_null(other, a, jop == Jmp.JEQ)
        return idx + 1

    @staticmethod
    def _not_null(r: Reg) -> bool:
        return not r.null and r.type in (T.PTR_TO_MAP_VALUE, T.PTR_TO_MAP_KEY, T.PTR_TO_MEM)

    def _ptr_branch_taken(self, a: Reg, b: Reg, jop: int, j32: bool) -> int:
        if j32:
            return -1
        if not (b.type == T.SCALAR and b.tm == 0):
            a, b = b, a
            jop = FLIP.get(jop, jop)
        if not (b.type == T.SCALAR and b.tm == 0):
            return -1
        if not self._not_null(a) or b.tv != 0:
            return -1
        if jop == Jmp.JEQ:
            return 0
        if jop == Jmp.JNE:
            return 1
        return -1

    def _collect_linked(self, st: VState, rid: int, out: list[tuple[int, int, bool]]) -> None:
        base = rid & ~ADD_CONST
        for fi in range(len(st.frames) - 1, -1, -1):
            f = st.frames[fi]
            for j in range(10):
                r = f.regs[j]
                if r.type == T.SCALAR and r.id & ~ADD_CONST == base:
                    if (fi, j, True) in out:
                        continue
                    if len(out) < _LINKED_REGS_MAX:
                        out.append((fi, j, True))
                    else:
                        c = r.copy()
                        c.id = 0
                        c.off = 0
                        f.regs[j] = c
            for k, slot in list(f.stack.items()):
                sp = slot.spill
                if sp is not None and slot.spilled and sp.type == T.SCALAR and sp.id & ~ADD_CONST == base:
                    if (fi, k, False) in out:
                        continue
                    if len(out) < _LINKED_REGS_MAX:
                        out.append((fi, k, False))
                    else:
                        c = sp.copy()
                        c.id = 0
                        c.off = 0
                        f.stack[k] = Slot(slot.bytes, c)

    def _sync_linked(self, st: VState, known: Reg, linked: list[tuple[int, int, bool]]) -> None:
        from .alu import _add32, _add64

        kbase = known.id & ~ADD_CONST
        for fi, n, is_reg in linked:
            f = st.frames[fi]
            if is_reg:
                r = f.regs[n]
            else:
                slot = f.stack.get(n)
                if slot is None or slot.spill is None:
                    continue
                r = slot.spill
            if r.type != T.SCALAR or r is known or r.id & ~ADD_CONST != kbase:
                continue
            if (not r.id & ADD_CONST and not known.id & ADD_CONST) or r.off == known.off:
                c = known.copy()
            else:
                c = known.copy()
                c.off = r.off
                c.id = r.id
                delta = Reg.const(r.off - known.off)
                _add32(c, delta)
                _add64(c, delta)
                c.tv, c.tm = t_add(c.tv, c.tm, delta.tv, delta.tm)
                sync(c)
            c.precise = r.precise
            if is_reg:
                f.regs[n] = c
            else:
                f.stack[n] = Slot(f.stack[n].bytes, c)

    def _mark_ptr_or_null(self, st: VState, ptr: Reg, is_null: bool) -> None:
        pid = ptr.id
        ref = ptr.ref
        if ref and ref == pid and is_null:
            st.refs.pop(ref, None)
        for f in st.frames:
            for i, x in enumerate(f.regs):
                if x.null and x.id == pid:
                    f.regs[i] = Reg.const(0) if is_null else self._nonnull(x)
            for k, slot in list(f.stack.items()):
                sp = slot.spill
                if sp is not None and sp.null and sp.id == pid:
                    f.stack[k] = Slot(slot.bytes, Reg.const(0) if is_null else self._nonnull(sp))

    @staticmethod
    def _nonnull(x: Reg) -> Reg:
        c = x.copy()
        c.null = False
        if c.type == T.PTR_TO_MAP_VALUE and c.map is not None and c.map.inner is not None:
            c.type = T.CONST_PTR_TO_MAP
            c.map = c.map.inner
        c.id = 0
        return c


_ = (EXACT, s64, U64, NOT_INIT)
