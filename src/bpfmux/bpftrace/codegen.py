"""Code generation: one BPF program per context, built with
:mod:`bpfmux.isa.build` (no compiler at run time).

Conventions of the generated code:

- ``r6`` holds the context, ``r7`` the probe index (the BPF cookie, the
  syscall filter's answer, or a constant), ``r9`` the per-CPU ``scratch``
  value where strings, tuples, map keys and event records live (so they are
  not limited by the 512-byte stack). Scalar variables and scalar
  temporaries live on the stack, where the verifier tracks their values (so
  ``while ($i < 5)`` is a bounded loop to it, as with bpftrace). ``r8`` is
  free within one node's code.
- A scalar expression leaves its value in ``r0``, sign- or zero-extended to
  64 bits by its type; other values are written to a scratch offset.
- Output calls (``printf``, ``time``, ``print``, ``exit`` …) send a record
  through the ``events`` ring buffer: a u64 action id, then the arguments,
  each in :func:`~bpfmux.bpftrace.types.slot_size` bytes; a full buffer
  counts in ``drops``.
- Maps keep bpftrace's semantics: aggregations are per-CPU hash maps
  (``hist``/``lhist`` keep all buckets of a key in one value), ``min()``
  stores ``0xffffffff - x`` as bpftrace 0.17 does, loops have a ``may_goto``
  budget so the verifier accepts them.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..isa.build import R0, R1, R2, R3, R4, R6, R7, R8, R9, R10, Asm, Program, Reg, Relocation
from ..isa.insn import Insn
from ..record import Value
from ..trace.plan import Mechanism
from ..uapi import AttachType, ProgType
from ..uapi import HelperId as H
from . import ast as A
from .errors import Loc, ScriptError, Source
from .semantic import (
    ARG_REGS,
    JOIN_ARGNUM,
    JOIN_ARGSIZE,
    SYSCALL_ARG_REGS,
    Action,
    ArgsField,
    Checked,
    CtxInfo,
    MapInfo,
    reg_offset,
)
from .types import AGGREGATIONS, K, T, is_scalar, slot_size, tuple_offsets

__all__ = ["CompiledProgram", "compile_context", "map_ref", "program_type"]

SCRATCH_LIMIT = 32 * 1024
_IDX_SLOT = 0
_VARS_START = 8
_STACK_START = -16  #: scalar variables, then scalar temporaries, grow down from here (-8: helper keys)
_STACK_LIMIT = -512
_USER_STACK = 1 << 8
_MIN_BIAS = 0xFFFFFFFF


def map_ref(name: str) -> str:
    """The relocation name of a script map."""
    return f"map:{name}"


def stack_ref(t: T) -> str:
    """The relocation name of the stack trace map a stack type uses."""
    return f"stack:{'k' if t.kind == K.KSTACK else 'u'}:{t.limit}"


def program_type(info: CtxInfo) -> tuple[ProgType, AttachType | None]:
    """The program type (and expected attach type) a context loads as."""
    how = info.ctx.how
    if how in ("special", Mechanism.SYS_ENTER, Mechanism.SYS_EXIT, Mechanism.RAW_TP):
        return ProgType.RAW_TRACEPOINT, None
    if how == Mechanism.TRACEPOINT:
        return ProgType.TRACEPOINT, None
    if how == Mechanism.UPROBE_MULTI:
        return ProgType.KPROBE, AttachType.TRACE_UPROBE_MULTI
    if how == Mechanism.KPROBE_MULTI:
        return ProgType.KPROBE, AttachType.TRACE_KPROBE_MULTI
    if how in (Mechanism.UPROBE, Mechanism.KPROBE):
        return ProgType.KPROBE, None
    if how == Mechanism.FENTRY:
        return ProgType.TRACING, AttachType.TRACE_FENTRY
    if how == Mechanism.FEXIT:
        return ProgType.TRACING, AttachType.TRACE_FEXIT
    return ProgType.PERF_EVENT, None


class CompiledProgram(Value):
    """One generated program and what loading it needs.

    :ivar sysidx: ``sys_enter``/``sys_exit`` programs: syscall number → probe index + 1
        (the in-kernel filter's table, relocation ``sysidx:N``).
    :ivar scratch: bytes of scratch the program uses.
    :ivar stacks: the stack map relocations it uses.
    """

    __slots__ = ("info", "program", "prog_type", "attach_type", "scratch", "sysidx_ref", "sysidx", "stacks")

    info: CtxInfo
    program: Program
    prog_type: ProgType
    attach_type: AttachType | None
    scratch: int
    sysidx_ref: str
    sysidx: dict[int, int]
    stacks: set[str]

    def __init__(
        self,
        info: CtxInfo,
        program: Program,
        prog_type: ProgType,
        attach_type: AttachType | None,
        scratch: int,
        sysidx_ref: str = "",
        sysidx: dict[int, int] | None = None,
        stacks: set[str] | None = None,
    ) -> None:
        self.info = info
        self.program = program
        self.prog_type = prog_type
        self.attach_type = attach_type
        self.scratch = scratch
        self.sysidx_ref = sysidx_ref
        self.sysidx = {} if sysidx is None else sysidx
        self.stacks = set() if stacks is None else stacks

    @property
    def name(self) -> str:
        """A BPF program name (15 characters at most)."""
        base = self.info.ctx.provider
        return {"tracepoint": "bt_tp", "rawtracepoint": "bt_rawtp", "kretprobe": "bt_kretprobe",
                "uretprobe": "bt_uretprobe", "kretfunc": "bt_kretfunc"}.get(base, f"bt_{base}")[:15]  # fmt: skip


class _Break(Exception):
    pass


class Gen:
    """The code generator of one context (see :func:`compile_context`)."""

    def __init__(self, checked: Checked, info: CtxInfo, index: int, start_ns: int, tgid_filter: int | None,
                 may_goto: bool = True, helper_check: int = 0, split_reads: bool = True) -> None:  # fmt: skip
        self.checked = checked
        self.helper_check = helper_check
        self.info = info
        self.ctx = info.ctx
        self.index = index
        self.start_ns = start_ns
        self.a = Asm()
        self.labels = 0
        self.vars: dict[str, tuple[Reg, int]] = {}
        self.stack_top = _STACK_START
        self.var_top = _VARS_START
        self.tmp = 0
        self.tmp_base = 0
        self.high = 0
        self.loops: list[tuple[str, str]] = []
        self.stacks: set[str] = set()
        self.sysidx: dict[int, int] = {}
        self.source = checked.program
        self.tgid_filter = tgid_filter
        self.may_goto = may_goto
        self.split_reads = split_reads

    # -- infrastructure --------------------------------------------------------------------

    def label(self, hint: str) -> str:
        self.labels += 1
        return f"{hint}_{self.labels}"

    def alloc(self, size: int) -> int:
        """A fresh temporary of ``size`` bytes (8-aligned) in scratch."""
        off = self.tmp
        self.tmp += (size + 7) & ~7
        self.high = max(self.high, self.tmp)
        if self.tmp > SCRATCH_LIMIT:
            raise ScriptError(f"the probe needs more than {SCRATCH_LIMIT} bytes of scratch memory", self.ctx.attach.loc)
        return off

    @contextmanager
    def slot8(self) -> Iterator[tuple[Reg, int]]:
        """An 8-byte scalar temporary (``(base register, offset)``): on the stack
        while there is room, else in scratch; freed when the block ends."""
        if self.stack_top - 8 >= _STACK_LIMIT:
            self.stack_top -= 8
            try:
                yield (R10, self.stack_top)
            finally:
                self.stack_top += 8
        else:
            yield (R9, self.alloc(8))

    def t(self, node: A.Expr) -> T:
        return self.info.types[id(node)]

    def fail(self, message: str, node: A.Expr | A.Stmt) -> ScriptError:
        return ScriptError(message, node.loc, self.checked.source)

    def mov_imm(self, reg: Reg, value: int) -> None:
        value &= (1 << 64) - 1
        signed = value - (1 << 64) if value >= (1 << 63) else value
        if -(1 << 31) <= signed < (1 << 31):
            self.a.mov(reg, signed)
        else:
            self.a.ld_imm64(reg, value)

    def zero(self, off: int, size: int) -> None:
        for i in range(0, (size + 7) & ~7, 8):
            self.a.stdw(R9, off + i, 0)

    def copy_from(self, dst: int, src: Reg, src_off: int, size: int) -> None:
        """Copy ``size`` bytes (8-aligned) from ``src + src_off`` into scratch ``dst`` (clobbers r1)."""
        for i in range(0, (size + 7) & ~7, 8):
            self.a.ldxdw(R1, src, src_off + i)
            self.a.stxdw(R9, dst + i, R1)

    def extend(self, t: T) -> None:
        """Make ``r0`` (loaded zero-extended from ``t.size`` bytes) a proper 64-bit value of ``t``."""
        if t.kind == K.INT and t.signed and t.size < 8:
            shift = 64 - 8 * t.size
            self.a.lsh(R0, shift).arsh(R0, shift)

    def truncate(self, size: int, signed: bool) -> None:
        """``r0`` converted to an integer of ``size`` bytes."""
        if size >= 8:
            return
        shift = 64 - 8 * size
        self.a.lsh(R0, shift)
        if signed:
            self.a.arsh(R0, shift)
        else:
            self.a.rsh(R0, shift)

    # -- the program ------------------------------------------------------------------------

    def build(self) -> CompiledProgram:
        a = self.a
        a.mov(R6, R1)
        # scratch: the per-CPU value at key 0
        a.stw(R10, -4, 0)
        a.ld_map_fd(R1, "scratch").mov(R2, R10).add(R2, -4).call(H.map_lookup_elem)
        a.jeq(R0, 0, "exit")
        a.mov(R9, R0)
        if self.tgid_filter is not None:
            a.call(H.get_current_pid_tgid).rsh(R0, 32)
            self.mov_imm(R1, self.tgid_filter)
            a.jne(R0, R1, "exit")
        self.probe_index()
        probe = self.checked.program.probes[self.ctx.block]
        self.var_top = _VARS_START
        for name, t in self.info.vars.items():
            if is_scalar(t) and self.stack_top - 8 >= _STACK_LIMIT + 64:
                self.stack_top -= 8
                self.vars[name] = (R10, self.stack_top)
                a.stdw(R10, self.stack_top, 0)
            else:
                self.vars[name] = (R9, self.var_top)
                self.var_top += slot_size(t)
        self.tmp_base = self.tmp = self.high = self.var_top
        for name, (base, off) in self.vars.items():
            if base == R9:
                self.zero(off, slot_size(self.info.vars[name]))
        if probe.predicate is not None:
            self.tmp = self.tmp_base
            self.scalar(probe.predicate)
            a.jeq(R0, 0, "exit")
        self.block(probe.body)
        a.label("exit")
        a.mov(R0, 0).exit()
        ptype, atype = program_type(self.info)
        prog = prune_unreachable(a.assemble())
        return CompiledProgram(self.info, prog, ptype, atype, self.high, f"sysidx:{self.index}" if self.sysidx else "",
                               self.sysidx, self.stacks)  # fmt: skip

    def probe_index(self) -> None:
        a = self.a
        how = self.ctx.how
        targets = self.ctx.targets
        if how in (Mechanism.SYS_ENTER, Mechanism.SYS_EXIT):
            for p in targets:
                nr = p.info.get("syscall")
                if nr is not None:
                    self.sysidx[int(nr)] = p.idx + 1
            if how == Mechanism.SYS_ENTER:
                a.ldxdw(R1, R6, 8)
            else:
                a.ldxdw(R3, R6, 0).add(R3, reg_offset("orig_ax"))
                a.mov(R1, R9).add(R1, _IDX_SLOT).mov(R2, 8).call(H.probe_read_kernel)
                a.jne(R0, 0, "exit")
                a.ldxdw(R1, R9, _IDX_SLOT)
            a.jge(R1, 1024, "exit")
            a.stxw(R10, -8, R1)
            a.ld_map_fd(R1, f"sysidx:{self.index}").mov(R2, R10).add(R2, -8).call(H.map_lookup_elem)
            a.jeq(R0, 0, "exit")
            a.ldxw(R7, R0, 0)
            a.jeq(R7, 0, "exit")
            a.sub(R7, 1)
        elif len(targets) == 1 or how in ("special", "hardware", Mechanism.FENTRY, Mechanism.FEXIT,
                                           Mechanism.SAMPLING):  # fmt: skip
            self.mov_imm(R7, targets[0].idx if targets else 0)
        else:
            a.mov(R1, R6).call(H.get_attach_cookie).mov(R7, R0)

    # -- statements ----------------------------------------------------------------------------

    def block(self, body: list[A.Stmt]) -> None:
        for s in body:
            self.tmp = self.tmp_base
            self.stmt(s)

    def stmt(self, s: A.Stmt) -> None:
        a = self.a
        if isinstance(s, A.ExprStmt):
            e = s.expr
            if isinstance(e, A.Unop) and e.op in ("++", "--"):
                self.incdec(e)
            elif self.t(e).kind == K.NONE or is_scalar(self.t(e)):
                self.scalar_or_effect(e)
            else:
                self.mem(e)
        elif isinstance(s, A.AssignMap):
            self.assign_map(s)
        elif isinstance(s, A.AssignVar):
            t = self.info.vars[s.var.name]
            base, off = self.vars[s.var.name]
            if is_scalar(t):
                self.scalar(s.expr)
                a.stxdw(base, off, R0)
            else:
                self.to_mem(s.expr, off, t)
        elif isinstance(s, A.If):
            els = self.label("else")
            end = self.label("endif")
            self.scalar(s.cond)
            a.jeq(R0, 0, els)
            self.block(s.then)
            a.ja(end)
            a.label(els)
            if s.orelse:
                self.block(s.orelse)
            a.mov(R0, 0)
            a.label(end)
            a.mov(R0, 0)
        elif isinstance(s, A.Unroll):
            n = self.info.consts[id(s)]
            for _ in range(n):
                self.block(s.body)
        elif isinstance(s, A.While):
            head = self.label("while")
            end = self.label("endwhile")
            a.label(head)
            if self.may_goto:
                a.may_goto(end)
            self.tmp = self.tmp_base
            self.scalar(s.cond)
            a.jeq(R0, 0, end)
            self.loops.append((head, end))
            self.block(s.body)
            self.loops.pop()
            a.ja(head)
            a.label(end)
            a.mov(R0, 0)
        elif isinstance(s, A.Jump):
            if s.kind == "return":
                a.ja("exit")
            elif self.loops:
                head, end = self.loops[-1]
                a.ja(end if s.kind == "break" else head)

    # -- maps ----------------------------------------------------------------------------------

    def map_info(self, name: str) -> MapInfo:
        return self.checked.maps[name]

    def key(self, m: A.MapRef) -> int:
        """Build ``m``'s key in a temporary; its offset."""
        info = self.map_info(m.name)
        off = self.alloc(info.key_size)
        if not m.keys:
            self.a.stdw(R9, off, 0)
            return off
        pos = off
        for k, kt in zip(m.keys, info.keys, strict=True):
            self.to_mem(k, pos, kt)
            pos += slot_size(kt)
        return off

    def lookup(self, map_name: str, key_off: int) -> None:
        """``r0`` = map_lookup_elem(map, scratch + key_off)."""
        self.a.ld_map_fd(R1, map_ref(map_name)).mov(R2, R9).add(R2, key_off).call(H.map_lookup_elem)

    def update(self, map_name: str, key_off: int, val_off: int, flags: int = 0, loc: Loc | None = None,
               lost_race_ok: bool = False) -> None:  # fmt: skip
        """map_update_elem(map, scratch + key_off, scratch + val_off, flags); with ``-k``, a failure is
        reported at ``loc`` (``lost_race_ok``: not ``EEXIST``, which a ``BPF_NOEXIST`` insert that lost a race
        returns)."""
        self.a.ld_map_fd(R1, map_ref(map_name)).mov(R2, R9).add(R2, key_off).mov(R3, R9).add(R3, val_off)
        self.a.mov(R4, flags).call(H.map_update_elem)
        self.check_helper("map_update_elem", loc, ignore=-errno.EEXIST if lost_race_ok else None)

    def check_helper(self, helper: str, loc: Loc | None, level: int = 1, ignore: int | None = None) -> None:
        """``-k`` (level 1: map updates and deletes) and ``-kk`` (level 2: reads too): after a helper call,
        a negative ``r0`` (other than ``ignore``) sends a ``helper_error`` event naming the helper, the error
        and ``loc``, which user space prints as bpftrace's warning. ``r0`` is kept."""
        if self.helper_check < level or loc is None:
            return
        a = self.a
        ok = self.label("helper_ok")
        a.jsge(R0, 0, ok)
        if ignore is not None:
            a.jeq(R0, ignore, ok)
        rec = self.alloc(16)
        a.stxdw(R9, rec + 8, R0)
        actions = self.checked.actions
        actions.append(Action(kind="helper_error", fmt=helper, loc=loc))
        self.mov_imm(R1, len(actions) - 1)
        a.stxdw(R9, rec, R1)
        self.output(rec, 16)
        a.ldxdw(R0, R9, rec + 8)
        a.label(ok)

    def read_helper(self, helper: str, user: bool) -> str:
        """The variant of a read ``helper`` (``probe_read``, ``probe_read_str``) bpftrace calls, by the
        address space of the pointer, else of the probe: ``_user`` for user pointers and in user probes,
        ``_kernel`` in kprobes and kfuncs, the plain helper elsewhere (``BEGIN``, tracepoints …)."""
        provider = self.ctx.provider
        if user or provider in ("uprobe", "uretprobe", "usdt"):
            return helper.replace("probe_read", "probe_read_user")
        if provider in ("kprobe", "kretprobe", "kfunc", "kretfunc"):
            return helper.replace("probe_read", "probe_read_kernel")
        return helper

    def read_call(self, helper: str) -> H:
        """The helper a read named ``helper`` by :meth:`read_helper` calls: that one, or without
        ``split_reads`` the legacy helper, which picks user or kernel memory by the address (the emulated
        kernel's workloads keep a syscall's strings in its one address space)."""
        return H[helper] if self.split_reads else H[helper.replace("_user", "").replace("_kernel", "")]

    def lookup_or_init(self, map_name: str, key_off: int, skip: str, loc: Loc | None = None) -> None:
        """``r8`` = the value of ``key`` in the map, inserted zeroed when absent; ``skip`` when that fails
        (reported at ``loc`` with ``-k``)."""
        info = self.map_info(map_name)
        a = self.a
        found = self.label("found")
        self.lookup(map_name, key_off)
        a.jne(R0, 0, found)
        zero = self.alloc(info.value_size)
        self.zero(zero, info.value_size)
        # BPF_NOEXIST (a lost race is fine: look it up again)
        self.update(map_name, key_off, zero, 1, loc, lost_race_ok=True)
        self.lookup(map_name, key_off)
        a.jeq(R0, 0, skip)
        a.label(found)
        a.mov(R8, R0)

    def assign_map(self, s: A.AssignMap) -> None:
        info = self.map_info(s.map.name)
        e = s.expr
        a = self.a
        if isinstance(e, A.Call) and info.value.kind in AGGREGATIONS:
            self.aggregate(s.map, e, info)
            return
        v = info.value
        val = self.alloc(info.value_size)
        if is_scalar(v):
            self.scalar(e)
            a.stxdw(R9, val, R0)
        else:
            self.to_mem(e, val, v)
        key = self.key(s.map)
        self.update(s.map.name, key, val, 0, s.loc)

    def aggregate(self, m: A.MapRef, call: A.Call, info: MapInfo) -> None:
        a = self.a
        kind = info.value.kind
        if call.args:
            with self.slot8() as (base, arg):
                self.scalar(call.args[0])
                a.stxdw(base, arg, R0)
                self._aggregate(m, info, kind, base, arg, call_span(self.checked.source, call))
        else:
            self._aggregate(m, info, kind, R9, None, call_span(self.checked.source, call))

    def _aggregate(self, m: A.MapRef, info: MapInfo, kind: K, base: Reg, arg: int | None, loc: Loc) -> None:
        a = self.a
        key = self.key(m)
        skip = self.label("agg_done")
        self.lookup_or_init(m.name, key, skip, loc)
        if kind == K.COUNT:
            a.ldxdw(R1, R8, 0).add(R1, 1).stxdw(R8, 0, R1)
        elif kind == K.SUM:
            assert arg is not None
            a.ldxdw(R1, R8, 0).ldxdw(R2, base, arg).add(R1, R2).stxdw(R8, 0, R1)
        elif kind == K.MIN:
            assert arg is not None
            a.ld_imm64(R1, _MIN_BIAS).ldxdw(R2, base, arg).sub(R1, R2)
            a.ldxdw(R2, R8, 0).jslt(R1, R2, skip).stxdw(R8, 0, R1)
        elif kind == K.MAX:
            assert arg is not None
            a.ldxdw(R1, base, arg).ldxdw(R2, R8, 0).jslt(R1, R2, skip).stxdw(R8, 0, R1)
        elif kind in (K.AVG, K.STATS):
            assert arg is not None
            a.ldxdw(R1, R8, 0).add(R1, 1).stxdw(R8, 0, R1)
            a.ldxdw(R1, R8, 8).ldxdw(R2, base, arg).add(R1, R2).stxdw(R8, 8, R1)
        elif kind == K.HIST:
            assert arg is not None
            a.ldxdw(R1, base, arg)
            self.log2_bucket()
            self.bucket_add(R2, info.value.count)
        elif kind == K.LHIST:
            assert arg is not None
            lo, hi, step = info.value.lhist
            buckets = (hi - lo) // step
            done = self.label("lin")
            a.ldxdw(R1, base, arg)
            a.mov(R2, 0)
            self.mov_imm(R3, lo)
            a.jslt(R1, R3, done)
            a.mov(R2, buckets + 1)
            self.mov_imm(R3, hi)
            a.jsgt(R1, R3, done)
            self.mov_imm(R3, lo)
            a.sub(R1, R3).div(R1, step).add(R1, 1).mov(R2, R1)
            a.label(done)
            self.bucket_add(R2, info.value.count)
        a.label(skip)
        a.mov(R0, 0)

    def log2_bucket(self) -> None:
        """``r2`` = bpftrace 0.17's hist() bucket of the signed value in ``r1`` (clobbers r1, r3)."""
        a = self.a
        done = self.label("log2")
        a.mov(R2, 0)
        a.jslt(R1, 0, done)
        a.mov(R2, 1)
        a.jeq(R1, 0, done)
        a.mov(R2, 2)
        for i in range(4, -1, -1):
            nxt = self.label("log2_step")
            a.mov(R3, 1 << (1 << i))
            a.jslt(R1, R3, nxt)
            a.rsh(R1, 1 << i).add(R2, 1 << i)
            a.label(nxt)
        a.label(done)

    def bucket_add(self, idx: Reg, count: int) -> None:
        """``value[idx] += 1`` in the value at ``r8`` (``idx`` clamped to the buckets)."""
        a = self.a
        ok = self.label("bucket")
        a.jlt(idx, count, ok)
        a.mov(idx, count - 1)
        a.label(ok)
        a.lsh(idx, 3).mov(R1, R8).add(R1, idx)
        a.ldxdw(R3, R1, 0).add(R3, 1).stxdw(R1, 0, R3)

    def incdec(self, e: A.Unop) -> None:
        """``x++``/``++x``/``x--``/``--x`` as a statement or an expression (value in ``r0``)."""
        a = self.a
        delta = 1 if e.op == "++" else -1
        target = e.expr
        if isinstance(target, A.Var):
            base, off = self.vars[target.name]
            a.ldxdw(R0, base, off).mov(R1, R0).add(R1, delta).stxdw(base, off, R1)
            if not e.postfix:
                a.mov(R0, R1)
            return
        assert isinstance(target, A.MapRef)
        info = self.map_info(target.name)
        key = self.key(target)
        val = self.alloc(8)
        got = self.label("incdec")
        a.stdw(R9, val, 0)
        self.lookup(target.name, key)
        a.jeq(R0, 0, got)
        a.ldxdw(R1, R0, 0).stxdw(R9, val, R1)
        a.label(got)
        a.ldxdw(R1, R9, val).add(R1, delta)
        old = self.alloc(8)
        a.ldxdw(R2, R9, val).stxdw(R9, old, R2).stxdw(R9, val, R1)
        if info.value.kind in AGGREGATIONS:
            raise self.fail(f"{e.op} cannot be applied to an aggregation map", e)
        self.update(target.name, key, val, 0, e.loc)
        a.ldxdw(R0, R9, old if e.postfix else val)

    # -- scalar expressions ------------------------------------------------------------------------

    def scalar_or_effect(self, e: A.Expr) -> None:
        if isinstance(e, A.Call) and self.t(e).kind == K.NONE:
            self.effect_call(e)
        else:
            self.scalar(e)

    def scalar(self, e: A.Expr) -> None:
        """Code leaving ``e``'s value in ``r0``."""
        a = self.a
        t = self.t(e)
        if not is_scalar(t):
            if t.kind == K.NONE:
                if isinstance(e, A.Call):
                    self.effect_call(e)
                    a.mov(R0, 0)
                    return
            raise self.fail(f"internal: {type(e).__name__} of type {t.describe()} used as a number", e)
        if isinstance(e, A.Int):
            self.mov_imm(R0, e.value)
        elif isinstance(e, A.Param):
            v = len(self.checked.env.params) if e.n == 0 else _param_int(self.checked.env.params, e.n)
            self.mov_imm(R0, v)
        elif isinstance(e, A.Ident):
            self.mov_imm(R0, self.info.consts.get(id(e), 0))
        elif isinstance(e, A.Builtin):
            self.builtin(e)
        elif isinstance(e, A.Var):
            base, off = self.vars[e.name]
            a.ldxdw(R0, base, off)
        elif isinstance(e, A.MapRef):
            key = self.key(e)
            got = self.label("mapread")
            self.lookup(e.name, key)
            a.jeq(R0, 0, got)
            a.ldxdw(R0, R0, 0)
            a.label(got)
            info = self.map_info(e.name)
            if info.value.kind == K.MIN:
                self.min_unbias()
        elif isinstance(e, A.Binop):
            self.binop(e)
        elif isinstance(e, A.Unop):
            self.unop(e)
        elif isinstance(e, A.Ternary):
            els, end = self.label("tern_else"), self.label("tern_end")
            self.scalar(e.cond)
            a.jeq(R0, 0, els)
            self.scalar(e.left)
            a.ja(end)
            a.label(els)
            self.scalar(e.right)
            a.label(end)
            a.mov(R1, 0)
        elif isinstance(e, A.Cast):
            self.scalar(e.expr)
            if t.kind == K.INT:
                self.truncate(t.size, t.signed)
        elif isinstance(e, A.FieldAccess):
            self.field_scalar(e)
        elif isinstance(e, A.TupleIndex):
            off = self.mem(e.expr)
            tt = self.t(e.expr)
            a.ldxdw(R0, R9, off + tuple_offsets(tt)[e.index])
        elif isinstance(e, A.Index):
            self.index_scalar(e)
        elif isinstance(e, A.Call):
            self.call_scalar(e)
        else:
            raise self.fail(f"internal: cannot generate {type(e).__name__}", e)

    def min_unbias(self) -> None:
        """``r0`` (a min() map's stored ``0xffffffff - x``) back to ``x`` (0 stays 0)."""
        a = self.a
        z = self.label("min0")
        a.jeq(R0, 0, z)
        a.ld_imm64(R1, _MIN_BIAS).sub(R1, R0).mov(R0, R1)
        a.label(z)

    def builtin(self, e: A.Builtin) -> None:
        a = self.a
        n = e.name
        t = self.t(e)
        if n == "pid":
            a.call(H.get_current_pid_tgid).rsh(R0, 32)
        elif n == "tid":
            a.call(H.get_current_pid_tgid).mov32(R0, R0)
        elif n in ("uid", "username"):
            a.call(H.get_current_uid_gid).mov32(R0, R0)
        elif n == "gid":
            a.call(H.get_current_uid_gid).rsh(R0, 32)
        elif n == "nsecs":
            a.call(H.ktime_get_ns)
        elif n == "elapsed":
            a.call(H.ktime_get_ns)
            self.mov_imm(R1, self.start_ns)
            a.sub(R0, R1)
        elif n == "cpu":
            a.call(H.get_smp_processor_id)
        elif n == "cgroup":
            a.call(H.get_current_cgroup_id)
        elif n == "rand":
            a.call(H.get_prandom_u32)
        elif n == "numaid":
            a.call(H.get_numa_node_id)
        elif n == "curtask":
            a.call(H.get_current_task)
        elif n in ("probe", "func"):
            a.mov(R0, R7)
        elif n == "cpid":
            self.mov_imm(R0, self.checked.env.child_pid)
        elif n in ("kstack", "ustack"):
            self.stack(t)
        elif n == "retval":
            self.retval(t)
        elif n.startswith("arg"):
            i = int(n[3:])
            a.ldxdw(R0, R6, reg_offset(ARG_REGS[i]))
        elif n.startswith("sarg"):
            i = int(n[4:])
            with self.slot8() as (base, tmp):
                a.stdw(base, tmp, 0)
                a.ldxdw(R3, R6, reg_offset("sp")).add(R3, 8 * (i + 1))
                a.mov(R1, base).add(R1, tmp).mov(R2, 8).call(H.probe_read)
                a.ldxdw(R0, base, tmp)
        else:
            raise self.fail(f"internal: builtin {n}", e)

    def retval(self, t: T) -> None:
        a = self.a
        if self.ctx.how in (Mechanism.FEXIT,):
            sig = self.info.signature
            slots = sum(x.nregs for x in sig.args) if sig is not None else 0
            a.ldxdw(R0, R6, 8 * slots)
            if t.kind == K.INT:
                self.truncate(t.size, t.signed)
        else:
            a.ldxdw(R0, R6, reg_offset("ax"))

    def stack(self, t: T) -> None:
        a = self.a
        ref = stack_ref(t)
        self.stacks.add(ref)
        flags = _USER_STACK if t.kind == K.USTACK else 0
        a.mov(R1, R6).ld_map_fd(R2, ref).mov(R3, flags).call(H.get_stackid)
        a.mov32(R8, R0)
        a.call(H.get_current_pid_tgid).rsh(R0, 32).lsh(R0, 32).or_(R0, R8)

    def binop(self, e: A.Binop) -> None:
        a = self.a
        op = e.op
        if op in ("&&", "||"):
            done = self.label("logic")
            self.scalar(e.left)
            a.mov(R1, 1 if op == "||" else 0)
            if op == "&&":
                a.jeq(R0, 0, done)
            else:
                a.jne(R0, 0, done)
            self.scalar(e.right)
            a.mov(R1, 0)
            a.jeq(R0, 0, done)
            a.mov(R1, 1)
            a.label(done)
            a.mov(R0, R1)
            return
        lt, rt = self.t(e.left), self.t(e.right)
        if lt.kind in (K.STR, K.BUF):
            self.compare_mem(e)
            return
        with self.slot8() as (base, tmp):
            self.scalar(e.left)
            a.stxdw(base, tmp, R0)
            self.scalar(e.right)
            a.mov(R1, R0).ldxdw(R0, base, tmp)
        if lt.kind == K.PTR and rt.kind != K.PTR and op in ("+", "-") and lt.pointee is not None:
            a.mul(R1, max(1, lt.pointee.size))
        if rt.kind == K.PTR and lt.kind != K.PTR and op == "+" and rt.pointee is not None:
            a.mul(R0, max(1, rt.pointee.size))
        signed = bool(self.info.consts.get(id(e), 0))
        if op == "+":
            a.add(R0, R1)
        elif op == "-":
            a.sub(R0, R1)
        elif op == "*":
            a.mul(R0, R1)
        elif op == "/":
            a.div(R0, R1)
        elif op == "%":
            a.mod(R0, R1)
        elif op == "&":
            a.and_(R0, R1)
        elif op == "|":
            a.or_(R0, R1)
        elif op == "^":
            a.xor(R0, R1)
        elif op == "<<":
            a.lsh(R0, R1)
        elif op == ">>":
            a.rsh(R0, R1)
        else:
            jumps = {"==": a.jeq, "!=": a.jne, "<": a.jslt if signed else a.jlt, "<=": a.jsle if signed else a.jle,
                     ">": a.jsgt if signed else a.jgt, ">=": a.jsge if signed else a.jge}  # fmt: skip
            yes = self.label("cmp")
            a.mov(R2, 1)
            jumps[op](R0, R1, yes)
            a.mov(R2, 0)
            a.label(yes)
            a.mov(R0, R2)

    def compare_mem(self, e: A.Binop) -> None:
        """``==``/``!=`` of two strings (C string semantics) or buffers."""
        a = self.a
        lt, rt = self.t(e.left), self.t(e.right)
        differ, same = self.label("str_ne"), self.label("str_eq")
        end = self.label("str_end")
        if isinstance(e.right, A.Str) or isinstance(e.left, A.Str):
            lit = e.right if isinstance(e.right, A.Str) else e.left
            other = e.left if lit is e.right else e.right
            assert isinstance(lit, A.Str)
            ot = self.t(other)
            off = self.mem(other)
            data = lit.value.encode()
            n = min(len(data) + 1, ot.size)
            padded = data + b"\0"
            for i in range(n):
                a.ldxb(R1, R9, off + i).jne(R1, padded[i], differ)
            a.ja(same)
        else:
            l_off = self.mem(e.left)
            r_off = self.mem(e.right)
            n = max(lt.size, rt.size)
            for i in range(n):
                if i < lt.size:
                    a.ldxb(R1, R9, l_off + i)
                else:
                    a.mov(R1, 0)
                if i < rt.size:
                    a.ldxb(R2, R9, r_off + i)
                else:
                    a.mov(R2, 0)
                a.jne(R1, R2, differ)
                if lt.kind == K.STR:
                    a.jeq(R1, 0, same)
            a.ja(same)
        a.label(differ)
        a.mov(R0, 1 if e.op == "!=" else 0).ja(end)
        a.label(same)
        a.mov(R0, 0 if e.op == "!=" else 1)
        a.label(end)
        a.mov(R1, 0)

    def unop(self, e: A.Unop) -> None:
        a = self.a
        op = e.op
        if op in ("++", "--"):
            self.incdec(e)
            return
        if op == "*":
            t = self.t(e)
            self.scalar(e.expr)
            self.read_scalar_at(R0, 0, t, self.t(e.expr).user, e.loc)
            return
        self.scalar(e.expr)
        if op == "-":
            a.neg(R0)
        elif op == "~":
            a.xor(R0, -1)
        elif op == "!":
            yes = self.label("not")
            a.mov(R1, 1).jeq(R0, 0, yes).mov(R1, 0)
            a.label(yes)
            a.mov(R0, R1)

    def read_scalar_at(self, addr: Reg, off: int, t: T, user: bool, loc: Loc | None = None) -> None:
        """``r0`` = the ``t`` at ``addr + off`` in kernel or user memory (``probe_read``; with ``-kk`` a
        failure is reported at ``loc``)."""
        a = self.a
        size = t.size if t.kind == K.INT and t.size in (1, 2, 4, 8) else 8
        with self.slot8() as (base, tmp):
            a.stdw(base, tmp, 0)
            a.mov(R3, addr)
            if off:
                a.add(R3, off)
            helper = self.read_helper("probe_read", user)
            a.mov(R1, base).add(R1, tmp).mov(R2, size).call(self.read_call(helper))
            self.check_helper(helper, loc, level=2)
            a.ldx(size, R0, base, tmp)
        self.extend(t)

    # -- fields, indexes and addresses -------------------------------------------------------------

    def args_field(self, e: A.FieldAccess, f: ArgsField, dst: int | None = None) -> None:
        """``args->field``: its value in ``r0`` (scalars) or at scratch ``dst``."""
        a = self.a
        per = f.per_probe
        values = sorted(set(per.values()))
        if len(values) == 1:
            self._args_one(f, values[0], dst)
            return
        end = self.label("argsf")
        for v in values:
            nxt = self.label("argsf_next")
            for idx in [i for i, x in per.items() if x == v]:
                a.jeq(R7, idx, f"{nxt}_take")
            a.ja(nxt)
            a.label(f"{nxt}_take")
            self._args_one(f, v, dst)
            a.ja(end)
            a.label(nxt)
        a.mov(R0, 0)
        a.label(end)
        a.mov(R1, 0)

    def _args_one(self, f: ArgsField, v: int, dst: int | None) -> None:
        a = self.a
        t = f.type
        how = f.how
        if how == "record":
            if t.kind == K.INT or t.kind == K.PTR:
                size = t.size if t.kind == K.INT and t.size in (1, 2, 4, 8) else 8
                if v % size:
                    raise ScriptError(f"misaligned tracepoint field at offset {v}", None)
                a.ldx(size, R0, R6, v)
                self.extend(t)
                if dst is not None:
                    a.stxdw(R9, dst, R0)
                return
            assert dst is not None
            size = t.size
            self.zero(dst, slot_size(t))
            step = 8
            while v % step or size % step:
                step //= 2
            for i in range(0, size, step):
                a.ldx(step, R1, R6, v + i)
                a.stx(step, R9, dst + i, R1)
            return
        if how == "data_loc":
            assert dst is not None
            self.zero(dst, t.size)
            a.ldxw(R3, R6, v).and_(R3, 0xFFFF).add(R3, R6)
            a.mov(R1, R9).add(R1, dst).mov(R2, t.size).call(H.probe_read_kernel_str)
            return
        if how == "sysarg":
            a.ldxdw(R3, R6, 0).add(R3, reg_offset(SYSCALL_ARG_REGS[v]))
            with self.slot8() as (base, tmp):
                a.stdw(base, tmp, 0)
                a.mov(R1, base).add(R1, tmp).mov(R2, 8).call(H.probe_read_kernel)
                a.ldxdw(R0, base, tmp)
        elif how == "sysret":
            a.ldxdw(R0, R6, 8)
        elif how == "sysnr_enter":
            a.ldxdw(R0, R6, 8)
        elif how == "sysnr_exit":
            a.ldxdw(R3, R6, 0).add(R3, reg_offset("orig_ax"))
            with self.slot8() as (base, tmp):
                a.stdw(base, tmp, 0)
                a.mov(R1, base).add(R1, tmp).mov(R2, 8).call(H.probe_read_kernel)
                a.ldxdw(R0, base, tmp)
        elif how == "slot":
            a.ldxdw(R0, R6, 8 * v)
        elif how == "rawsys_args":
            raise ScriptError("raw_syscalls args->args can only be indexed (args->args[N])", None)
        if t.kind == K.INT:
            self.truncate(t.size, t.signed)
        if dst is not None:
            if is_scalar(t):
                a.stxdw(R9, dst, R0)
            else:
                raise ScriptError(f"internal: args field of type {t.describe()}", None)

    def address(self, e: A.Expr) -> bool:
        """Code leaving the address of lvalue ``e`` (a struct/array in kernel or
        user memory) in ``r0``; ``False`` when ``e`` has no address."""
        a = self.a
        if isinstance(e, A.FieldAccess):
            f = self.info.fields.get(id(e))
            if f is not None:
                return False
            base_t = self.t(e.expr)
            if e.arrow:
                self.scalar(e.expr)
            elif base_t.kind == K.RECORD:
                if not self.address(e.expr):
                    return False
            else:
                return False
            off = self.info.consts.get(id(e), 0)
            if off:
                a.add(R0, off)
            return True
        if isinstance(e, A.Unop) and e.op == "*":
            self.scalar(e.expr)
            return True
        if isinstance(e, A.Index):
            bt = self.t(e.expr)
            if bt.kind == K.ARRAY:
                if not self.address(e.expr):
                    return False
                elem = bt.elems[0].size
            elif bt.kind == K.PTR:
                self.scalar(e.expr)
                elem = bt.pointee.size if bt.pointee is not None else 1
            else:
                return False
            with self.slot8() as (base, tmp):
                a.stxdw(base, tmp, R0)
                self.scalar(e.index)
                a.mul(R0, max(1, elem)).ldxdw(R1, base, tmp).add(R0, R1)
            return True
        return False

    def _is_user(self, e: A.Expr) -> bool:
        t = self.t(e)
        return t.user

    def field_scalar(self, e: A.FieldAccess) -> None:
        a = self.a
        f = self.info.fields.get(id(e))
        t = self.t(e)
        if f is not None:
            self.args_field(e, f)
            return
        if not self.address(e):
            raise self.fail("internal: field without an address", e)
        bits = self.info.consts.get(-id(e))
        self.read_scalar_at(R0, 0, t if not bits else T.int(t.size, False), self._is_user(e.expr), e.loc)
        if bits:
            shift, width = bits >> 8, bits & 0xFF
            if shift:
                a.rsh(R0, shift)
            if width < 32:
                a.and_(R0, (1 << width) - 1)
            elif width < 64:
                self._mask(width)
            if t.signed:
                s = 64 - width
                a.lsh(R0, s).arsh(R0, s)

    def _mask(self, width: int) -> None:
        self.a.ld_imm64(R1, (1 << width) - 1).and_(R0, R1)

    def index_scalar(self, e: A.Index) -> None:
        a = self.a
        t = self.t(e)
        bt = self.t(e.expr)
        if isinstance(e.expr, A.FieldAccess) and id(e.expr) in self.info.fields:
            f = self.info.fields[id(e.expr)]
            if f.how == "rawsys_args":
                v = self.info.consts.get(id(e.index))
                self.scalar(e.index)
                end = self.label("rawargs")
                with self.slot8() as (base, tmp):
                    a.stxdw(base, tmp, R0)
                    a.mov(R0, 0)
                    for i, reg in enumerate(SYSCALL_ARG_REGS):
                        nxt = self.label("rawargs_n")
                        a.ldxdw(R1, base, tmp).jne(R1, i, nxt)
                        a.ldxdw(R3, R6, 0).add(R3, reg_offset(reg))
                        a.mov(R1, base).add(R1, tmp).mov(R2, 8).call(H.probe_read_kernel)
                        a.ldxdw(R0, base, tmp).ja(end)
                        a.label(nxt)
                a.label(end)
                del v
                return
        if bt.kind == K.STR:
            off = self.mem(e.expr)
            self.scalar(e.index)
            ok = self.label("stridx")
            a.jlt(R0, bt.size, ok).mov(R0, 0)
            a.label(ok)
            a.mov(R1, R9).add(R1, off).add(R1, R0).ldxb(R0, R1, 0)
            self.extend(T.int(1, True))
            return
        if bt.kind == K.ARRAY and not self._has_address(e.expr):
            off = self.mem(e.expr)
            self.scalar(e.index)
            ok = self.label("arridx")
            a.jlt(R0, bt.count, ok).mov(R0, 0)
            a.label(ok)
            esize = bt.elems[0].size
            a.mul(R0, esize).mov(R1, R9).add(R1, off).add(R1, R0)
            a.ldx(esize if esize in (1, 2, 4, 8) else 8, R0, R1, 0)
            self.extend(t)
            return
        if not self.address(e):
            raise self.fail("cannot index this expression", e)
        self.read_scalar_at(R0, 0, t, bt.user, e.loc)

    def _has_address(self, e: A.Expr) -> bool:
        if isinstance(e, A.FieldAccess):
            if id(e) in self.info.fields:
                return False
            return e.arrow or self._has_address(e.expr)
        return isinstance(e, A.Unop) and e.op == "*" or isinstance(e, A.Index)

    # -- memory values -------------------------------------------------------------------------

    def mem(self, e: A.Expr) -> int:
        """The scratch offset where ``e``'s (memory) value is (variables in place)."""
        if isinstance(e, A.Var) and not is_scalar(self.t(e)):
            return self.vars[e.name][1]
        t = self.t(e)
        off = self.alloc(slot_size(t))
        self.to_mem(e, off, t)
        return off

    def to_mem(self, e: A.Expr, off: int, want: T) -> None:
        """Write ``e``'s value as a ``want`` (its stored type) at scratch ``off``."""
        a = self.a
        t = self.t(e)
        size = slot_size(want)
        if is_scalar(t) or t.kind == K.NONE:
            self.scalar(e)
            a.stxdw(R9, off, R0)
            return
        if t.kind == K.STR:
            self.string_to(e, off, want.size if want.kind == K.STR else t.size)
            return
        if isinstance(e, A.Builtin) and e.name == "func":  # a uprobe's func: (ip, pid) as a user symbol
            a.ldxdw(R0, R6, reg_offset("ip")).stxdw(R9, off, R0)
            a.call(H.get_current_pid_tgid).rsh(R0, 32).stxdw(R9, off + 8, R0)
            return
        if isinstance(e, A.Var):
            src = self.vars[e.name][1]
            self.zero(off, size)
            for i in range(0, min(size, slot_size(t)), 8):
                a.ldxdw(R1, R9, src + i).stxdw(R9, off + i, R1)
            return
        if isinstance(e, A.MapRef):
            key = self.key(e)
            got, end = self.label("mapmem"), self.label("mapmem_end")
            self.lookup(e.name, key)
            a.jne(R0, 0, got)
            self.zero(off, size)
            a.ja(end)
            a.label(got)
            self.copy_from(off, R0, 0, min(size, slot_size(t)))
            a.label(end)
            a.mov(R0, 0)
            return
        if isinstance(e, A.Ternary):
            els, end = self.label("mtern"), self.label("mtern_end")
            self.scalar(e.cond)
            a.jeq(R0, 0, els)
            self.to_mem(e.left, off, want)
            a.ja(end)
            a.label(els)
            self.to_mem(e.right, off, want)
            a.label(end)
            a.mov(R0, 0)
            return
        if t.kind == K.TUPLE:
            if isinstance(e, A.Tuple):
                wt = want if want.kind == K.TUPLE and len(want.elems) == len(t.elems) else t
                for x, et, o in zip(e.elems, wt.elems, tuple_offsets(wt), strict=True):
                    self.to_mem(x, off + o, et)
                return
        if isinstance(e, A.TupleIndex):
            src = self.mem(e.expr)
            tt = self.t(e.expr)
            o = tuple_offsets(tt)[e.index]
            self.zero(off, size)
            for i in range(0, min(size, slot_size(t)), 8):
                a.ldxdw(R1, R9, src + o + i).stxdw(R9, off + i, R1)
            return
        if isinstance(e, A.Call):
            self.call_mem(e, off, want)
            return
        if isinstance(e, A.FieldAccess) and id(e) in self.info.fields:
            self.args_field(e, self.info.fields[id(e)], off)
            return
        if t.kind in (K.RECORD, K.ARRAY) and self.address(e):
            self.zero(off, size)
            a.mov(R3, R0).mov(R1, R9).add(R1, off).mov(R2, max(1, t.size)).call(H.probe_read)
            return
        raise self.fail(f"cannot evaluate a value of type {t.describe()} here", e)

    def string_to(self, e: A.Expr, off: int, size: int) -> None:
        """A string value into ``size`` bytes at ``off`` (zero padded)."""
        a = self.a
        if isinstance(e, A.Param):
            params = self.checked.env.params
            self.string_literal(params[e.n - 1] if 0 < e.n <= len(params) else "", off, size)
            return
        t = self.t(e)
        if isinstance(e, A.Str):
            self.string_literal(e.value, off, size)
            return
        if isinstance(e, A.Builtin) and e.name == "comm":
            self.zero(off, size)
            a.mov(R1, R9).add(R1, off).mov(R2, min(16, size)).call(H.get_current_comm)
            return
        if isinstance(e, A.Var):
            src = self.vars[e.name][1]
            self.zero(off, size)
            n = min(size, t.size)
            for i in range(0, n - n % 8, 8):
                a.ldxdw(R1, R9, src + i).stxdw(R9, off + i, R1)
            for i in range(n - n % 8, n):
                a.ldxb(R1, R9, src + i).stxb(R9, off + i, R1)
            return
        if isinstance(e, A.MapRef | A.Ternary | A.TupleIndex) or (isinstance(e, A.FieldAccess) and id(e) in self.info.fields):
            if size >= t.size:
                self.to_mem_exact(e, off, size)
                return
            tmp = self.mem(e)
            self.zero(off, size)
            for i in range(0, size - size % 8, 8):
                a.ldxdw(R1, R9, tmp + i).stxdw(R9, off + i, R1)
            for i in range(size - size % 8, size):
                a.ldxb(R1, R9, tmp + i).stxb(R9, off + i, R1)
            return
        if isinstance(e, A.Call) and e.name == "str":
            self.call_str(e, off, size)
            return
        if isinstance(e, A.FieldAccess | A.Index) and self.address(e):
            self.zero(off, size)
            a.mov(R3, R0).mov(R1, R9).add(R1, off).mov(R2, max(1, min(size, t.size))).call(H.probe_read)
            return
        raise self.fail(f"cannot evaluate a string here ({type(e).__name__})", e)

    def string_literal(self, text: str, off: int, size: int) -> None:
        """The bytes of ``text`` (NUL-terminated, cut to ``size``, zero padded) at ``off``."""
        a = self.a
        data = text.encode("utf-8", "surrogateescape")[: size - 1] + b"\0"
        data = data.ljust((size + 7) & ~7, b"\0")
        for i in range(0, len(data), 8):
            word = int.from_bytes(data[i:i + 8], "little")
            if word == 0:
                a.stdw(R9, off + i, 0)
            elif word < (1 << 31):
                a.stdw(R9, off + i, word)
            else:
                a.ld_imm64(R1, word).stxdw(R9, off + i, R1)

    def to_mem_exact(self, e: A.Expr, off: int, size: int) -> None:
        t = self.t(e)
        a = self.a
        if isinstance(e, A.MapRef):
            info = self.map_info(e.name)
            key = self.key(e)
            got, end = self.label("strmap"), self.label("strmap_end")
            self.zero(off, size)
            self.lookup(e.name, key)
            a.jeq(R0, 0, end)
            a.label(got)
            self.copy_from(off, R0, 0, min(size, info.value_size))
            a.label(end)
            a.mov(R0, 0)
        elif isinstance(e, A.Ternary):
            els, end = self.label("stern"), self.label("stern_end")
            self.scalar(e.cond)
            a.jeq(R0, 0, els)
            self.string_to(e.left, off, size)
            a.ja(end)
            a.label(els)
            self.string_to(e.right, off, size)
            a.label(end)
            a.mov(R0, 0)
        elif isinstance(e, A.TupleIndex):
            src = self.mem(e.expr)
            o = tuple_offsets(self.t(e.expr))[e.index]
            self.zero(off, size)
            for i in range(0, slot_size(t), 8):
                a.ldxdw(R1, R9, src + o + i).stxdw(R9, off + i, R1)
        else:
            assert isinstance(e, A.FieldAccess)
            self.zero(off, size)
            self.args_field(e, self.info.fields[id(e)], off)

    # -- calls ---------------------------------------------------------------------------------

    def call_str(self, e: A.Call, off: int, size: int) -> None:
        a = self.a
        argt = self.t(e.args[0])
        if argt.kind == K.STR or isinstance(e.args[0], A.Param):  # str($1) is the parameter's text
            self.string_to(e.args[0], off, size)
            return
        self.zero(off, size)
        helper = self.read_helper("probe_read_str", argt.user)
        if len(e.args) == 2:
            lim = self.alloc(8)
            self.scalar(e.args[1])
            a.add(R0, 1)
            ok = self.label("strlen")
            a.jle(R0, size, ok).mov(R0, size)
            a.label(ok)
            a.stxdw(R9, lim, R0)
            self.scalar(e.args[0])
            a.mov(R3, R0)
            self.load_len(lim, size)
            a.mov(R1, R9).add(R1, off).call(self.read_call(helper))
        else:
            self.scalar(e.args[0])
            a.mov(R3, R0).mov(R1, R9).add(R1, off).mov(R2, size).call(self.read_call(helper))
        self.check_helper(helper, call_span(self.checked.source, e), level=2)

    def load_len(self, lim: int, size: int) -> None:
        """``r2`` = the length kept in scratch at ``lim``, bounded to 1 … ``size`` here: a value reloaded from
        memory has lost the bounds the verifier knew, and a read's length must be proven to fit."""
        a = self.a
        a.ldxdw(R2, R9, lim)
        pos, fits = self.label("lenpos"), self.label("lenfits")
        a.jgt(R2, 0, pos).mov(R2, 1)
        a.label(pos)
        a.jle(R2, size, fits).mov(R2, size)
        a.label(fits)

    def call_scalar(self, e: A.Call) -> None:
        a = self.a
        n = e.name
        if n in ("kaddr", "uaddr", "sizeof", "cgroupid"):
            self.mov_imm(R0, self.info.consts[id(e)])
        elif n == "ksym":
            self.scalar(e.args[0])
        elif n == "reg":
            a.ldxdw(R0, R6, self.info.consts[id(e)])
        elif n in ("kstack", "ustack"):
            self.stack(self.t(e))
        elif n == "strerror":
            self.scalar(e.args[0])
        elif n == "bswap":
            t = self.t(e)
            self.scalar(e.args[0])
            if t.size > 1:
                a.be(R0, t.size * 8)
        elif n == "strncmp":
            self.strncmp(e)
        else:
            raise self.fail(f"internal: {n}() as a number", e)

    def strncmp(self, e: A.Call) -> None:
        a = self.a
        n = self.info.consts.get(id(e.args[2]))
        if n is None:
            n = e.args[2].value if isinstance(e.args[2], A.Int) else 0
        l_off, r_off = self.mem(e.args[0]), self.mem(e.args[1])
        lt, rt = self.t(e.args[0]), self.t(e.args[1])
        differ, same, end = self.label("sn_ne"), self.label("sn_eq"), self.label("sn_end")
        for i in range(min(n, max(lt.size, rt.size))):
            if i < lt.size:
                a.ldxb(R1, R9, l_off + i)
            else:
                a.mov(R1, 0)
            if i < rt.size:
                a.ldxb(R2, R9, r_off + i)
            else:
                a.mov(R2, 0)
            a.jne(R1, R2, differ).jeq(R1, 0, same)
        a.ja(same)
        a.label(differ)
        a.mov(R0, 1).ja(end)
        a.label(same)
        a.mov(R0, 0)
        a.label(end)
        a.mov(R1, 0)

    def call_mem(self, e: A.Call, off: int, want: T) -> None:
        a = self.a
        n = e.name
        t = self.t(e)
        if n == "usym":
            self.scalar(e.args[0])
            a.stxdw(R9, off, R0)
            a.call(H.get_current_pid_tgid).rsh(R0, 32).stxdw(R9, off + 8, R0)
        elif n == "buf":
            size = t.size
            self.zero(off, slot_size(t))
            if len(e.args) == 2:
                lim = self.alloc(8)
                self.scalar(e.args[1])
                ok = self.label("buflen")
                a.jle(R0, size, ok).mov(R0, size)
                a.label(ok)
                a.stxdw(R9, lim, R0).stxdw(R9, off, R0)
                self.scalar(e.args[0])
                a.mov(R3, R0)
                self.load_len(lim, size)
                a.mov(R1, R9).add(R1, off + 8).call(H.probe_read)
            else:
                a.stdw(R9, off, size)
                if not self.address(e.args[0]):
                    self.scalar(e.args[0])
                a.mov(R3, R0).mov(R1, R9).add(R1, off + 8).mov(R2, size).call(H.probe_read)
        elif n == "strftime":
            a.stdw(R9, off, 0)
            self.scalar(e.args[1])
            a.stxdw(R9, off + 8, R0)
        elif n == "macaddr":
            self.zero(off, 8)
            if not self.address(e.args[0]):
                self.scalar(e.args[0])
            a.mov(R3, R0).mov(R1, R9).add(R1, off).mov(R2, 6).call(H.probe_read)
        elif n == "ntop":
            self.zero(off, 24)
            addr = e.args[-1]
            at = self.t(addr)
            fam = None
            if len(e.args) == 2:
                fam = self.alloc(8)
                self.scalar(e.args[0])
                a.stxdw(R9, fam, R0)
            if at.kind == K.INT:
                self.scalar(addr)
                a.stxw(R9, off + 8, R0)
                if fam is None:
                    a.stdw(R9, off, 2)
                else:
                    a.ldxdw(R1, R9, fam).stxdw(R9, off, R1)
            else:
                length = 4 if at.size == 4 else 16
                if at.kind == K.PTR or self._has_address(addr):
                    if at.kind == K.PTR:
                        self.scalar(addr)
                    else:
                        self.address(addr)
                    a.mov(R3, R0).mov(R1, R9).add(R1, off + 8).mov(R2, length).call(H.probe_read)
                else:
                    src = self.mem(addr)
                    for i in range(0, length, 4):
                        a.ldxw(R1, R9, src + i).stxw(R9, off + 8 + i, R1)
                if fam is None:
                    a.stdw(R9, off, 2 if length == 4 else 10)
                else:
                    a.ldxdw(R1, R9, fam).stxdw(R9, off, R1)
        elif n == "str":
            self.call_str(e, off, want.size if want.kind == K.STR else t.size)
        else:
            raise self.fail(f"internal: {n}() value", e)

    # -- output calls ------------------------------------------------------------------------------

    def emit(self, action: int, args: list[tuple[A.Expr, T]], extra: int = 0) -> None:
        """Send a record: the action id, then each argument in its slot."""
        a = self.a
        size = 8 + sum(slot_size(t) for _, t in args)
        rec = self.alloc(size)
        pos = rec + 8
        for x, t in args:
            self.to_mem(x, pos, t)
            pos += slot_size(t)
        self.mov_imm(R1, action)
        a.stxdw(R9, rec, R1)
        self.output(rec, size)

    def output(self, rec: int, size: int) -> None:
        a = self.a
        ok = self.label("out_ok")
        a.ld_map_fd(R1, "events").mov(R2, R9).add(R2, rec).mov(R3, size).mov(R4, 0).call(H.ringbuf_output)
        a.jeq(R0, 0, ok)
        a.stw(R10, -8, 0)
        a.ld_map_fd(R1, "drops").mov(R2, R10).add(R2, -8).call(H.map_lookup_elem)
        a.jeq(R0, 0, ok)
        a.mov(R1, 1).atomic_add(R0, 0, R1)
        a.label(ok)

    def effect_call(self, e: A.Call) -> None:
        a = self.a
        n = e.name
        action = self.info.actions.get(id(e))
        if n in ("printf", "system", "cat"):
            assert action is not None
            act = self.checked.actions[action]
            self.emit(action, list(zip(e.args[1:], act.args, strict=True)))
        elif n == "time":
            assert action is not None
            self.emit(action, [])
        elif n == "exit":
            assert action is not None
            self.emit(action, [])
            a.ja("exit")
        elif n in ("clear", "zero"):
            assert action is not None
            self.emit(action, [])
        elif n == "print":
            assert action is not None
            act = self.checked.actions[action]
            if act.kind == "print_map":
                self.emit(action, [])
            else:
                self.emit(action, [(e.args[0], act.args[0])])
        elif n == "join":
            assert action is not None
            self.join(e, action)
        elif n == "delete":
            m = e.args[0]
            assert isinstance(m, A.MapRef)
            key = self.key(m)
            if self.map_info(m.name).array:  # bpftrace stores zero in an array instead of deleting
                val = self.alloc(8)
                a.stdw(R9, val, 0)
                self.update(m.name, key, val, 0)
            else:
                a.ld_map_fd(R1, map_ref(m.name)).mov(R2, R9).add(R2, key).call(H.map_delete_elem)
                self.check_helper("map_delete_elem", call_span(self.checked.source, e))
        elif n == "signal":
            if id(e) in self.info.consts:
                a.mov(R1, self.info.consts[id(e)])
            else:
                self.scalar(e.args[0])
                a.mov(R1, R0)
            a.call(H.send_signal)
        else:
            raise self.fail(f"internal: {n}() as a statement", e)

    def join(self, e: A.Call, action: int) -> None:
        a = self.a
        size = 8 + JOIN_ARGNUM * JOIN_ARGSIZE
        rec = self.alloc(size)
        ptr = self.alloc(8)
        base = self.alloc(8)
        self.mov_imm(R1, action)
        a.stxdw(R9, rec, R1)
        self.scalar(e.args[0])
        a.stxdw(R9, base, R0)
        done = self.label("join_done")
        for i in range(JOIN_ARGNUM):
            slot = rec + 8 + i * JOIN_ARGSIZE
            a.stb(R9, slot, 0)
        for i in range(JOIN_ARGNUM):
            slot = rec + 8 + i * JOIN_ARGSIZE
            a.stdw(R9, ptr, 0)
            a.ldxdw(R3, R9, base).add(R3, 8 * i)
            a.mov(R1, R9).add(R1, ptr).mov(R2, 8).call(H.probe_read)
            a.ldxdw(R3, R9, ptr).jeq(R3, 0, done)
            a.mov(R1, R9).add(R1, slot).mov(R2, JOIN_ARGSIZE).call(H.probe_read_str)
        a.label(done)
        self.output(rec, size)


def prune_unreachable(prog: Program) -> Program:
    """``prog`` without the instructions no path reaches (code after ``exit()``,
    ``break``, ``return``), which the verifier refuses; jumps and relocations follow."""
    insns = prog.insns
    slots, pos = [], 0
    for insn in insns:
        slots.append(pos)
        pos += insn.size
    at_slot = {s: i for i, s in enumerate(slots)}

    def successors(i: int) -> list[int]:
        insn = insns[i]
        cls, op = insn.opcode & 0x07, insn.opcode & 0xF0
        nxt = [i + 1] if i + 1 < len(insns) else []
        if cls not in (0x05, 0x06):
            return nxt
        if op == 0x90:  # exit
            return []
        if op == 0x80:  # call
            return nxt
        rel = insn.imm if (cls == 0x06 and op == 0x00) else insn.off
        target = at_slot.get(slots[i] + 1 + rel)
        out = [target] if target is not None else []
        if op == 0x00:  # ja
            return out
        return nxt + out

    seen = [False] * len(insns)
    todo = [0]
    while todo:
        i = todo.pop()
        if i >= len(insns) or seen[i]:
            continue
        seen[i] = True
        todo.extend(successors(i))
    if all(seen):
        return prog
    keep = [i for i in range(len(insns)) if seen[i]]
    new_index = {old: new for new, old in enumerate(keep)}
    new_slot, pos = {}, 0
    for old in keep:
        new_slot[old] = pos
        pos += insns[old].size
    out: list[Insn] = []
    for old in keep:
        insn = insns[old]
        cls, op = insn.opcode & 0x07, insn.opcode & 0xF0
        if cls in (0x05, 0x06) and op not in (0x80, 0x90):
            wide = cls == 0x06 and op == 0x00
            rel = insn.imm if wide else insn.off
            target = at_slot[slots[old] + 1 + rel]
            new_rel = new_slot[target] - new_slot[old] - 1
            insn = Insn(insn.opcode, insn.dst, insn.src, insn.off if wide else new_rel, new_rel if wide else insn.imm)
        out.append(insn)
    relocs = [Relocation(new_index[r.index], new_slot[r.index], r.kind, r.ref, r.offset)
              for r in prog.relocations if r.index in new_index]  # fmt: skip
    labels = {k: new_index[v] for k, v in prog.labels.items() if v in new_index}
    return Program(out, relocs, labels)


def _param_int(params: list[str], n: int) -> int:
    if not 0 < n <= len(params):
        return 0
    try:
        return int(params[n - 1], 0)
    except ValueError:
        return 0


def compile_context(checked: Checked, info: CtxInfo, index: int, *, start_ns: int = 0,
                    tgid_filter: int | None = None, may_goto: bool = True, helper_check: int = 0,
                    split_reads: bool = True) -> CompiledProgram:  # fmt: skip
    """Generate the program of one context.

    :param index: the context's number (names its ``sysidx`` table).
    :param start_ns: ``elapsed``'s zero (the kernel clock's ns when tracing began).
    :param tgid_filter: only run for this process (``-p``/``-c`` with uprobes).
    :param may_goto: give ``while`` loops a ``may_goto`` budget (kernels since 6.9), so
        loops the verifier cannot bound by their variables still load.
    :param helper_check: ``-k`` (1) or ``-kk`` (2): report helper errors (see :meth:`Gen.check_helper`).
    :param split_reads: reads call the ``_user``/``_kernel`` helpers bpftrace calls (see :meth:`Gen.read_call`).
    :raises ScriptError: something the generator cannot express.
    """
    try:
        return Gen(checked, info, index, start_ns, tgid_filter, may_goto, helper_check, split_reads).build()
    except ScriptError as e:
        if e.script is None:
            raise ScriptError(e.message, e.loc or info.ctx.attach.loc, checked_source(checked)) from None
        raise
    except (ValueError, KeyError, AssertionError, IndexError) as e:  # a generator bug must still say where
        raise ScriptError(f"bpfmux cannot compile this probe ({type(e).__name__}: {e})", info.ctx.attach.loc,
                          checked_source(checked), construct=f"probe {info.ctx.attach.text}") from None  # fmt: skip


def call_span(source: Source | None, e: A.Call) -> Loc:
    """Where a call is, from its name to its closing parenthesis when both are on one line (as bpftrace
    places a call's warnings), else its name."""
    line = source.line(e.loc.line) if source is not None else ""
    i = e.loc.col - 1 + len(e.name)
    while i < len(line) and line[i] in " \t":
        i += 1
    if i >= len(line) or line[i] != "(":
        return e.loc
    depth, quote = 0, False
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 1  # the escaped character
            elif c == '"':
                quote = False
        elif c == '"':
            quote = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return Loc(e.loc.line, e.loc.col, i + 2 - e.loc.col)
        i += 1
    return e.loc


def checked_source(checked: Checked) -> Any:
    """The script ``checked`` came from (for error excerpts)."""
    return checked.source
