"""The fast tier: BPF functions translated to Python functions.

Each BPF function (the program's entry, every bpf-to-bpf call target and
callback) becomes one Python function ``F<slot>(rs, r1, r2, r3, r4, r5,
depth)`` whose registers are local variables. The function's control-flow
graph is turned back into structured code: a natural loop becomes a ``for``
loop over a bounded range (the watchdog: ``VM.max_loop_iterations``
iterations per entry), a forward branch an ``if``, a join point code that
follows (guarded by a "next block" variable only where several paths meet
with different targets). There is no per-instruction dispatch; an irreducible
graph falls back to a block-dispatch loop.

Memory accesses go straight to the region buffers: ``r10``-relative
accesses with a constant offset to the frame's ``bytearray``, others through
``space.rbufs[addr >> 32]`` / ``space.wbufs[...]`` with ``addr & 0xFFFFFFFF``
as offset. Python itself raises on an unmapped slot or an access past the
end of the buffer; :func:`convert_exception` turns that into the same
:class:`~bpfmux.errors.EmulatorFault` the checked tier raises, using the
generated code's line → slot table and the registers in the frame.

The source of a program depends only on its code and resolved constants, so
identical programs share one compiled code object (:data:`_CODE_CACHE`).
"""

from __future__ import annotations

import functools
import hashlib
import re
import struct
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...errors import BpfmuxError, EmulatorFault
from ...isa.flow import CFG, COND, EXIT, FALL, FAULT, GOTO, OUTSIDE, live_out, regs_read, regs_written
from ...isa.insn import Insn
from . import interp
from .interp import INVALID, MIDDLE_OF_LDDW, s32
from .runtime import MAX_CALL_FRAMES, RunState

if TYPE_CHECKING:
    from .machine import EmuProgram

M64 = 0xFFFFFFFFFFFFFFFF
M32 = 0xFFFFFFFF
S64 = 1 << 63
S32 = 1 << 31
_SIZE = {0x00: 4, 0x08: 2, 0x10: 1, 0x18: 8}
_FILE_PREFIX = "<bpf-fast "

#: filename → (line → slot, slot → (size, write) of its memory access)
_DEBUG: dict[str, tuple[list[int], dict[int, tuple[int, bool]]]] = {}
_CODE_CACHE: dict[str, types.CodeType] = {}
_CODE_CACHE_MAX = 512

_REG_RE = re.compile(r"\br(\d+)\b")
_ST = {n: struct.Struct(f) for n, f in ((1, "<B"), (2, "<H"), (4, "<I"), (8, "<Q"))}
_STS = {n: struct.Struct(f) for n, f in ((1, "<b"), (2, "<h"), (4, "<i"))}


_NONE: frozenset[int] = frozenset()
_FP = frozenset((10,))


@functools.lru_cache(maxsize=4096)
def _rw(insn: Insn | None) -> tuple[frozenset[int], frozenset[int]]:
    """Registers an instruction reads and writes as the VM runs it (r10 left out: it never changes)."""
    if insn is None:
        return _NONE, _NONE
    return regs_read(insn, abi=False) - _FP, regs_written(insn, abi=False)


class _Fallback(Exception):
    """Structured emission is impossible for this function."""


class _Lines:
    """Generated lines, each with the slot it belongs to."""

    def __init__(self) -> None:
        self.items: list[tuple[int, str, int]] = []

    def add(self, indent: int, text: str, pc: int = -1) -> None:
        self.items.append((indent, text, pc))

    def extend(self, other: _Lines, extra: int = 0) -> None:
        self.items.extend((i + extra, t, p) for i, t, p in other.items)

    def last_is_transfer(self, level: int) -> bool:
        """Whether the last line is a transfer statement at indentation ``level``."""
        if not self.items:
            return False
        ind, text, _ = self.items[-1]
        return ind == level and text.startswith(("return", "continue", "break", "raise"))


