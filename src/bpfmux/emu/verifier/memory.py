"""Memory accesses in the emulator's verifier: loads, stores and atomics on the
stack, the context, map keys and values, helper memory, BTF objects and
map pointers, with the kernel's rules and messages (``check_mem_access``).

The stack follows the kernel's model: writes of whole registers at 8-byte
aligned slots (or narrower scalars at a slot's start) are *spills* that a
later load of the same size gets back exactly; other writes leave data
(or zeros) of unknown value; never-written bytes read as unknown data
(privileged programs may read uninitialized stack). Spills and fills are
recorded in the jump history for precision tracking.

:class:`MemoryMixin` is part of the verifier (:class:`~.core._Verifier`).
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from ...uapi import ProgType
from .base import VerifierParts
from .bounds import coerce_size, coerce_size_sx, is_sane, mark_unbounded
from .precision import stack_flags
from .reg import NOT_INIT, S64_MIN, Reg, T, s64, type_name
from .state import EMPTY_SLOT, MAX_BPF_STACK, MAX_VAR_OFF, Frame, Slot, VState
from .tnum import U64

if TYPE_CHECKING:
    from .core import MapInfo

__all__ = ["SKB_TYPES", "MemoryMixin"]

#: Program types with an ``__sk_buff`` context (legacy packet loads allowed).
SKB_TYPES = frozenset({ProgType.SOCKET_FILTER, ProgType.SCHED_CLS, ProgType.SCHED_ACT})
_ATOMIC_LOAD_ACQ = 0x100
_ATOMIC_STORE_REL = 0x110
_CMPXCHG = 0xF1


def _slot_of(o: int) -> tuple[int, int]:
    """Stack slot and byte index (0 = lowest address) of frame offset ``o`` (negative)."""
    k = (-o - 1) // 8
    return k, o + 8 * (k + 1)


def _tnum_str(r: Reg) -> str:
    return f"({r.tv:#x}; {r.tm:#x})"


def _spill_bytes(slot: Slot, size: int) -> str:
    """Byte types after spilling ``size`` bytes at a slot's start: the other
    bytes keep zeros and never-written bytes, the rest become data."""
    if size == 8:
        return "ssssssss"
    return "s" * size + "".join(c if c in "z?" else "m" for c in slot.bytes[size:])


def _scrub(slot: Slot) -> str:
    """Byte types after a data write into a slot holding a spilled register:
    the spill (and any zeros) become data."""
    b = slot.bytes
    if b[0] == "s":
        return "".join("?" if c == "?" else "m" for c in b)
    return b


class MemoryMixin(VerifierParts):
    """Memory access checks (see the module docstring)."""

    # ------------------------------------------------------------------ entry point
    def _check_mem_access(self, st: VState, regno: int, off: int, size: int, write: bool, value_regno: int,
                          strict: bool, sx: bool, st_imm: int | None = None) -> None:
        """``*(size *)(R<regno> + off)``: read into ``value_regno`` (-1: nowhere), or write
        ``value_regno`` (-1: unknown data; ``st_imm``: the immediate of ``ST``)."""
        fr = st.frames[-1]
        reg = fr.regs[regno]
        t = reg.type
        self._check_alignment(reg, off, size, strict)
        off += reg.off
        if reg.null and t != T.SCALAR:
            raise self._reject(f"R{regno} invalid mem access '{type_name(reg)}'")
        result: Reg | None = None
        if t == T.PTR_TO_STACK:
            self._stack_bounds(st, reg, regno, off, size, write, False)
            if write:
                self._stack_write(st, reg, regno, off, size, value_regno, st_imm)
            else:
                result = self._stack_read(st, reg, regno, off, size, value_regno)
        elif t == T.PTR_TO_MAP_KEY:
            if write:
                raise self._reject(f"write to change key R{regno} not allowed")
            self._region(reg, regno, off, size, reg.map.key_size if reg.map else reg.size)
            result = Reg.unknown()
        elif t == T.PTR_TO_MAP_VALUE:
            m = reg.map
            vs = m.value_size if m is not None else 0
            if write and m is not None and m.readonly:
                raise self._reject(f"write into map forbidden, value_size={vs} off={off} size={size}")
            self._region(reg, regno, off, size, vs)
            if not write:
                result = self._map_value_load(m, reg, off, size, sx)
        elif t == T.PTR_TO_MEM:
            if write and reg.rdonly:
                raise self._reject(f"R{regno} cannot write into {type_name(reg)}")
            self._region(reg, regno, off, size, reg.size)
            if not write:
                result = Reg.unknown()
        elif t == T.PTR_TO_CTX:
            self._check_ptr_off(reg, regno)
            result = self._ctx_access(off, size, write)
        elif t == T.PTR_TO_BTF_ID:
            if write:
                raise self._reject(f"only read is supported (R{regno} is {type_name(reg)})")
            if reg.tm != 0:
                raise self._reject(f"R{regno} is {type_name(reg)} invalid variable offset: off={reg.off}, "
                                   f"var_off={_tnum_str(reg)}")
            if off < 0:
                raise self._reject(f"R{regno} is {type_name(reg)} invalid negative access: off={off}")
            result = self._btf_load(size)
        elif t == T.CONST_PTR_TO_MAP:
            if write:
                raise self._reject("only read from bpf_map is supported")
            if off < 0:
                raise self._reject(f"R{regno} is {type_name(reg)} invalid negative access: off={off}")
            result = Reg.unknown()
        elif t == T.SCALAR and reg.btf and not write:
            # a value loaded from a kernel object: the kernel knows it as a pointer
            result = self._btf_load(size)
        else:
            raise self._reject(f"R{regno} invalid mem access '{type_name(reg)}'")
        if write or value_regno < 0 or result is None:
            return
        if size < 8 and result.type == T.SCALAR:
            result = result.copy()
            if sx:
                coerce_size_sx(result, size)
            else:
                coerce_size(result, size)
        fr.regs[value_regno] = result

    def _btf_load(self, size: int) -> Reg:
        r = Reg.unknown()
        if size == 8:
            r.btf = "?"
        return r

    def _check_alignment(self, reg: Reg, off: int, size: int, strict: bool) -> None:
        if size == 1:
            return
        t = reg.type
        if t == T.PTR_TO_STACK:
            desc = "stack "
        elif strict:
            desc = {T.PTR_TO_MAP_KEY: "key ", T.PTR_TO_MAP_VALUE: "value ", T.PTR_TO_CTX: "context "}.get(t, "")
        else:
            return
        total = (reg.off + off) & U64
        from .tnum import t_add

        v, m = t_add(reg.tv, reg.tm, total, 0)
        if (v | m) & (size - 1):
            raise self._reject(f"misaligned {desc}access off {_tnum_str(reg)}+{reg.off}+{off} size {size}")

    def _check_ptr_off(self, reg: Reg, regno: int) -> None:
        """The context pointer must be unmodified (``check_ptr_off_reg``)."""
        name = type_name(reg)
        if reg.off < 0:
            raise self._reject(f"negative offset {name} ptr R{regno} off={reg.off} disallowed")
        if reg.off:
            raise self._reject(f"dereference of modified {name} ptr R{regno} off={reg.off} disallowed")
        if reg.tm != 0 or reg.tv:
            raise self._reject(f"variable {name} access var_off={_tnum_str(reg)} disallowed")

    # ------------------------------------------------------------------ regions with bounds
    def _region(self, reg: Reg, regno: int, off: int, size: int, mem_size: int, zero_ok: bool = False) -> None:
        """``check_mem_region_access``: the whole variable range must fit."""
        smin = reg.smin
        if smin < 0 and (smin == S64_MIN or not -(1 << 31) <= off + smin <= (1 << 31) - 1 or smin + off < 0):
            raise self._reject(f"R{regno} min value is negative, either use unsigned index or do a if "
                               f"(index >=0) check.")
        if not self._fits(reg, regno, smin + off, size, mem_size, zero_ok):
            raise self._reject(f"R{regno} min value is outside of the allowed memory range")
        if reg.umax >= MAX_VAR_OFF:
            raise self._reject(f"R{regno} unbounded memory access, make sure to bounds check any such access")
        if not self._fits(reg, regno, reg.umax + off, size, mem_size, zero_ok):
            raise self._reject(f"R{regno} max value is outside of the allowed memory range")

    def _fits(self, reg: Reg, regno: int, off: int, size: int, mem_size: int, zero_ok: bool) -> bool:
        size_ok = size > 0 or (size == 0 and zero_ok)
        if off >= 0 and size_ok and off + size <= mem_size:
            return True
        t = reg.type
        if t == T.PTR_TO_MAP_KEY:
            msg = f"invalid access to map key, key_size={mem_size} off={off} size={size}"
        elif t == T.PTR_TO_MAP_VALUE:
            msg = f"invalid access to map value, value_size={mem_size} off={off} size={size}"
        else:
            msg = f"invalid access to memory, mem_size={mem_size} off={off} size={size}"
        if reg.tm == 0 or not self._quiet_region:
            raise self._reject(msg)
        raise self._reject(msg)

    _quiet_region = False

    def _map_value_load(self, m: MapInfo | None, reg: Reg, off: int, size: int, sx: bool) -> Reg:
        if m is not None and m.frozen is not None and reg.tm == 0 and m.readonly:
            start = off + s64(reg.tv)
            data = m.frozen
            if 0 <= start and start + size <= len(data):
                v = int.from_bytes(data[start:start + size], "little")
                if sx and size < 8:
                    sign = 1 << (8 * size - 1)
                    v = (v & (sign - 1)) - (v & sign)
                return Reg.const(v)
        return Reg.unknown()

    # ------------------------------------------------------------------ context
    def _ctx_access(self, off: int, size: int, write: bool) -> Reg | None:
        verdict = self.ctx.check(off, size, write)
        if not verdict.ok:
            raise self._reject(verdict.reason)
        if write:
            return None
        self.max_ctx_off = max(self.max_ctx_off, off + size)
        if verdict.load == "ptr_to_packet":
            raise self._reject(f"{self.ctx.name}: packet pointers are not modelled by the bpfmux verifier",
                               errno.EINVAL)
        if verdict.load == "ptr_to_btf_id":
            r = Reg.ptr(T.PTR_TO_BTF_ID)
            r.btf = verdict.field.btf_type if verdict.field else None
            return r
        return Reg.unknown()

    # ------------------------------------------------------------------ stack
    def _stack_frame(self, st: VState, reg: Reg) -> Frame:
        return st.frames[reg.frame]

    def _note_depth(self, fr: Frame, d: int) -> None:
        if d > self.depth.get(fr.subprog, 0):
            self.depth[fr.subprog] = d

    def _stack_bounds(self, st: VState, reg: Reg, regno: int, off: int, size: int, write: bool, helper: bool,
                      what: str | None = None) -> tuple[int, int]:
        """``check_stack_access_within_bounds``: returns the lowest and highest offsets touched."""
        extra = what or (" write to" if write else " read from")
        if reg.tm == 0:
            lo = s64(reg.tv) + off
            hi = lo + size
        else:
            if reg.smax >= MAX_VAR_OFF or reg.smin <= -MAX_VAR_OFF:
                raise self._reject(f"invalid unbounded variable-offset{extra} stack R{regno}")
            lo = reg.smin + off
            hi = reg.smax + off + size
        err = 0
        if lo < -MAX_BPF_STACK or lo > -1:
            err = errno.EACCES
        elif hi > 0:
            err = errno.EINVAL
        if err:
            if reg.tm == 0:
                raise self._reject(f"invalid{extra} stack R{regno} off={off} size={size}", err)
            raise self._reject(f"invalid variable-offset{extra} stack R{regno} var_off={_tnum_str(reg)} off={off} "
                               f"size={size}", err)
        self._note_depth(self._stack_frame(st, reg), -lo)
        return lo, hi

    def _stack_write(self, st: VState, ptr: Reg, regno: int, off: int, size: int, value_regno: int,
                     st_imm: int | None) -> None:
        fr = self._stack_frame(st, ptr)
        cur = st.frames[-1]
        val = cur.regs[value_regno] if value_regno >= 0 else None
        if ptr.tm != 0:
            self._stack_write_var(fr, ptr, off, size, val, value_regno, st_imm)
            return
        o = s64(ptr.tv) + off
        k, bi = _slot_of(o)
        slot = fr.stack.get(k, EMPTY_SLOT)
        if val is not None and bi == 0 and val.type == T.SCALAR:
            fits = val.umax.bit_length() <= 8 * size
            if fits:
                val = self._assign_id(cur, value_regno, val)
            spill = val
            if not fits and val.id:
                spill = val.copy()
                spill.id = 0
            fr.stack[k] = Slot(_spill_bytes(slot, size), spill)
        elif val is None and st_imm is not None and bi == 0:
            fr.stack[k] = Slot(_spill_bytes(slot, size), Reg.const(st_imm))
        elif val is not None and val.type != T.SCALAR:
            if size != 8:
                raise self._reject("invalid size of register spill")
            if fr is not cur and val.type == T.PTR_TO_STACK:
                raise self._reject("cannot spill pointers to stack into stack frame of the caller", errno.EINVAL)
            fr.stack[k] = Slot("ssssssss", val)
        else:
            kind = "m"
            if (val is not None and val.is_null_const) or (val is None and st_imm == 0):
                if value_regno >= 0:
                    self._mark_precise(value_regno)
                kind = "z"
            b = _scrub(slot)
            fr.stack[k] = Slot(b[:bi] + kind * size + b[bi + size:])
            return
        self._push_hist(stack_flags(fr.frameno, k))

    def _stack_write_var(self, fr: Frame, ptr: Reg, off: int, size: int, val: Reg | None, value_regno: int,
                         st_imm: int | None) -> None:
        lo = ptr.smin + off
        hi = ptr.smax + off + size
        zero = (val is not None and val.is_null_const) or (val is None and st_imm == 0)
        zero_used = False
        for o in range(lo, hi):
            k, bi = _slot_of(o)
            slot = fr.stack.get(k, EMPTY_SLOT)
            c = slot.bytes[bi]
            sp = slot.spill
            if zero and c == "s" and sp is not None and sp.type == T.SCALAR and sp.tm == 0 and sp.tv == 0:
                zero_used = True
                continue
            b = _scrub(slot)
            if zero and c == "z":
                zero_used = True
                new = "z"
            else:
                new = "m"
            fr.stack[k] = Slot(b[:bi] + new + b[bi + 1:])
        if zero_used and value_regno >= 0:
            self._mark_precise(value_regno)

    def _stack_read(self, st: VState, ptr: Reg, regno: int, off: int, size: int, dst: int) -> Reg | None:
        fr = self._stack_frame(st, ptr)
        if ptr.tm != 0:
            if dst < 0:
                raise self._reject(f"variable offset stack pointer cannot be passed into helper function; "
                                   f"var_off={_tnum_str(ptr)} off={off} size={size}")
            return self._stack_value(fr, ptr.smin + off, ptr.smax + off + size)
        o = s64(ptr.tv) + off
        k, bi = _slot_of(o)
        slot = fr.stack.get(k, EMPTY_SLOT)
        b = slot.bytes
        sp = slot.spill
        if b[0] == "s" and sp is not None:
            spill_size = 8 - len(b.lstrip("s"))
            flags = stack_flags(fr.frameno, k)
            if size != 8 or spill_size != 8:
                if sp.type != T.SCALAR:
                    raise self._reject("invalid size of register fill")
                if dst < 0:
                    return None
                if size <= spill_size and bi == 0:
                    r = sp
                    if sp.umax.bit_length() > size * 8 and (sp.id or sp.off):
                        r = sp.copy()
                        r.id = 0
                        r.off = 0
                    self._push_hist(flags)
                    return r
                seg = b[bi:bi + size]
                if seg == "s" * size and sp.tm == 0 and sp.tv == 0:
                    self._push_hist(flags)
                    return Reg.const(0)
                if seg == "z" * size:
                    return Reg.const(0)
                return Reg.unknown()
            self._push_hist(flags)
            return sp if dst >= 0 else None
        if dst < 0:
            return None
        if b[bi:bi + size] == "z" * size:
            return Reg.const(0)
        return Reg.unknown()

    def _stack_value(self, fr: Frame, lo: int, hi: int) -> Reg:
        """What a variable-offset read of ``[lo, hi)`` gives: zero if every byte is, else unknown."""
        for o in range(lo, hi):
            k, bi = _slot_of(o)
            if fr.stack.get(k, EMPTY_SLOT).bytes[bi] != "z":
                return Reg.unknown()
        return Reg.const(0)

    def _stack_clobber(self, fr: Frame, lo: int, hi: int) -> None:
        """A helper may write anything to ``[lo, hi)``: data, spills there are gone."""
        for o in range(lo, hi):
            k, bi = _slot_of(o)
            slot = fr.stack.get(k, EMPTY_SLOT)
            b = _scrub(slot)
            fr.stack[k] = Slot(b[:bi] + "m" + b[bi + 1:])

    # ------------------------------------------------------------------ atomics
    def _atomic(self, st: VState, fr: Frame, insn) -> None:
        imm = insn.imm
        size = {0x00: 4, 0x08: 2, 0x10: 1, 0x18: 8}[insn.opcode & 0x18]
        if imm == _ATOMIC_LOAD_ACQ:
            self._read(fr, insn.src)
            self._check_dst(insn.dst)
            base = fr.regs[insn.src]
            if base.type == T.PTR_TO_CTX:
                raise self._reject(f"BPF_ATOMIC loads from R{insn.src} {type_name(base)} is not allowed")
            self._check_mem_access(st, insn.src, insn.off, size, False, insn.dst, True, False)
            return
        if imm == _ATOMIC_STORE_REL:
            self._read(fr, insn.src)
            self._read(fr, insn.dst)
            base = fr.regs[insn.dst]
            if base.type == T.PTR_TO_CTX:
                raise self._reject(f"BPF_ATOMIC stores into R{insn.dst} {type_name(base)} is not allowed")
            self._check_mem_access(st, insn.dst, insn.off, size, True, insn.src, True, False)
            return
        self._read(fr, insn.src)
        self._read(fr, insn.dst)
        if imm == _CMPXCHG:
            self._read(fr, 0)
        base = fr.regs[insn.dst]
        if base.type == T.PTR_TO_CTX:
            raise self._reject(f"BPF_ATOMIC stores into R{insn.dst} {type_name(base)} is not allowed")
        load = -1
        if imm & 1:
            load = 0 if imm == _CMPXCHG else insn.src
            self._check_dst(load)
        self._check_mem_access(st, insn.dst, insn.off, size, False, -1, True, False)
        if load >= 0:
            self._check_mem_access(st, insn.dst, insn.off, size, False, load, True, False)
        self._check_mem_access(st, insn.dst, insn.off, size, True, -1, True, False)


_ = (NOT_INIT, is_sane, mark_unbounded)
