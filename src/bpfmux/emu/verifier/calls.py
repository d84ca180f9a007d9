"""Calls and returns in the emulator's verifier: helpers (argument types,
memory arguments, results), kfuncs, bpf-to-bpf calls, callbacks and exits,
with the kernel's rules and messages.

Callbacks (``bpf_loop``, ``bpf_for_each_map_elem``, …) are verified as the
kernel does: the path after the helper continues at once, and a path
entering the callback is queued; when the callback returns, verification
goes back to the helper call, which queues the callback again — until the
states at the call converge (imprecise scalars that changed are widened
to unknown) or, for ``bpf_loop``, the known number of iterations is reached.

:class:`CallsMixin` is part of the verifier (:class:`~.core._Verifier`).
"""

from __future__ import annotations

import errno
import os
from typing import TYPE_CHECKING

from ...isa.disasm import helper_name
from ...uapi import AttachType, HelperId, MapType, ProgType
from .bounds import sync
from .helpers import MIGHT_SLEEP, Arg, HelperProto, Ret, map_compatible, proto_for
from .memory import MemoryMixin
from .reg import NOT_INIT, Reg, T, s64, type_name
from .state import MAX_BPF_STACK, Frame, Slot, VState

if TYPE_CHECKING:
    from ...isa.insn import Insn
    from .core import MapInfo

__all__ = ["MAX_CALL_FRAMES", "CallsMixin"]

#: Most call frames (``MAX_CALL_FRAMES``).
MAX_CALL_FRAMES = 8
#: Largest size a helper memory argument may have (``BPF_MAX_VAR_SIZ``).
_MAX_VAR_SIZ = 1 << 29
_MAX_ERRNO = 4095
#: Helper ids the kernel knows (``__BPF_FUNC_MAX_ID``).
_HELPER_LIMIT = max(HelperId) + 1
_PRIV_STACK_TYPES = {ProgType.KPROBE, ProgType.TRACEPOINT, ProgType.PERF_EVENT, ProgType.RAW_TRACEPOINT,
                     ProgType.TRACING}
_MEM_EXPECTED = "fp, pkt, pkt_meta, map_key, map_value, mem, ringbuf_mem, buf, trusted_ptr_"
_RET_SIZE_HELPERS = {int(HelperId.get_stack), int(HelperId.get_task_stack), int(HelperId.probe_read_str),
                     int(HelperId.probe_read_kernel_str), int(HelperId.probe_read_user_str)}


class _CallMeta:
    __slots__ = ("map", "mem_reg", "mem_null", "alloc_size", "release", "callback", "cb_ctx", "const_key",
                 "msize_max", "raw")

    def __init__(self) -> None:
        self.map: MapInfo | None = None
        self.mem_reg: tuple[int, Reg, bool] | None = None
        self.mem_null = False
        self.alloc_size = 0
        self.release = 0
        self.callback: Reg | None = None
        self.cb_ctx: Reg | None = None
        self.const_key: int | None = None
        self.msize_max = 0
        self.raw = False