class _Func:
    """Emits one BPF function."""

    def __init__(self, mod: _Module, entry: int) -> None:
        self.mod = mod
        self.prog = mod.prog
        self.code = mod.prog.code
        self.entry = entry
        self.slots = mod.prog.slots
        self.cfg = CFG(self.slots, entry)
        self.sym: dict[int, tuple[Any, ...]] = {}
        self.exit_value = "r0"
        self.live_out = live_out(self.cfg, _rw)
        self.live_after: dict[int, frozenset[int]] = {}
        self.fusable: set[int] = set()

    # -- register values within a block ---------------------------------------------
    #
    # While a block is emitted, a register may hold a *pending* value instead
    # of its local variable: a copy of another register ("r", n), a constant
    # ("k", value) or the frame pointer plus an offset ("fp", off). Reads use
    # the pending value (copy and constant propagation, stack addresses
    # resolved at translation time); a write to a register first materialises
    # every pending copy of it; the block's end materialises everything.

    def v(self, r: int) -> str:
        """Expression for the current (u64) value of register ``r``."""
        sym = self.sym.get(r)
        if sym is None:
            return f"r{r}"
        kind, x = sym[0], sym[1]
        if kind == "r":
            return f"r{x}"
        if kind == "k":
            return str(x)
        if kind == "e":
            return f"({x})"
        return f"(r10 + {x})" if x >= 0 else f"(r10 - {-x})"

    def const(self, r: int) -> int | None:
        sym = self.sym.get(r)
        return sym[1] if sym is not None and sym[0] == "k" else None

    def fp_off(self, r: int) -> int | None:
        """Offset from the frame pointer when ``r`` is known to be r10 + offset."""
        if r == 10:
            return 0
        sym = self.sym.get(r)
        return sym[1] if sym is not None and sym[0] == "fp" else None

    def before_write(self, r: int, out: _Lines, ind: int, pc: int) -> None:
        """Materialise pending values that read ``r``; forget ``r``'s own."""
        for d, sym in list(self.sym.items()):
            if (sym[0] == "r" and sym[1] == r) or (sym[0] == "e" and r in sym[2]):
                if not (sym[0] == "e" and sym[3] == pc):  # consumed by this very instruction
                    out.add(ind, f"r{d} = {self.v(d)}", pc)
                del self.sym[d]
        self.sym.pop(r, None)

    def assign(self, r: int, expr: str, out: _Lines, ind: int, pc: int) -> None:
        self.before_write(r, out, ind, pc)
        out.add(ind, f"r{r} = {expr}", pc)

    def set_sym(self, r: int, sym: tuple[str, int], out: _Lines, ind: int, pc: int) -> None:
        if sym == ("r", r):
            return
        self.before_write(r, out, ind, pc)
        self.sym[r] = sym

    def flush(self, out: _Lines, ind: int, pc: int, live: frozenset[int] | None = None) -> None:
        """Materialise the pending registers in ``live`` (all by default) and
        forget the others (end of a block)."""
        for d in sorted(self.sym):
            if live is None or d in live:
                out.add(ind, f"r{d} = {self.v(d)}", pc)
        self.sym.clear()

    # -- instruction statements ------------------------------------------------

    def stmts(self, pc: int, out: _Lines, ind: int) -> None:
        """Statements of the (non-terminator part of the) instruction at ``pc``."""
        op, dst, src, off, imm = self.code[pc]
        mod = self.mod
        cls = op & 0x07
        if op == INVALID:
            out.add(ind, f"raise _BAD({pc}, {self.prog.invalid.get(pc, 'malformed')!r})", pc)
            return
        if op == MIDDLE_OF_LDDW:
            out.add(ind, f"raise _E('insn {pc}: jump into the middle of an lddw', pc={pc})", pc)
            return
        if cls in (0x04, 0x07):
            self.alu(op, dst, src, off, imm, pc, out, ind)
            return
        if cls == 0x01:  # LDX
            size = _SIZE[op & 0x18]
            signed = op & 0xE0 == 0x80
            mod.debug[pc] = (size, False)
            self.assign(dst, self.load(src, off, size, signed, pc), out, ind, pc)
            return
        if cls in (0x02, 0x03):
            size = _SIZE[op & 0x18]
            mode = op & 0xE0
            if mode == 0xC0:
                self.atomic(pc, dst, src, off, imm, size, out, ind)
                return
            mod.debug[pc] = (size, True)
            if cls == 0x03:
                k = self.const(src)
                if k is not None:
                    value = str(k & ((1 << (8 * size)) - 1))
                else:
                    value = self.v(src) if size == 8 else f"{self.v(src)} & {(1 << (8 * size)) - 1}"
            else:
                value = str((imm & M64) & ((1 << (8 * size)) - 1))
            out.add(ind, self.store(dst, off, size, value, pc), pc)
            return
        if op == 0x18:
            self.set_sym(dst, ("k", imm & M64), out, ind, pc)
            return
        if cls == 0x00:  # ld_abs / ld_ind
            size = _SIZE[op & 0x18]
            where = f"{s32(imm)}" if op & 0xE0 == 0x20 else \
                f"{s32(imm)} + ((({self.v(src)} & {M32}) ^ {S32}) - {S32})"
            out.add(ind, f"_v = _LDPKT(_rs, {pc}, {size}, {where})", pc)
            out.add(ind, "if _v is None:", pc)
            out.add(ind + 1, "return 0", pc)
            self.assign(0, "_v", out, ind, pc)
            return
        if cls == 0x05 and op & 0xF0 == 0x80:
            self.call(pc, op, dst, src, imm, out, ind)
            return
        raise BpfmuxError(f"internal error: no statement for insn {pc} (opcode {op:#x})")  # pragma: no cover

    def alu(self, op: int, dst: int, src: int, off: int, imm: int, pc: int, out: _Lines, ind: int) -> None:
        is64 = op & 0x07 == 0x07
        o = op & 0xF0
        k = not op & 0x08
        kv = ((imm & M64) if is64 else (imm & M32)) if k else self.const(src)
        da = self.const(dst)
        # constant folding, with the interpreter's exact semantics
        if o == 0xD0 and da is not None:
            self.set_sym(dst, ("k", interp.endian(op, da, imm, pc)), out, ind, pc)
            return
        if o != 0xD0 and kv is not None and (da is not None or o == 0xB0):
            b = kv if is64 or k else kv & M32
            self.set_sym(dst, ("k", interp.alu(o, da or 0, b, is64, off, imm, pc)), out, ind, pc)
            return
        # frame pointer arithmetic and copies
        if is64 and o == 0xB0 and off == 0 and not k and self.sym.get(src, ("r",))[0] != "e":
            if src == 10:
                self.set_sym(dst, ("fp", 0), out, ind, pc)
            else:
                self.set_sym(dst, self.sym.get(src, ("r", src)), out, ind, pc)
            return
        fp = self.fp_off(dst)
        if is64 and fp is not None and kv is not None and o in (0x00, 0x10):
            delta = kv - (1 << 64) if kv >> 63 else kv
            self.set_sym(dst, ("fp", fp + (delta if o == 0x00 else -delta)), out, ind, pc)
            return
        expr = self.alu_expr(op, dst, src, off, imm, pc, kv)
        if dst not in self.live_after.get(pc, frozenset((dst,))):
            self.before_write(dst, out, ind, pc)  # a dead value: not computed (ALU ops have no side effects)
            return
        if pc in self.fusable:
            self.before_write(dst, out, ind, pc)
            self.sym[dst] = ("e", expr, frozenset(int(r) for r in _REG_RE.findall(expr)), self.fuse_use[pc])
            return
        self.assign(dst, expr, out, ind, pc)

    def alu_expr(self, op: int, dst: int, src: int, off: int, imm: int, pc: int, kv: int | None) -> str:
        """Expression of the new value of ``dst``."""
        is64 = op & 0x07 == 0x07
        o = op & 0xF0
        a = self.v(dst)
        if o == 0xD0:
            if op & 0x08 or is64:  # to big endian / bswap
                if imm == 16:
                    return f"(({a} & 255) << 8) | (({a} >> 8) & 255)"
                return f"_BSWAP({a}, {imm})"
            return a if imm == 64 else f"{a} & {(1 << imm) - 1}"
        b = str(kv if is64 or kv is None else kv & M32) if kv is not None else self.v(src)
        if is64:
            if o == 0x00:
                return a if kv == 0 else f"({a} + {b}) & {M64}"
            if o == 0x10:
                return a if kv == 0 else f"({a} - {b}) & {M64}"
            if o == 0x20:
                return f"({a} * {b}) & {M64}"
            if o == 0x30 and off == 0:
                if kv is not None:
                    return f"{a} // {b}" if kv else "0"
                return f"({a} // {b} if {b} else 0)"
            if o == 0x90 and off == 0:
                if kv is not None:
                    return f"{a} % {b}" if kv else a
                return f"({a} % {b} if {b} else {a})"
            if o == 0x40:
                return f"{a} | {b}"
            if o == 0x50:
                return f"{a} & {b}"
            if o == 0xA0:
                return f"{a} ^ {b}"
            if o in (0x60, 0x70, 0xC0):
                sh = str(kv & 63) if kv is not None else f"({b} & 63)"
                if o == 0x60:
                    return f"({a} << {sh}) & {M64}"
                if o == 0x70:
                    return f"{a} >> {sh}"
                return f"((({a} ^ {S64}) - {S64}) >> {sh}) & {M64}"
            if o == 0x80:
                return f"-{a} & {M64}"
            if o == 0xB0 and off == 0:
                return b
            if o == 0xB0 and kv is None:
                bits = off
                return f"((({b} & {(1 << bits) - 1}) ^ {1 << (bits - 1)}) - {1 << (bits - 1)}) & {M64}"
        else:
            if o == 0x00:
                return f"({a} + {b}) & {M32}"
            if o == 0x10:
                return f"({a} - {b}) & {M32}"
            if o == 0x20:
                return f"({a} * {b}) & {M32}"
            if o == 0x30 and off == 0:
                if kv is not None:
                    return f"({a} & {M32}) // {b}" if kv & M32 else "0"
                return f"(({a} & {M32}) // ({b} & {M32}) if {b} & {M32} else 0)"
            if o == 0x90 and off == 0:
                if kv is not None:
                    return f"({a} & {M32}) % {b}" if kv & M32 else f"{a} & {M32}"
                return f"(({a} & {M32}) % ({b} & {M32}) if {b} & {M32} else {a} & {M32})"
            if o == 0x40:
                return f"({a} | {b}) & {M32}"
            if o == 0x50:
                return f"{a} & {b}" if kv is not None else f"{a} & {b} & {M32}"
            if o == 0xA0:
                return f"({a} ^ {b}) & {M32}"
            if o in (0x60, 0x70, 0xC0):
                sh = str(kv & 31) if kv is not None else f"({b} & 31)"
                if o == 0x60:
                    return f"({a} << {sh}) & {M32}"
                if o == 0x70:
                    return f"({a} & {M32}) >> {sh}"
                return f"(((({a} & {M32}) ^ {S32}) - {S32}) >> {sh}) & {M32}"
            if o == 0x80:
                return f"-{a} & {M32}"
            if o == 0xB0 and off == 0:
                return b if kv is not None else f"{b} & {M32}"
            if o == 0xB0 and kv is None:
                bits = off
                return f"((({b} & {(1 << bits) - 1}) ^ {1 << (bits - 1)}) - {1 << (bits - 1)}) & {M32}"
        # signed division/modulo and the rarer forms: the interpreter's semantics
        if kv is not None:
            bexpr = str(kv if is64 else kv & M32)
        else:
            bexpr = self.v(src) if is64 else f"{self.v(src)} & {M32}"
        return f"_ALU({o}, {a}, {bexpr}, {is64}, {off}, {imm}, {pc})"

    def address(self, base: int, off: int) -> tuple[int | None, str]:
        """``(stack offset, None)`` when ``base + off`` is a known stack
        address, else ``(None, expression)``."""
        fp = self.fp_off(base)
        if fp is not None:
            return 512 + fp + off, ""
        k = self.const(base)
        if k is not None:
            return None, str(k + off)
        b = self.v(base)
        return None, (f"{b} + {off}" if off > 0 else f"{b} - {-off}" if off < 0 else b)

    def load(self, base: int, off: int, size: int, signed: bool, pc: int) -> str:
        o, a = self.address(base, off)
        if o is not None:
            if 0 <= o and o + size <= 512:
                if size == 1 and not signed:
                    return f"_S[{o}]"
                fn = f"_SU{size}" if signed else f"_U{size}"
                return f"{fn}(_S, {o})[0]" + (f" & {M64}" if signed else "")
            return f"_FLT((r10 + {o - 512}) & {M64}, {size}, False, {pc})"  # raises
        if size == 1 and not signed:
            return f"_RB[(_a := {a}) >> 32][_a & {M32}]"
        fn = f"_SU{size}" if signed else f"_U{size}"
        return f"{fn}(_RB[(_a := {a}) >> 32], _a & {M32})[0]" + (f" & {M64}" if signed else "")

    def store(self, base: int, off: int, size: int, value: str, pc: int) -> str:
        o, a = self.address(base, off)
        if o is not None:
            if 0 <= o and o + size <= 512:
                if size == 1:
                    return f"_S[{o}] = {value}"
                return f"_P{size}(_S, {o}, {value})"
            return f"raise _FLT((r10 + {o - 512}) & {M64}, {size}, True, {pc})"
        if size == 1:
            return f"_WB[(_a := {a}) >> 32][_a & {M32}] = {value}"
        return f"_P{size}(_WB[(_a := {a}) >> 32], _a & {M32}, {value})"

    def atomic(self, pc: int, dst: int, src: int, off: int, imm: int, size: int, out: _Lines, ind: int) -> None:
        if imm == 0x100:  # load-acquire: dst = *(src + off)
            self.mod.debug[pc] = (size, False)
            self.assign(dst, self.load(src, off, size, False, pc), out, ind, pc)
            return
        s = self.v(src)
        if imm == 0x110:  # store-release: *(dst + off) = src
            self.mod.debug[pc] = (size, True)
            value = s if size == 8 else f"{s} & {(1 << (8 * size)) - 1}"
            out.add(ind, self.store(dst, off, size, value, pc), pc)
            return
        self.mod.debug[pc] = (size, True)
        mask = M64 if size == 8 else M32
        u, p = f"_U{size}", f"_P{size}"
        o, a = self.address(dst, off)
        if o is not None:
            if not (0 <= o and o + size <= 512):
                out.add(ind, f"raise _FLT((r10 + {o - 512}) & {M64}, {size}, True, {pc})", pc)
                return
            out.add(ind, "_m = _S", pc)
            out.add(ind, f"_o = {o}", pc)
        else:
            out.add(ind, f"_a = {a}", pc)
            out.add(ind, "_m = _WB[_a >> 32]", pc)
            out.add(ind, f"_o = _a & {M32}", pc)
        out.add(ind, f"_old = {u}(_m, _o)[0]", pc)
        v = s if size == 8 else f"({s} & {M32})"
        if imm == 0xF1:
            out.add(ind, f"if _old == {self.v(0)} & {mask}:", pc)
            out.add(ind + 1, f"{p}(_m, _o, {v})", pc)
            self.assign(0, "_old", out, ind, pc)
            return
        if imm == 0xE1:
            out.add(ind, f"{p}(_m, _o, {v})", pc)
            self.assign(src, "_old", out, ind, pc)
            return
        base = imm & ~0x01
        expr = {0x00: f"(_old + {v}) & {mask}", 0x40: f"_old | {v}", 0x50: f"_old & {v}", 0xA0: f"_old ^ {v}"}[base]
        out.add(ind, f"{p}(_m, _o, {expr})", pc)
        if imm & 0x01:
            self.assign(src, "_old", out, ind, pc)

    def call(self, pc: int, op: int, dst: int, src: int, imm: int, out: _Lines, ind: int) -> None:
        mod = self.mod
        args = ", ".join(self.v(r) for r in (1, 2, 3, 4, 5))
        if op & 0x08:  # callx
            self.assign(0, f"_CALLX(_rs, {pc}, {self.v(dst)}, {args}, _d)", out, ind, pc)
            return
        if src == 0:
            fn = mod.vm.helpers.table.get(imm)
            if fn is None:
                out.add(ind, f"raise _E('insn {pc}: unknown helper {imm}; register it with "
                        f"VM.helpers.register()', pc={pc})", pc)
                return
            if imm in (1, 2, 3) and self.map_call(pc, imm, fn, out, ind):
                return
            name = mod.bind(f"_H{imm}", fn)
            out.add(ind, "_rs.depth = _d", pc)
            if imm == 12:
                out.add(ind, f"_t = {name}(_rs, {args})", pc)
                out.add(ind, "if _t is not None:", pc)
                out.add(ind + 1, f"return _t.fast_function(0)(_rs, {args}, _d)", pc)
                return
            self.assign(0, f"{name}(_rs, {args}) & {M64}", out, ind, pc)
            return
        if src == 1:
            target = pc + 1 + imm
            out.add(ind, f"if _d >= {MAX_CALL_FRAMES - 1}:", pc)
            out.add(ind + 1, f"raise _E('insn {pc}: call depth exceeds {MAX_CALL_FRAMES} frames', pc={pc})", pc)
            if not 0 <= target < len(self.code):
                out.add(ind, f"raise _E('insn {target}: jump outside the program (0..{len(self.code) - 1})', "
                        f"pc={target})", pc)
                return
            mod.want(target)
            self.assign(0, f"F{target}(_rs, {args}, _d + 1)", out, ind, pc)
            return
        fn = mod.vm.kfuncs.get(imm)
        if fn is None:
            out.add(ind, f"raise _E('insn {pc}: unknown kfunc (BTF id {imm}); register it with "
                    f"VM.register_kfunc()', pc={pc})", pc)
            return
        name = mod.bind(f"_K{imm}", fn)
        out.add(ind, "_rs.depth = _d", pc)
        self.assign(0, f"{name}(_rs, {args}) & {M64}", out, ind, pc)

    def stack_bytes(self, r: int, size: int) -> str | None:
        """``bytes(_S[a:b])`` when register ``r`` points at ``size`` bytes of
        the current frame known at translation time."""
        fp = self.fp_off(r)
        if fp is None:
            return None
        o = 512 + fp
        if not (0 <= o and o + size <= 512):
            return None
        return f"bytes(_S[{o}:{o + size}])"

    def map_call(self, pc: int, hid: int, fn: Any, out: _Lines, ind: int) -> bool:
        """Call a map's method directly for ``bpf_map_lookup/update/delete_elem``
        when the map (``r1``) and the key (and value) stack slots are known
        here and the helper is the built-in one; same results as the helper."""
        from .helpers import maps as hmaps
        from .maps.base import EmuMap

        if fn is not {1: hmaps.map_lookup_elem, 2: hmaps.map_update_elem, 3: hmaps.map_delete_elem}[hid]:
            return False
        handle = self.const(1)
        mp = self.mod.vm.space.handle(handle) if handle is not None else None
        if not isinstance(mp, EmuMap) or mp.handle != handle or mp.closed:
            return False
        key = self.stack_bytes(2, mp.key_size)
        if key is None:
            return False
        name = f"_M{mp.id}"
        if hid == 1:
            self.mod.bind(name + "_lookup", mp.bpf_lookup)
            self.assign(0, f"{name}_lookup(_rs, {key})", out, ind, pc)
            return True
        if hid == 3:
            self.mod.bind(name + "_delete", mp.bpf_delete)
            self.assign(0, f"{name}_delete(_rs, {key}) & {M64}", out, ind, pc)
            return True
        value = self.stack_bytes(3, mp.value_size) if mp.has_values else '""'
        if value is None:
            return False
        self.mod.bind(name + "_update", mp.bpf_update)
        self.assign(0, f"{name}_update(_rs, {key}, {value}, {self.v(4)}) & {M64}", out, ind, pc)
        return True

    def condition(self, pc: int) -> str:
        op, dst, src, off, imm = self.code[pc]
        o = op & 0xF0
        is64 = op & 0x07 == 0x05
        if o == 0xE0:  # may_goto: taken when the budget is used up
            return "_MAYGOTO(_rs)"
        if op & 0x08:
            a, b = f"r{dst}", f"r{src}"
            if not is64:
                a, b = f"({a} & {M32})", f"({b} & {M32})"
            sa, sb = (f"({a} ^ {S64 if is64 else S32})", f"({b} ^ {S64 if is64 else S32})")
        else:
            bv = (imm & M64) if is64 else (imm & M32)
            a = f"r{dst}" if is64 else f"(r{dst} & {M32})"
            b = str(bv)
            sa, sb = f"({a} ^ {S64 if is64 else S32})", str(bv ^ (S64 if is64 else S32))
        if o == 0x10:
            return f"{a} == {b}"
        if o == 0x50:
            return f"{a} != {b}"
        if o == 0x20:
            return f"{a} > {b}"
        if o == 0x30:
            return f"{a} >= {b}"
        if o == 0xA0:
            return f"{a} < {b}"
        if o == 0xB0:
            return f"{a} <= {b}"
        if o == 0x40:
            return f"{a} & {b}"
        if o == 0x60:
            return f"{sa} > {sb}"
        if o == 0x70:
            return f"{sa} >= {sb}"
        if o == 0xC0:
            return f"{sa} < {sb}"
        if o == 0xD0:
            return f"{sa} <= {sb}"
        raise BpfmuxError(f"internal error: not a condition at insn {pc}")  # pragma: no cover

    def block_body(self, bid: int, out: _Lines, ind: int) -> None:
        """Statements of block ``bid`` (without its terminator's transfer)."""
        blk = self.cfg.blocks[bid]
        if blk.term == OUTSIDE:
            n = len(self.code)
            out.add(ind, f"raise _E('insn {bid}: jump outside the program (0..{n - 1})', pc={bid})", bid)
            return
        last = blk.pcs[-1]
        self.sym = {}
        self.analyse_block(blk)
        for pc in blk.pcs:
            if pc == last and blk.term in (GOTO, COND, EXIT):
                break
            self.stmts(pc, out, ind)
            for d, sym in list(self.sym.items()):
                if sym[0] == "e" and sym[3] == pc:
                    del self.sym[d]  # its single use was this instruction
        if blk.term == EXIT:
            self.exit_value = self.v(0)  # other registers are dead after the exit
            self.sym = {}
        else:
            live = self.live_out[bid]
            if blk.term == COND:
                live = live | _rw(self.slots[last])[0]
            self.flush(out, ind, last, live)

    def analyse_block(self, blk: Any) -> None:
        """Registers live after each instruction of ``blk``, and the ALU
        results used exactly once later in the block (fused into that use)."""
        code = self.code
        live = set(self.live_out[blk.id])
        rws = [_rw(self.slots[pc]) for pc in blk.pcs]
        after: dict[int, frozenset[int]] = {}
        for pc, (reads, writes) in zip(reversed(blk.pcs), reversed(rws), strict=True):
            after[pc] = frozenset(live)
            live -= writes
            live |= reads
        self.live_after = after
        fusable = set()
        self.fuse_use: dict[int, int] = {}
        last = blk.pcs[-1]
        for i, pc in enumerate(blk.pcs):
            op, dst, src, off, imm = code[pc]
            if op & 0x07 not in (0x04, 0x07) or op > 0xFF or dst not in after[pc]:
                continue
            for j in range(i + 1, len(blk.pcs)):
                reads, writes = rws[j]
                if dst not in reads:
                    continue
                jpc = blk.pcs[j]
                jop, jdst, jsrc = code[jpc][0], code[jpc][1], code[jpc][2]
                twice = jop & 0x07 in (0x04, 0x07) and jop & 0x08 and jdst == jsrc == dst and jop & 0xF0 != 0xB0
                cond = jpc == last and self.cfg.blocks[blk.id].term == COND
                if not twice and not cond and (dst in writes or dst not in after[jpc]):
                    fusable.add(pc)
                    self.fuse_use[pc] = jpc
                break
        self.fusable = fusable

    # -- structured emission -------------------------------------------------------

    def emit_structured(self) -> _Lines:
        cfg = self.cfg
        if not cfg.reducible:
            raise _Fallback("irreducible control flow")
        out, pending = self.do_tree(cfg.entry, [], 1)
        if pending:
            raise _Fallback(f"unresolved targets {sorted(pending)}")  # pragma: no cover - defensive
        return out

    def do_tree(self, x: int, loops: list[int], ind: int) -> tuple[_Lines, set[int]]:
        cfg = self.cfg
        merges = [c for c in cfg.children[x] if cfg.is_merge(c)]
        if x in cfg.headers:
            inner = loops + [x]
            body, pending = self.node_within(x, merges, inner, ind + 1)
            out = _Lines()
            out.add(ind, "for _ in _LR:", x)
            out.extend(body)
            if pending and not body.last_is_transfer(ind + 1):
                out.add(ind + 1, "break", x)
            out.add(ind, "else:", x)
            out.add(ind + 1, f"raise _LOOPFAULT({x})", x)
            pending = set(pending)
            if loops and loops[-1] in pending:
                h = loops[-1]
                if pending == {h}:
                    out.add(ind, "continue", x)
                else:
                    out.add(ind, f"if _nx == {h}:", x)
                    out.add(ind + 1, "continue", x)
                pending.discard(h)
            return out, pending
        return self.node_within(x, merges, loops, ind)

    def node_within(self, x: int, merges: list[int], loops: list[int], ind: int) -> tuple[_Lines, set[int]]:
        out = _Lines()
        self.block_body(x, out, ind)
        pending = self.terminator(x, loops, out, ind)
        for y in merges:
            sub, sub_pending = self.do_tree(y, loops, ind + 1 if pending != {y} else ind)
            if pending == {y}:
                out.extend(sub)
            else:
                out.add(ind, f"if _nx == {y}:", y)
                out.extend(sub)
            pending.discard(y)
            pending |= sub_pending
        return out, pending

    def branch(self, src: int, dst: int, loops: list[int], ind: int) -> tuple[_Lines, set[int]]:
        cfg = self.cfg
        out = _Lines()
        if cfg.is_back_edge(src, dst):
            if loops and loops[-1] == dst:
                out.add(ind, "continue", src)
                return out, set()
            if dst not in loops:  # pragma: no cover - a back edge always targets an enclosing loop
                raise _Fallback("back edge to a block that is not an enclosing loop")
            out.add(ind, f"_nx = {dst}", src)
            return out, {dst}
        if cfg.is_merge(dst):
            out.add(ind, f"_nx = {dst}", src)
            return out, {dst}
        return self.do_tree(dst, loops, ind)

    def terminator(self, x: int, loops: list[int], out: _Lines, ind: int) -> set[int]:
        cfg = self.cfg
        blk = cfg.blocks[x]
        term = blk.term
        if term in (FAULT, OUTSIDE):
            return set()
        last = blk.pcs[-1]
        if term == EXIT:
            out.add(ind, f"return {self.exit_value}", last)
            return set()
        if term in (FALL, GOTO):
            sub, pending = self.branch(x, blk.succs[0], loops, ind)
            out.extend(sub)
            return pending
        assert term == COND
        cond = self.condition(last)
        taken, fall = blk.succs
        t_lines, t_pending = self.branch(x, taken, loops, ind + 1)
        f_lines, f_pending = self.branch(x, fall, loops, ind + 1)
        if not t_pending:
            out.add(ind, f"if {cond}:", last)
            out.extend(t_lines)
            out.extend(f_lines, -1)
        elif not f_pending:
            out.add(ind, f"if not ({cond}):", last)
            out.extend(f_lines)
            out.extend(t_lines, -1)
        else:
            out.add(ind, f"if {cond}:", last)
            out.extend(t_lines)
            out.add(ind, "else:", last)
            out.extend(f_lines)
        return t_pending | f_pending

    # -- dispatch fallback ------------------------------------------------------------

    def emit_dispatch(self) -> _Lines:
        cfg = self.cfg
        out = _Lines()
        out.add(1, f"_nx = {cfg.entry}", cfg.entry)
        out.add(1, "for _ in _LR:", cfg.entry)
        for bid in cfg.rpo:
            blk = cfg.blocks[bid]
            out.add(2, f"if _nx == {bid}:", bid)
            self.block_body(bid, out, 3)
            if blk.term in (FAULT, OUTSIDE):
                continue
            last = blk.pcs[-1]
            if blk.term == EXIT:
                out.add(3, f"return {self.exit_value}", last)
            elif blk.term in (FALL, GOTO):
                out.add(3, f"_nx = {blk.succs[0]}", last)
                out.add(3, "continue", last)
            else:
                out.add(3, f"_nx = {blk.succs[0]} if {self.condition(last)} else {blk.succs[1]}", last)
                out.add(3, "continue", last)
        out.add(2, "raise _E('internal error: no block ' + str(_nx))", cfg.entry)
        out.add(1, "else:", cfg.entry)
        out.add(2, f"raise _LOOPFAULT({cfg.entry})", cfg.entry)
        return out

    def emit(self, force_dispatch: bool = False) -> _Lines:
        head = _Lines()
        e = self.entry
        head.add(0, f"def F{e}(_rs, r1, r2, r3, r4, r5, _d):", e)
        head.add(1, "r10, _S = _rs.frame(_d)", e)
        head.add(1, "r10 += 512", e)
        head.add(1, "r0 = r6 = r7 = r8 = r9 = 0", e)
        body = None
        if not force_dispatch:
            limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(limit, 20000 + 20 * len(self.code)))
            try:
                body = self.emit_structured()
            except (_Fallback, RecursionError):
                body = None
            finally:
                sys.setrecursionlimit(limit)
        if body is None:
            body = self.emit_dispatch()
        head.extend(body)
        return head


