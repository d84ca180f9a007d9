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

import hashlib
import struct
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import BpfmuxError, EmulatorFault
from . import interp
from .cfg import CFG, COND, EXIT, FALL, FAULT, GOTO, OUTSIDE
from .interp import INVALID, MIDDLE_OF_LDDW, s32
from .runtime import MAX_CALL_FRAMES, RunState

if TYPE_CHECKING:
    from .vm import EmuProgram

M64 = 0xFFFFFFFFFFFFFFFF
M32 = 0xFFFFFFFF
S64 = 1 << 63
S32 = 1 << 31
_SIZE = {0x00: 4, 0x08: 2, 0x10: 1, 0x18: 8}
_FILE_PREFIX = "<bpf-fast "

#: filename → (line → slot, slot → (base register, offset, size, write))
_DEBUG: dict[str, tuple[list[int], dict[int, tuple[int, int, int, bool]]]] = {}
_CODE_CACHE: dict[str, types.CodeType] = {}
_CODE_CACHE_MAX = 512

_ST = {n: struct.Struct(f) for n, f in ((1, "<B"), (2, "<H"), (4, "<I"), (8, "<Q"))}
_STS = {n: struct.Struct(f) for n, f in ((1, "<b"), (2, "<h"), (4, "<i"))}


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
        self.cfg = CFG(self.code, entry)

    # -- instruction statements ------------------------------------------------

    def stmts(self, pc: int, out: _Lines, ind: int) -> None:
        """Statements of the (non-terminator part of the) instruction at ``pc``."""
        op, dst, src, off, imm = self.code[pc]
        mod = self.mod
        cls = op & 0x07
        d = f"r{dst}"
        s = f"r{src}"
        if op == INVALID:
            out.add(ind, f"raise _BAD({pc}, {self.prog.invalid.get(pc, 'malformed')!r})", pc)
            return
        if op == MIDDLE_OF_LDDW:
            out.add(ind, f"raise _E('insn {pc}: jump into the middle of an lddw', pc={pc})", pc)
            return
        if cls in (0x04, 0x07):
            for line in self.alu(op, dst, src, off, imm, pc):
                out.add(ind, line, pc)
            return
        if cls == 0x01:  # LDX
            size = _SIZE[op & 0x18]
            signed = op & 0xE0 == 0x80
            mod.debug[pc] = (src, off, size, False)
            out.add(ind, f"{d} = {self.load(src, off, size, signed, pc)}", pc)
            return
        if cls in (0x02, 0x03):
            size = _SIZE[op & 0x18]
            mode = op & 0xE0
            if mode == 0xC0:
                self.atomic(pc, dst, src, off, imm, size, out, ind)
                return
            mod.debug[pc] = (dst, off, size, True)
            if cls == 0x03:
                value = s if size == 8 else f"{s} & {(1 << (8 * size)) - 1}"
            else:
                value = str((imm & M64) & ((1 << (8 * size)) - 1))
            out.add(ind, self.store(dst, off, size, value, pc), pc)
            return
        if op == 0x18:
            out.add(ind, f"{d} = {imm}", pc)
            return
        if cls == 0x00:  # ld_abs / ld_ind
            size = _SIZE[op & 0x18]
            where = f"{s32(imm)}" if op & 0xE0 == 0x20 else f"{s32(imm)} + ((({s} & {M32}) ^ {S32}) - {S32})"
            out.add(ind, f"_v = _LDPKT(_rs, {pc}, {size}, {where})", pc)
            out.add(ind, "if _v is None:", pc)
            out.add(ind + 1, "return 0", pc)
            out.add(ind, "r0 = _v", pc)
            return
        if cls == 0x05 and op & 0xF0 == 0x80:
            self.call(pc, op, dst, src, imm, out, ind)
            return
        raise BpfmuxError(f"internal error: no statement for insn {pc} (opcode {op:#x})")  # pragma: no cover

    def alu(self, op: int, dst: int, src: int, off: int, imm: int, pc: int) -> list[str]:
        is64 = op & 0x07 == 0x07
        o = op & 0xF0
        d = f"r{dst}"
        if o == 0xD0:
            if op & 0x08 or is64:  # to big endian / bswap
                if imm == 16:
                    return [f"{d} = (({d} & 255) << 8) | (({d} >> 8) & 255)"]
                return [f"{d} = _BSWAP({d}, {imm})"]
            if imm == 64:
                return []
            return [f"{d} &= {(1 << imm) - 1}"]
        if op & 0x08:
            b = f"r{src}"
        else:
            b = str((imm & M64) if is64 else (imm & M32))
        k = not op & 0x08
        kv = int(b) if k else None
        if is64:
            if o == 0x00:
                return [] if kv == 0 else [f"{d} = ({d} + {b}) & {M64}"]
            if o == 0x10:
                return [] if kv == 0 else [f"{d} = ({d} - {b}) & {M64}"]
            if o == 0x20:
                return [f"{d} = ({d} * {b}) & {M64}"]
            if o == 0x30 and off == 0:
                if k:
                    return [f"{d} //= {b}"] if kv else [f"{d} = 0"]
                return [f"{d} = {d} // {b} if {b} else 0"]
            if o == 0x90 and off == 0:
                if k:
                    return [f"{d} %= {b}"] if kv else []
                return [f"if {b}: {d} %= {b}"]
            if o == 0x40:
                return [f"{d} |= {b}"]
            if o == 0x50:
                return [f"{d} &= {b}"]
            if o == 0xA0:
                return [f"{d} ^= {b}"]
            if o == 0x60:
                sh = str(kv & 63) if k else f"({b} & 63)"
                return [f"{d} = ({d} << {sh}) & {M64}"]
            if o == 0x70:
                sh = str(kv & 63) if k else f"({b} & 63)"
                return [f"{d} >>= {sh}"]
            if o == 0xC0:
                sh = str(kv & 63) if k else f"({b} & 63)"
                return [f"{d} = ((({d} ^ {S64}) - {S64}) >> {sh}) & {M64}"]
            if o == 0x80:
                return [f"{d} = -{d} & {M64}"]
            if o == 0xB0 and off == 0:
                return [f"{d} = {b}"]
            if o == 0xB0 and not k:
                bits = off
                return [f"{d} = ((({b} & {(1 << bits) - 1}) ^ {1 << (bits - 1)}) - {1 << (bits - 1)}) & {M64}"]
        else:
            if o == 0x00:
                return [f"{d} = ({d} + {b}) & {M32}"]
            if o == 0x10:
                return [f"{d} = ({d} - {b}) & {M32}"]
            if o == 0x20:
                return [f"{d} = ({d} * {b}) & {M32}"]
            if o == 0x30 and off == 0:
                if k:
                    return [f"{d} = ({d} & {M32}) // {b}"] if kv else [f"{d} = 0"]
                return [f"_b = {b} & {M32}", f"{d} = ({d} & {M32}) // _b if _b else 0"]
            if o == 0x90 and off == 0:
                if k:
                    return [f"{d} = ({d} & {M32}) % {b}"] if kv else [f"{d} &= {M32}"]
                return [f"_b = {b} & {M32}", f"{d} = ({d} & {M32}) % _b if _b else {d} & {M32}"]
            if o == 0x40:
                return [f"{d} = ({d} | {b}) & {M32}"]
            if o == 0x50:
                return [f"{d} &= {b}"] if k else [f"{d} = {d} & {b} & {M32}"]
            if o == 0xA0:
                return [f"{d} = ({d} ^ {b}) & {M32}"]
            if o == 0x60:
                sh = str(kv & 31) if k else f"({b} & 31)"
                return [f"{d} = ({d} << {sh}) & {M32}"]
            if o == 0x70:
                sh = str(kv & 31) if k else f"({b} & 31)"
                return [f"{d} = ({d} & {M32}) >> {sh}"]
            if o == 0xC0:
                sh = str(kv & 31) if k else f"({b} & 31)"
                return [f"{d} = (((({d} & {M32}) ^ {S32}) - {S32}) >> {sh}) & {M32}"]
            if o == 0x80:
                return [f"{d} = -{d} & {M32}"]
            if o == 0xB0 and off == 0:
                return [f"{d} = {b}"] if k else [f"{d} = {b} & {M32}"]
            if o == 0xB0 and not k:
                bits = off
                return [f"{d} = ((({b} & {(1 << bits) - 1}) ^ {1 << (bits - 1)}) - {1 << (bits - 1)}) & {M32}"]
        # signed division/modulo and the rarer forms: the interpreter's semantics
        bexpr = b if k else (f"r{src}" if is64 else f"r{src} & {M32}")
        return [f"{d} = _ALU({o}, {d}, {bexpr}, {is64}, {off}, {imm}, {pc})"]

    def load(self, base: int, off: int, size: int, signed: bool, pc: int) -> str:
        if base == 10:
            o = 512 + off
            if 0 <= o and o + size <= 512:
                if size == 1 and not signed:
                    return f"_S[{o}]"
                fn = f"_SU{size}" if signed else f"_U{size}"
                return f"{fn}(_S, {o})[0]" + (f" & {M64}" if signed else "")
            return f"_FLT((r10 + {off}) & {M64}, {size}, False, {pc})"  # raises
        a = f"r{base} + {off}" if off else f"r{base}"
        self.mod.uses_addr = True
        if size == 1 and not signed:
            return f"_RB[(_a := {a}) >> 32][_a & {M32}]"
        fn = f"_SU{size}" if signed else f"_U{size}"
        return f"{fn}(_RB[(_a := {a}) >> 32], _a & {M32})[0]" + (f" & {M64}" if signed else "")

    def store(self, base: int, off: int, size: int, value: str, pc: int) -> str:
        if base == 10:
            o = 512 + off
            if 0 <= o and o + size <= 512:
                if size == 1:
                    return f"_S[{o}] = {value}"
                return f"_P{size}(_S, {o}, {value})"
            return f"raise _FLT((r10 + {off}) & {M64}, {size}, True, {pc})"
        a = f"r{base} + {off}" if off else f"r{base}"
        if size == 1:
            return f"_WB[(_a := {a}) >> 32][_a & {M32}] = {value}"
        return f"_P{size}(_WB[(_a := {a}) >> 32], _a & {M32}, {value})"

    def atomic(self, pc: int, dst: int, src: int, off: int, imm: int, size: int, out: _Lines, ind: int) -> None:
        d, s = f"r{dst}", f"r{src}"
        a = f"{d} + {off}" if off else d
        if imm == 0x100:  # load-acquire: dst = *(src + off)
            self.mod.debug[pc] = (src, off, size, False)
            out.add(ind, f"{d} = {self.load(src, off, size, False, pc)}", pc)
            return
        if imm == 0x110:  # store-release: *(dst + off) = src
            self.mod.debug[pc] = (dst, off, size, True)
            value = s if size == 8 else f"{s} & {(1 << (8 * size)) - 1}"
            out.add(ind, self.store(dst, off, size, value, pc), pc)
            return
        self.mod.debug[pc] = (dst, off, size, True)
        mask = M64 if size == 8 else M32
        u, p = f"_U{size}", f"_P{size}"
        out.add(ind, f"_a = {a}", pc)
        out.add(ind, "_m = _WB[_a >> 32]", pc)
        out.add(ind, f"_o = _a & {M32}", pc)
        out.add(ind, f"_old = {u}(_m, _o)[0]", pc)
        v = s if size == 8 else f"({s} & {M32})"
        if imm == 0xF1:
            out.add(ind, f"if _old == r0 & {mask}:", pc)
            out.add(ind + 1, f"{p}(_m, _o, {v})", pc)
            out.add(ind, "r0 = _old", pc)
            return
        if imm == 0xE1:
            out.add(ind, f"{p}(_m, _o, {v})", pc)
            out.add(ind, f"{s} = _old", pc)
            return
        base = imm & ~0x01
        expr = {0x00: f"(_old + {v}) & {mask}", 0x40: f"_old | {v}", 0x50: f"_old & {v}", 0xA0: f"_old ^ {v}"}[base]
        out.add(ind, f"{p}(_m, _o, {expr})", pc)
        if imm & 0x01:
            out.add(ind, f"{s} = _old", pc)

    def call(self, pc: int, op: int, dst: int, src: int, imm: int, out: _Lines, ind: int) -> None:
        mod = self.mod
        args = "r1, r2, r3, r4, r5"
        if op & 0x08:  # callx
            reg = dst or imm
            out.add(ind, f"r0 = _CALLX(_rs, {pc}, r{reg}, {args}, _d)", pc)
            return
        if src == 0:
            fn = mod.vm.helpers.table.get(imm)
            if fn is None:
                out.add(ind, f"raise _E('insn {pc}: unknown helper {imm}; register it with "
                        f"VM.helpers.register()', pc={pc})", pc)
                return
            name = mod.bind(f"_H{imm}", fn)
            out.add(ind, "_rs.depth = _d", pc)
            if imm == 12:
                out.add(ind, f"_t = {name}(_rs, {args})", pc)
                out.add(ind, "if _t is not None:", pc)
                out.add(ind + 1, f"return _t.fast_function(0)(_rs, {args}, _d)", pc)
                return
            out.add(ind, f"r0 = {name}(_rs, {args}) & {M64}", pc)
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
            out.add(ind, f"r0 = F{target}(_rs, {args}, _d + 1)", pc)
            return
        fn = mod.vm.kfuncs.get(imm)
        if fn is None:
            out.add(ind, f"raise _E('insn {pc}: unknown kfunc (BTF id {imm}); register it with "
                    f"VM.register_kfunc()', pc={pc})", pc)
            return
        name = mod.bind(f"_K{imm}", fn)
        out.add(ind, "_rs.depth = _d", pc)
        out.add(ind, f"r0 = {name}(_rs, {args}) & {M64}", pc)

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
        for pc in blk.pcs:
            if pc == last and blk.term in (GOTO, COND, EXIT):
                break
            self.stmts(pc, out, ind)

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
            out.add(ind, "return r0", last)
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
                out.add(3, "return r0", last)
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
        self.debug: dict[int, tuple[int, int, int, bool]] = {}
        self.wanted: list[int] = []
        self.uses_addr = False

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
    from .vm import EmuProgram

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


def program_source(prog: EmuProgram, dispatch: bool = False) -> str:
    """The Python source the fast tier generates for ``prog`` (for reading)."""
    return _Module(prog).build(dispatch)[0]


def compile_program(prog: EmuProgram, dispatch: bool = False) -> dict[int, Callable[..., int]]:
    """Translate and compile every function of ``prog``; returns slot → function.

    ``dispatch=True`` forces the block-dispatch form (used by tests to check
    that both forms agree).
    """
    mod = _Module(prog)
    source, line_pc = mod.build(dispatch)
    digest = hashlib.blake2b(source.encode(), digest_size=12).hexdigest()
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
    base, off, size, write = access
    regs = entry.tb_frame.f_locals
    addr = (regs.get(f"r{base}", 0) + off) & M64
    return rs.space.fault(addr, size, write, pc)