class CallsMixin(MemoryMixin):
    """Calls and exits (see the module docstring)."""

    # ------------------------------------------------------------------ bpf-to-bpf calls
    def _pseudo_call(self, st: VState, idx: int) -> int:
        cfg = self.cfg
        target = cfg.targets[idx]
        caller = st.frames[-1]
        if len(st.frames) >= MAX_CALL_FRAMES:
            raise self._reject(f"the call stack of {len(st.frames) + 1} frames is too deep", errno.E2BIG)
        sub = cfg.subprogs.index(target)
        self.call_edges.add((caller.subprog, sub))
        self._enter(st, sub, idx, [caller.regs[i] for i in range(1, 6)])
        for r in range(0, 6):
            caller.regs[r] = NOT_INIT
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

    # ------------------------------------------------------------------ exits
    def _exit(self, st: VState, idx: int) -> int:
        fr = st.frames[-1]
        if len(st.frames) == 1 or fr.is_callback:
            self._check_leak(st, fr)
        if len(st.frames) > 1:
            return self._func_exit(st, idx)
        r0 = self._read(fr, 0)
        self._check_return(r0)
        return -1

    def _check_leak(self, st: VState, fr: Frame) -> None:
        for rid, at in st.refs.items():
            if fr.is_callback and at[1] != fr.frameno:
                continue
            raise self._reject(f"Unreleased reference id={rid} alloc_insn={self.cfg.slots[at[0]]}",
                               errno.EINVAL)

    def _func_exit(self, st: VState, idx: int) -> int:
        callee = st.frames[-1]
        r0 = callee.regs[0]
        if r0.type == T.PTR_TO_STACK:
            raise self._reject("cannot return stack pointer to the caller", errno.EINVAL)
        caller = st.frames[-2]
        if callee.is_callback:
            if r0.type != T.SCALAR:
                raise self._reject("R0 not a scalar value")
            self._mark_precise(0)
            lo, hi = callee.cb_ret
            if r0.smin < lo or r0.smax > hi:
                raise self._reject(f"At callback return the register R0 has{self._scalar_words(r0)} should have "
                                   f"been in [{lo}, {hi}]", errno.EINVAL)
            nxt = callee.callsite
        else:
            caller.regs[0] = r0
            nxt = callee.callsite + 1
        st.frames.pop()
        if callee.is_callback:
            prev = self._find_prev_entry(st, nxt)
            if prev is not None:
                self._widen(prev, st)
        return nxt

    @staticmethod
    def _scalar_words(r: Reg) -> str:
        from .reg import S64_MAX, S64_MIN

        out = ""
        if r.smin > S64_MIN:
            out += f" smin={r.smin}"
        if r.smax < S64_MAX:
            out += f" smax={r.smax}"
        return out or " unknown scalar value"

    def _check_return(self, r0: Reg) -> None:
        pt, at = self.prog_type, self.attach_type
        lo: int | None = None
        hi = 0
        if pt == ProgType.TRACING and at in (AttachType.TRACE_FENTRY, AttachType.TRACE_FEXIT):
            lo, hi = 0, 0
        elif pt == ProgType.KPROBE and at is not None and at in (getattr(AttachType, "TRACE_KPROBE_SESSION", -1),
                                                                 getattr(AttachType, "TRACE_UPROBE_SESSION", -1)):
            lo, hi = 0, 1
        if lo is None:
            return
        if r0.type != T.SCALAR:
            raise self._reject(f"At program exit the register R0 is not a known value ({type_name(r0)})",
                               errno.EINVAL)
        self._mark_precise(0)
        if r0.smin < lo or r0.smax > hi:
            raise self._reject(f"At program exit the register R0 has{self._scalar_words(r0)} should have been in "
                               f"[{lo}, {hi}]", errno.EINVAL)

    # ------------------------------------------------------------------ kfuncs
    def _kfunc(self, st: VState, fr: Frame, insn: Insn, idx: int) -> int:
        info = self.kfuncs.get(insn.imm)
        if info is None:
            raise self._reject(f"calling kernel function {insn.imm} is not allowed", errno.EACCES)
        for r in range(1, info.nargs + 1):
            self._read(fr, r)
        for r in range(1, 6):
            fr.regs[r] = NOT_INIT
        if info.ret == "void":
            fr.regs[0] = NOT_INIT
        elif info.ret == "ptr":
            ret = Reg.ptr(T.PTR_TO_BTF_ID)
            ret.btf = info.name
            ret.null = True
            ret.id = self._new_id()
            fr.regs[0] = ret
        elif info.ret == "mem":
            ret = Reg.ptr(T.PTR_TO_MEM)
            ret.size = info.mem_size
            fr.regs[0] = ret
        else:
            fr.regs[0] = Reg.unknown()
        return idx + 1

    # ------------------------------------------------------------------ helpers
    def _helper(self, st: VState, fr: Frame, insn: Insn, idx: int) -> int:
        hid = insn.imm
        name = helper_name(hid) if hid else "bpf_unspec"
        if not 0 <= hid < _HELPER_LIMIT:
            raise self._reject(f"invalid func unknown#{hid}", errno.EINVAL)
        if hid not in self.allowed:
            raise self._reject(f"program of this type cannot use helper {name}#{hid}", errno.EINVAL)
        proto = proto_for(hid, self.prog_type)
        if proto is None:
            raise self._reject(f"helper {name}#{hid} is not modelled by the bpfmux verifier", errno.EINVAL)
        if proto.gpl_only and not self.gpl:
            raise self._reject("cannot call GPL-restricted function from non-GPL compatible program",
                               errno.EINVAL)
        if hid in MIGHT_SLEEP and not self.sleepable:
            raise self._reject("helper call might sleep in a non-sleepable prog", errno.EINVAL)
        self.helpers_used.add(hid)
        meta = _CallMeta()
        for i, kind in enumerate(proto.args):
            self._check_arg(st, fr, proto, i + 1, kind, meta)
        if meta.release:
            self._release(st, meta.release)
        if hid == HelperId.tail_call:
            if st.refs:
                raise self._reject("tail_call would lead to reference leak", errno.EINVAL)
        pushed_callback = False
        if meta.callback is not None:
            if hid == HelperId.loop:
                self._mark_precise(1)
                fr = st.frames[-1]
                if fr.callback_depth < fr.regs[1].umax:
                    self._push_callback(st, idx, proto, meta)
                    pushed_callback = True
                else:
                    fr.callback_depth = 0
            else:
                self._push_callback(st, idx, proto, meta)
                pushed_callback = True
        fr = st.frames[-1]
        for r in range(0, 6):
            fr.regs[r] = NOT_INIT
        fr.regs[0] = self._helper_result(st, proto, meta, idx)
        m = meta.map
        if m is not None and not map_compatible(hid, m.type):
            if hid == HelperId.tail_call:
                raise self._reject("expected prog array map for tail call", errno.EINVAL)
            raise self._reject(f"cannot pass map_type {int(m.type)} into func {name}#{hid}", errno.EINVAL)
        _ = pushed_callback
        return idx + 1

    def _helper_result(self, st: VState, proto: HelperProto, meta: _CallMeta, idx: int) -> Reg:
        ret = proto.ret
        hid = proto.id
        if ret == Ret.INTEGER:
            r0 = Reg.unknown()
            if hid in _RET_SIZE_HELPERS:
                r0.smax = r0.s32max = meta.msize_max if meta.msize_max <= (1 << 31) - 1 else r0.smax
                r0.smin = r0.s32min = -_MAX_ERRNO
                sync(r0)
            elif hid == HelperId.get_smp_processor_id:
                n = (os.cpu_count() or 1) - 1
                r0.umin = r0.u32min = 0
                r0.umax = r0.u32max = r0.smax = r0.s32max = n
                sync(r0)
            return r0
        if ret == Ret.VOID:
            return NOT_INIT
        if ret in (Ret.MAP_VALUE_OR_NULL, Ret.MAP_VALUE):
            m = meta.map
            r0 = Reg.ptr(T.PTR_TO_MAP_VALUE)
            r0.map = m
            nonnull = ret == Ret.MAP_VALUE or (
                m is not None and m.type in (MapType.ARRAY, MapType.PERCPU_ARRAY) and hid == HelperId.map_lookup_elem
                and meta.const_key is not None and meta.const_key < m.max_entries)
            if not nonnull:
                r0.null = True
                r0.id = self._new_id()
            elif m is not None and m.inner is not None:
                r0.type = T.CONST_PTR_TO_MAP
                r0.map = m.inner
            return r0
        if ret == Ret.ALLOC_MEM_OR_NULL:
            r0 = Reg.ptr(T.PTR_TO_MEM)
            r0.size = meta.alloc_size
            r0.null = True
            r0.id = self._new_id()
            r0.ref = r0.id
            st.refs[r0.ref] = (idx, len(st.frames) - 1)
            return r0
        r0 = Reg.ptr(T.PTR_TO_BTF_ID)
        r0.btf = {HelperId.get_current_task_btf: "task_struct", HelperId.task_pt_regs: "pt_regs"}.get(
            HelperId(hid), None)
        if ret != Ret.BTF_ID:
            r0.null = True
            r0.id = self._new_id()
        return r0

    def _push_callback(self, st: VState, idx: int, proto: HelperProto, meta: _CallMeta) -> None:
        """Queue the path entering the callback (the current path goes on after the helper)."""
        cb = meta.callback
        assert cb is not None
        sub = cb.subprog
        if len(st.frames) >= MAX_CALL_FRAMES:
            raise self._reject(f"the call stack of {len(st.frames) + 1} frames is too deep", errno.E2BIG)
        cs = self._push_branch(self.cfg.subprogs[sub], idx)
        caller = cs.frames[-1]
        self.call_edges.add((caller.subprog, sub))
        if proto.id == HelperId.loop:
            args = [Reg.unknown(), caller.regs[3]]
        else:  # for_each_map_elem
            m = meta.map
            mp = Reg.ptr(T.CONST_PTR_TO_MAP)
            mp.map = m
            key = Reg.ptr(T.PTR_TO_MAP_KEY)
            key.map = m
            key.size = m.key_size if m else 0
            val = Reg.ptr(T.PTR_TO_MAP_VALUE)
            val.map = m
            args = [mp, key, val, caller.regs[3]]
        f = self._enter(cs, sub, idx, args)
        f.is_callback = True
        f.cb_ret = (0, 1)
        cs.callback_unroll_depth += 1
        caller.callback_depth += 1
        st.frames[-1].callback_depth = 0

    def _release(self, st: VState, ref: int) -> None:
        st.refs.pop(ref, None)
        for f in st.frames:
            for i, x in enumerate(f.regs):
                if x.ref == ref:
                    f.regs[i] = Reg.unknown()
            for k, slot in list(f.stack.items()):
                if slot.spill is not None and slot.spill.ref == ref:
                    f.stack[k] = Slot("".join("?" if c == "?" else "m" for c in slot.bytes))

    # ------------------------------------------------------------------ helper arguments
    def _check_arg(self, st: VState, fr: Frame, proto: HelperProto, argno: int, kind: Arg, meta: _CallMeta) -> None:
        reg = self._read(fr, argno)
        name = f"{proto.name}#{proto.id}"
        rn = f"R{argno}"
        if kind == Arg.ANYTHING:
            return
        nullable = kind in (Arg.PTR_TO_CTX_OR_NULL, Arg.PTR_TO_MAP_VALUE_OR_NULL, Arg.PTR_TO_MEM_OR_NULL,
                            Arg.PTR_TO_UNINIT_MEM_OR_NULL, Arg.PTR_TO_STACK_OR_NULL, Arg.PTR_TO_BTF_ID_OR_NULL)
        if nullable and reg.is_null_const:
            self._mark_precise(argno)
            if kind in (Arg.PTR_TO_MEM_OR_NULL, Arg.PTR_TO_UNINIT_MEM_OR_NULL):
                meta.mem_null = True
            if kind == Arg.PTR_TO_STACK_OR_NULL:
                meta.cb_ctx = reg
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
            if reg.type != T.SCALAR:
                raise self._reject(f"{rn} type={type_name(reg)} expected=scalar")
            if reg.tm != 0:
                raise self._reject(f"{rn} is not a known constant'")
            meta.alloc_size = reg.tv
            self._mark_precise(argno)
            return
        if kind in (Arg.PTR_TO_CTX, Arg.PTR_TO_CTX_OR_NULL):
            if reg.type != T.PTR_TO_CTX:
                raise self._reject(f"{rn} type={type_name(reg)} expected=ctx")
            self._check_ptr_off(reg, argno)
            return
        if kind in (Arg.PTR_TO_MAP_KEY, Arg.PTR_TO_MAP_VALUE, Arg.PTR_TO_UNINIT_MAP_VALUE,
                    Arg.PTR_TO_MAP_VALUE_OR_NULL):
            if not self._is_mem_ptr(reg):
                raise self._reject(f"{rn} type={type_name(reg)} expected={_MEM_EXPECTED}")
            m = meta.map
            if m is None:
                raise self._reject(f"invalid map_ptr to access map->{'key' if kind == Arg.PTR_TO_MAP_KEY else 'value'}")
            size = m.key_size if kind == Arg.PTR_TO_MAP_KEY else m.value_size
            write = kind == Arg.PTR_TO_UNINIT_MAP_VALUE
            self._helper_mem(st, argno, reg, size, write, zero_ok=False)
            if kind == Arg.PTR_TO_MAP_KEY:
                meta.const_key = self._const_key(st, reg, size)
            return
        if kind in (Arg.PTR_TO_MEM, Arg.PTR_TO_MEM_OR_NULL, Arg.PTR_TO_UNINIT_MEM, Arg.PTR_TO_UNINIT_MEM_OR_NULL):
            if not self._is_mem_ptr(reg):
                raise self._reject(f"{rn} type={type_name(reg)} expected={_MEM_EXPECTED}")
            meta.mem_reg = (argno, reg, kind in (Arg.PTR_TO_UNINIT_MEM, Arg.PTR_TO_UNINIT_MEM_OR_NULL))
            return
        if kind in (Arg.PTR_TO_LONG, Arg.PTR_TO_INT):
            size = 8 if kind == Arg.PTR_TO_LONG else 4
            if reg.type not in (T.PTR_TO_STACK, T.PTR_TO_MAP_VALUE, T.PTR_TO_MEM, T.PTR_TO_MAP_KEY) or reg.null:
                raise self._reject(f"{rn} type={type_name(reg)} expected=fp, pkt, pkt_meta, map_key, map_value, "
                                   f"mem, ringbuf_mem, buf")
            self._helper_mem(st, argno, reg, size, True, zero_ok=False)
            self._check_alignment(reg, 0, size, True)
            return
        if kind == Arg.PTR_TO_ALLOC_MEM:
            if reg.type != T.PTR_TO_MEM or not reg.ref or reg.null:
                raise self._reject(f"{rn} type={type_name(reg)} expected=ringbuf_mem")
            if reg.off or reg.tm != 0 or reg.tv:
                raise self._reject(f"{rn} must have zero offset when passed to release func")
            if reg.ref not in st.refs:
                raise self._reject(f"{rn} must be referenced when passed to release function", errno.EINVAL)
            meta.release = reg.ref
            return
        if kind == Arg.PTR_TO_FUNC:
            if reg.type != T.PTR_TO_FUNC:
                raise self._reject(f"{rn} type={type_name(reg)} expected=func")
            if reg.off or reg.tm != 0 or reg.tv:
                raise self._reject(f"R{argno} invalid func ptr offset")
            meta.callback = reg
            return
        if kind == Arg.PTR_TO_STACK_OR_NULL:
            if reg.type != T.PTR_TO_STACK:
                raise self._reject(f"{rn} type={type_name(reg)} expected=fp")
            meta.cb_ctx = reg
            return
        if kind == Arg.PTR_TO_CONST_STR:
            if reg.type != T.PTR_TO_MAP_VALUE or reg.null:
                raise self._reject(f"{rn} type={type_name(reg)} expected=map_value")
            if reg.map is None or not reg.map.readonly:
                raise self._reject(f"{rn} does not point to a readonly map'")
            if reg.tm != 0:
                raise self._reject(f"{rn} is not a constant address'")
            return
        if kind in (Arg.PTR_TO_BTF_ID, Arg.PTR_TO_BTF_ID_OR_NULL, Arg.PTR_TO_PERCPU_BTF_ID):
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
        meta.msize_max = reg.umax
        if meta.mem_null:
            meta.mem_null = False
            if reg.umax != 0:
                raise self._reject(f"R{argno - 1} type=scalar expected={_MEM_EXPECTED}")
            self._mark_precise(argno)
            return
        if reg.smin < 0:
            raise self._reject(f"{rn} min value is negative, either use unsigned or 'var &= const'")
        if reg.umin == 0 and not zero_ok:
            raise self._reject(f"{rn} invalid zero-sized read: u64=[{reg.umin},{reg.umax}]")
        if reg.umax >= _MAX_VAR_SIZ:
            raise self._reject(f"{rn} unbounded memory access, use 'var &= const' or 'if (var < const)'")
        if meta.mem_reg is not None:
            pno, ptr, write = meta.mem_reg
            meta.mem_reg = None
            self._helper_mem(st, pno, ptr, reg.umax, write, zero_ok)
        self._mark_precise(argno)

    def _helper_mem(self, st: VState, regno: int, reg: Reg, size: int, write: bool, zero_ok: bool) -> None:
        """``check_helper_mem_access``: a helper may access ``size`` bytes at ``reg``."""
        t = reg.type
        if t == T.PTR_TO_STACK:
            if size == 0 and not zero_ok:
                raise self._reject("invalid zero-sized read")
            lo, hi = self._stack_bounds(st, reg, regno, reg.off, size, write, True)
            if size and write:
                self._stack_clobber(self._stack_frame(st, reg), lo, hi)
            return
        if t == T.PTR_TO_MAP_VALUE:
            m = reg.map
            if write and m is not None and m.readonly:
                raise self._reject(f"write into map forbidden, value_size={m.value_size} off={reg.off} size={size}")
            self._region(reg, regno, reg.off, size, m.value_size if m else 0, zero_ok)
            return
        if t == T.PTR_TO_MEM:
            if write and reg.rdonly:
                raise self._reject(f"R{regno} cannot write into {type_name(reg)}")
            self._region(reg, regno, reg.off, size, reg.size, zero_ok)
            return
        if t == T.PTR_TO_MAP_KEY:
            if write:
                raise self._reject(f"R{regno} cannot write into {type_name(reg)}")
            self._region(reg, regno, reg.off, size, reg.map.key_size if reg.map else reg.size)
            return
        if t == T.PTR_TO_BTF_ID:
            if write:
                raise self._reject(f"only read is supported (R{regno} is {type_name(reg)})")
            return
        raise self._reject(f"R{regno} type={type_name(reg)} expected={_MEM_EXPECTED}")

    def _const_key(self, st: VState, reg: Reg, size: int) -> int | None:
        """The key's value when it is a known constant spilled on the stack."""
        if reg.type != T.PTR_TO_STACK or reg.tm != 0:
            return None
        o = reg.off + s64(reg.tv)
        fr = self._stack_frame(st, reg)
        k = (-o - 1) // 8
        bi = o + 8 * (k + 1)
        slot = fr.stack.get(k)
        if slot is None:
            return None
        b = slot.bytes
        zeros = len(b[bi:]) - len(b[bi:].lstrip("z"))
        if zeros >= size:
            return 0
        sp = slot.spill
        if sp is None or b[0] != "s" or sp.type != T.SCALAR:
            return None
        spills = len(b[bi:]) - len(b[bi:].lstrip("s"))
        if spills != size or sp.tm != 0:
            return None
        from .precision import Backtrack, mark_precise

        bt = Backtrack(len(st.frames) - 1)
        bt.slots[reg.frame] |= 1 << k
        mark_precise(self, bt)
        return sp.tv

    # ------------------------------------------------------------------ stack depth
    def _check_stack_depth(self) -> int:
        cfg = self.cfg
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
                from .cfg import Reject

                raise Reject(errno.EACCES, f"combined stack size of {depth} calls is {acc}. Too large")
            best = max(best, acc)
            if depth > MAX_CALL_FRAMES:
                return
            for c in children.get(k, ()):
                walk(c, acc, depth + 1)

        walk(0, 0, 1)
        return best


# these are the verifier's, declared for type checkers
def _unused() -> None:  # pragma: no cover
    pass