class _Module:
    """Emits every function of a program into one Python module."""

    def __init__(self, prog: EmuProgram) -> None:
        self.prog = prog
        self.vm = prog.vm
        self.globals: dict[str, Any] = {}
        self.debug: dict[int, tuple[int, bool]] = {}
        self.wanted: list[int] = []

    def bind(self, name: str, value: Any) -> str:
        self.globals[name] = value
        return name

    def want(self, entry: int) -> None:
        if entry not in self.prog.entries:
            self.prog.entries.add(entry)
        self.wanted.append(entry)

    def build(self, dispatch: bool = False) -> tuple[str, list[int]]:
        done: set[int] = set()
        todo = sorted(self.prog.entries)
        chunks: list[_Lines] = []
        while todo:
            e = todo.pop()
            if e in done:
                continue
            done.add(e)
            chunks.append(_Func(self, e).emit(dispatch))
            todo.extend(w for w in self.wanted if w not in done)
            self.wanted.clear()
        text: list[str] = []
        line_pc = [-1]
        for chunk in chunks:
            for ind, t, pc in chunk.items:
                text.append("    " * ind + t)
                line_pc.append(pc)
            text.append("")
            line_pc.append(-1)
        return "\n".join(text) + "\n", line_pc


def _base_globals(vm: Any) -> dict[str, Any]:
    g: dict[str, Any] = {
        "_RB": vm.space.rbufs,
        "_WB": vm.space.wbufs,
        "_FLT": _fault_raiser(vm.space),
        "_E": EmulatorFault,
        "_BAD": _raise_bad,
        "_ALU": interp.alu,
        "_BSWAP": interp.bswap,
        "_LDPKT": interp.ld_packet,
        "_MAYGOTO": _may_goto,
        "_CALLX": _callx,
        "_LR": range(vm.max_loop_iterations),
        "_LOOPFAULT": _loop_fault(vm.max_loop_iterations),
    }
    for n, st in _ST.items():
        g[f"_U{n}"] = st.unpack_from
        g[f"_P{n}"] = st.pack_into
    for n, st in _STS.items():
        g[f"_SU{n}"] = st.unpack_from
    return g


def _fault_raiser(space: Any) -> Callable[..., None]:
    def flt(addr: int, size: int, write: bool, pc: int) -> None:
        raise space.fault(addr, size, write, pc)

    return flt


def _raise_bad(pc: int, what: str) -> None:
    raise interp._bad(pc, what)


def _loop_fault(limit: int) -> Callable[[int], EmulatorFault]:
    def fault(pc: int) -> EmulatorFault:
        return EmulatorFault(f"insn {pc}: loop ran more than {limit} iterations; the program does not terminate "
                             "(raise VM.max_loop_iterations if it really needs more)", pc=pc)

    return fault


def _may_goto(rs: RunState) -> bool:
    if rs.loops_left <= 0:
        return True
    rs.loops_left -= 1
    return False


def _callx(rs: RunState, pc: int, target: int, r1: int, r2: int, r3: int, r4: int, r5: int, depth: int) -> int:
    """``callx``: a function address calls that function, a small number the
    helper with that id (as uBPF and the conformance suite do)."""
    from .machine import EmuProgram

    callee = rs.space.handle(target) if target >= 1 << 32 else None
    if callee is None:
        hid = target
        fn = rs.vm.helpers.table.get(hid)
        if fn is None:
            raise EmulatorFault(f"insn {pc}: unknown helper {hid}; register it with VM.helpers.register()", pc=pc)
        if hid == 12:
            raise EmulatorFault(f"insn {pc}: a tail call through callx is not supported", pc=pc)
        rs.depth = depth
        return fn(rs, r1, r2, r3, r4, r5) & M64
    if not isinstance(callee, EmuProgram):
        raise EmulatorFault(f"insn {pc}: callx to {target:#x}, which is not code", pc=pc, address=target)
    off = target - callee.code_addr
    if off % 8 or not 0 <= off // 8 < len(callee.code):
        raise EmulatorFault(f"insn {pc}: callx to {target:#x}, not an instruction of {callee.name}", pc=pc,
                            address=target)
    if depth + 1 >= MAX_CALL_FRAMES:
        raise EmulatorFault(f"insn {pc}: call depth exceeds {MAX_CALL_FRAMES} frames", pc=pc)
    return callee.fast_function(off // 8)(rs, r1, r2, r3, r4, r5, depth + 1)


def compile_program(prog: EmuProgram, dispatch: bool = False) -> dict[int, Callable[..., int]]:
    """Translate and compile every function of ``prog``; returns slot → function.

    ``dispatch=True`` forces the block-dispatch form (used by tests to check
    that both forms agree).
    """
    mod = _Module(prog)
    source, line_pc = mod.build(dispatch)
    # the line → slot table is part of the key: different programs can translate to the same source
    key = source + repr(line_pc) + repr(sorted(mod.debug.items()))
    digest = hashlib.blake2b(key.encode(), digest_size=12).hexdigest()
    filename = f"{_FILE_PREFIX}{prog.name} {digest}>"
    code = _CODE_CACHE.get(filename)
    if code is None:
        try:
            code = compile(source, filename, "exec")
        except (SyntaxError, RecursionError, MemoryError, SystemError) as e:
            if dispatch:
                raise BpfmuxError(f"fast tier: cannot compile {prog.name!r}: {e}") from e
            return compile_program(prog, dispatch=True)
        if len(_CODE_CACHE) >= _CODE_CACHE_MAX:
            _CODE_CACHE.pop(next(iter(_CODE_CACHE)))
        _CODE_CACHE[filename] = code
        _DEBUG[filename] = (line_pc, dict(mod.debug))
    ns = _base_globals(prog.vm)
    ns.update(mod.globals)
    exec(code, ns)
    prog._fast_source = source
    return {e: ns[f"F{e}"] for e in prog.entries if f"F{e}" in ns}


def _generated_frame(tb: types.TracebackType | None) -> tuple[types.TracebackType | None, bool]:
    """The innermost traceback entry in generated code, and whether it is
    the innermost entry of all (the exception came from generated code)."""
    last = None
    innermost = False
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_FILE_PREFIX):
            last = tb
            innermost = tb.tb_next is None
        tb = tb.tb_next
    return last, innermost


def locate_fault(fault: EmulatorFault, tb: types.TracebackType | None) -> None:
    """Give a fault raised by a helper during a fast-tier run the slot of
    the instruction that called the helper."""
    if fault.pc is not None:
        return
    entry, _ = _generated_frame(tb)
    if entry is None:
        return
    info = _DEBUG.get(entry.tb_frame.f_code.co_filename)
    if info is None:
        return
    lines = info[0]
    pc = lines[entry.tb_lineno] if entry.tb_lineno < len(lines) else -1
    if pc >= 0:
        fault.pc = pc
        fault.args = (f"insn {pc}: {fault.args[0]}",) + fault.args[1:]


def convert_exception(rs: RunState, exc: BaseException, tb: types.TracebackType | None) -> EmulatorFault | None:
    """The :class:`EmulatorFault` for a Python error raised by generated code
    (an access to an unmapped slot or past a buffer), or ``None`` when the
    error did not come from generated code."""
    entry, innermost = _generated_frame(tb)
    if entry is None:
        return None
    info = _DEBUG.get(entry.tb_frame.f_code.co_filename)
    if info is None:
        return None
    lines, debug = info
    pc = lines[entry.tb_lineno] if entry.tb_lineno < len(lines) else -1
    if isinstance(exc, RecursionError):
        return EmulatorFault(f"insn {pc}: too deeply nested calls", pc=pc)
    if not innermost:
        return None
    access = debug.get(pc)
    if access is None:
        return None
    size, write = access
    addr = entry.tb_frame.f_locals.get("_a")
    if addr is None:  # pragma: no cover - every generic access sets _a first
        return None
    return rs.space.fault(addr & M64, size, write, pc)
