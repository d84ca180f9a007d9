"""Assembler (and its inverse) for the bpf_conformance suite's assembly syntax.

One instruction per line, ``#`` starts a comment, ``NAME:`` defines a label::

    mov32 %r0, 0              # ALU: add sub mul div sdiv mod smod or and lsh rsh arsh xor mov
    add %r0, %r1              #   no suffix (or 64) = 64-bit, suffix 32 = 32-bit
    neg32 %r0                 # neg, neg32
    movsx832 %r0, %r1         # movsx{8,16}32, movsx{8,16,32}64: sign-extending moves
    be16 %r0                  # le16/32/64, be16/32/64, bswap16/32/64 (swapN is bswapN)
    lddw %r1, 0x1122334455667788
    ldxw %r0, [%r1+4]         # ldx{b,h,w,dw}, ldxs{b,h,w} (sign-extending)
    stw [%r10-4], 7           # st{b,h,w,dw} [mem], imm
    stxdw [%r10-8], %r1       # stx{b,h,w,dw} [mem], reg
    lock fetch add [%r10-8], %r1   # lock [fetch] {add,or,and,xor}[32], lock {xchg,cmpxchg}[32]
    jeq %r1, 0, +3            # j{eq,gt,ge,set,ne,sgt,sge,lt,le,slt,sle}[32] reg, reg|imm, target
    ja done                   # target: +N, -N (slots) or a label; "exit" names the first exit
    ja32 done                 # 32-bit offset in imm
    call 5                    # helper; "call helper 5", "call local LABEL", "call runtime 7", "call %r2"
    exit

Numbers are decimal or ``0x`` hex. A 32-bit immediate is a signed decimal
(-2147483648..2147483647) or hex up to ``0xffffffff``; offsets are signed
16-bit.

Extensions beyond the suite (so that every valid instruction can be written,
see :func:`format_asm`): ``lddw %r1, map_fd(N)``, ``map_value(FD, OFF)``,
``btf_id(ID[, BTF_FD])``, ``func(LABEL or +N)``, ``map_idx(N)``, ``map_idx_value(IDX, OFF)``;
``ldabs{b,h,w} IMM``, ``ldind{b,h,w} %rS, IMM``; ``ldacq{b,h,w,dw} %rD, [mem]``,
``strel{b,h,w,dw} [mem], %rS``; ``may_goto TARGET``;
``addr_space_cast %rD, %rS, DST_AS, SRC_AS``; ``call runtime ID, OFF``.

Errors are :class:`~bpfmux.errors.ParseError` whose message starts with the
line number and names the problem in the suite's words (``Invalid register``,
``Invalid mnemonic``, ``Invalid number of operands for lock``, ``Invalid
label``, …); ``err.offset`` is the 1-based line number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import ParseError
from .analysis import ATOMIC_RMW_OPS
from .insn import Insn
from .opcodes import (
    ADDR_SPACE_CAST,
    LDDW,
    Alu,
    Atomic,
    CallKind,
    Class,
    Jmp,
    Mode,
    Pseudo,
    Size,
    Source,
)
from .validity import validate

__all__ = ["assemble", "format_asm", "format_program"]

_ALU_OPS = {
    "add": Alu.ADD,
    "sub": Alu.SUB,
    "mul": Alu.MUL,
    "div": Alu.DIV,
    "sdiv": Alu.DIV,
    "mod": Alu.MOD,
    "smod": Alu.MOD,
    "or": Alu.OR,
    "and": Alu.AND,
    "lsh": Alu.LSH,
    "rsh": Alu.RSH,
    "arsh": Alu.ARSH,
    "xor": Alu.XOR,
    "mov": Alu.MOV,
}
_JMP_OPS = {
    "jeq": Jmp.JEQ,
    "jgt": Jmp.JGT,
    "jge": Jmp.JGE,
    "jset": Jmp.JSET,
    "jne": Jmp.JNE,
    "jsgt": Jmp.JSGT,
    "jsge": Jmp.JSGE,
    "jlt": Jmp.JLT,
    "jle": Jmp.JLE,
    "jslt": Jmp.JSLT,
    "jsle": Jmp.JSLE,
}
_ALU_NAME = {op: name for name, op in _ALU_OPS.items() if name not in ("sdiv", "smod")}
_SIZES = {"b": Size.B, "h": Size.H, "w": Size.W, "dw": Size.DW}
_ATOMIC_NAMES = {name: op for op, name in ATOMIC_RMW_OPS.items()}
_PSEUDO_NAMES = {
    "map_fd": Pseudo.MAP_FD,
    "map_value": Pseudo.MAP_VALUE,
    "btf_id": Pseudo.BTF_ID,
    "func": Pseudo.FUNC,
    "map_idx": Pseudo.MAP_IDX,
    "map_idx_value": Pseudo.MAP_IDX_VALUE,
}

_LABEL_RE = re.compile(r"^([A-Za-z_.$][\w.$]*)\s*:\s*(.*)$")
_NAME_RE = re.compile(r"^[A-Za-z_.$][\w.$]*$")
_INT_RE = re.compile(r"^([+-]?)(0[xX][0-9a-fA-F]+|[0-9]+)$")
_REG_RE = re.compile(r"^%r([0-9]+)$")
_MEM_RE = re.compile(r"^\[\s*([^\]+\-\s]+)\s*(?:([+-])\s*([^\]\s]+)\s*)?\]$")
_PSEUDO_RE = re.compile(r"^([a-z_]+)\s*\((.*)\)$")


@dataclass
class _Pending:
    """An instruction whose jump/call target is a label, fixed up after the last line."""

    index: int
    slot: int
    label: str
    line: int
    field: str  # "off", "imm" or "imm64" (lddw func)


class _Line:
    """Parsing context of one source line."""

    def __init__(self, lineno: int, source: str | None) -> None:
        self.lineno = lineno
        self.source = source

    def error(self, message: str) -> ParseError:
        err = ParseError(f"line {self.lineno}: {message}", None, self.source)
        err.offset = self.lineno
        return err

    # -- operands -------------------------------------------------------

    def reg(self, text: str) -> int:
        m = _REG_RE.match(text)
        if not m or int(m.group(1)) > 10:
            raise self.error(f"Invalid register: {text!r} (registers are %r0 to %r10)")
        return int(m.group(1))

    def number(self, text: str, what: str = "immediate") -> tuple[int, bool]:
        m = _INT_RE.match(text)
        if not m:
            raise self.error(f"Invalid {what}: {text!r} is not a decimal or 0x-hex number")
        digits = m.group(2)
        value = int(digits[2:], 16) if digits[:2].lower() == "0x" else int(digits, 10)
        return (-value if m.group(1) == "-" else value), m.group(2).lower().startswith("0x")

    def imm32(self, text: str) -> int:
        value, is_hex = self.number(text)
        lo = -(1 << 31)
        hi = (1 << 32) - 1 if is_hex else (1 << 31) - 1
        if not lo <= value <= hi:
            raise self.error(
                f"Invalid immediate: {text} does not fit 32 bits (use -2147483648..2147483647, or hex up to 0xffffffff)"
            )
        return value - (1 << 32) if value >= (1 << 31) else value

    def uint32(self, text: str, what: str) -> int:
        value, _ = self.number(text, what)
        if not 0 <= value <= 0xFFFFFFFF:
            raise self.error(f"Invalid {what}: {text} must be 0..0xffffffff")
        return value

    def imm64(self, text: str) -> int:
        value, _ = self.number(text)
        if not -(1 << 63) <= value < (1 << 64):
            raise self.error(f"Invalid immediate: {text} does not fit 64 bits")
        return value & 0xFFFFFFFFFFFFFFFF

    def offset(self, text: str, what: str = "offset") -> int:
        value, _ = self.number(text, what)
        if not -(1 << 15) <= value < (1 << 15):
            raise self.error(f"Invalid {what}: {text} does not fit signed 16 bits (-32768..32767)")
        return value

    def mem(self, text: str) -> tuple[int, int]:
        m = _MEM_RE.match(text)
        if not m:
            raise self.error(f"Invalid memory operand: {text!r} (write [%rN], [%rN+OFF] or [%rN-OFF])")
        reg = self.reg(m.group(1))
        if m.group(2) is None:
            return reg, 0
        return reg, self.offset(m.group(2) + m.group(3))

    def is_reg(self, text: str) -> bool:
        return text.startswith("%")


_Target = tuple[int, str | None]  # (relative offset, label or None)


class _Assembler:
    def __init__(self, source: str | None) -> None:
        self.source = source
        self.insns: list[Insn] = []
        self.slot = 0
        self.labels: dict[str, tuple[int, int]] = {}  # name -> (slot, line)
        self.first_exit: int | None = None
        self.pending: list[_Pending] = []

    # -- driver -----------------------------------------------------------

    def run(self, text: str) -> list[Insn]:
        for number, raw in enumerate(text.splitlines(), 1):
            line = _Line(number, self.source)
            stmt = raw.split("#", 1)[0].strip()
            while stmt:
                m = _LABEL_RE.match(stmt)
                if not m:
                    break
                self.define(m.group(1), line)
                stmt = m.group(2).strip()
            if stmt:
                self.statement(stmt, line)
        if not self.insns:
            raise ParseError("Invalid program: no instructions (write at least 'exit')", None, self.source)
        self.fixup()
        return self.insns

    def define(self, name: str, line: _Line) -> None:
        if name in self.labels:
            prev = self.labels[name][1]
            raise line.error(f"Duplicate label: {name} (first defined on line {prev})")
        self.labels[name] = (self.slot, line.lineno)

    def emit(self, insn: Insn) -> None:
        self.insns.append(insn)
        self.slot += insn.size

    def target(self, text: str, line: _Line, field: str, wide: bool = False) -> int:
        """A jump target: a relative offset now, or 0 plus a fix-up for a label."""
        if text[:1] in "+-":
            if wide:
                value, _ = line.number(text, "jump offset")
                if not -(1 << 31) <= value < (1 << 31):
                    raise line.error(f"Invalid jump offset: {text} does not fit signed 32 bits")
                return value
            return line.offset(text, "jump offset")
        if not _NAME_RE.match(text):
            raise line.error(f"Invalid label: {text!r} (write a label name, +N or -N)")
        self.pending.append(_Pending(len(self.insns), self.slot, text, line.lineno, field))
        return 0

    def fixup(self) -> None:
        total = self.slot
        for p in self.pending:
            line = _Line(p.line, self.source)
            if p.label in self.labels:
                dest = self.labels[p.label][0]
            elif p.label == "exit" and self.first_exit is not None:
                dest = self.first_exit
            else:
                raise line.error(f"Invalid label: {p.label} is not defined")
            if dest >= total:
                raise line.error(f"Invalid label: {p.label} points past the last instruction")
            rel = dest - p.slot - 1
            insn = self.insns[p.index]
            if p.field == "off":
                if not -(1 << 15) <= rel < (1 << 15):
                    raise line.error(f"Invalid jump: {p.label} is {rel} slots away, beyond a 16-bit offset (use ja32)")
                insn = Insn(insn.opcode, insn.dst, insn.src, rel, insn.imm)
            elif p.field == "imm":
                insn = Insn(insn.opcode, insn.dst, insn.src, insn.off, rel)
            else:
                insn = Insn(insn.opcode, insn.dst, insn.src, insn.off, rel & 0xFFFFFFFF)
            self.insns[p.index] = insn

    # -- statements -------------------------------------------------------

    def statement(self, stmt: str, line: _Line) -> None:
        parts = stmt.split(None, 1)
        mnem = parts[0].lower()
        rest = parts[1].strip() if len(parts) > 1 else ""
        if mnem == "lock":
            self.lock(rest, line)
            return
        if mnem == "call":
            self.call(rest, line)
            return
        handler = _HANDLERS.get(mnem)
        if handler is None:
            raise line.error(f"Invalid mnemonic: {parts[0]}")
        func, count = handler
        ops = _split_operands(rest)
        if len(ops) != count or any(not o for o in ops):
            raise line.error(f"Invalid number of operands for mnemonic: {mnem} takes {count}, got {len(ops)}")
        func(self, mnem, ops, line)

    def lock(self, rest: str, line: _Line) -> None:
        usage = (
            "write 'lock [fetch] OP [%rD+OFF], %rS' with OP add, or, and, xor, xchg or cmpxchg (suffix 32 for 32-bit)"
        )
        head, _, tail = rest.partition("[")
        words = head.split()
        ops = [o.strip() for o in ("[" + tail).split(",")] if tail else []
        if not words or len(ops) != 2 or len(words) > 2 or (len(words) == 2 and words[0] != "fetch"):
            raise line.error(f"Invalid number of operands for lock: {usage}")
        fetch = len(words) == 2
        name = words[-1].lower()
        wide = not name.endswith("32")
        base = name[:-2] if not wide else name.removesuffix("64")
        if base in ("xchg", "cmpxchg"):
            if fetch:
                raise line.error(f"Invalid atomic operation: {base} always fetches, drop 'fetch'")
            imm: int = Atomic.XCHG if base == "xchg" else Atomic.CMPXCHG
        elif base in _ATOMIC_NAMES:
            imm = _ATOMIC_NAMES[base] | (Atomic.FETCH if fetch else 0)
        else:
            raise line.error(f"Invalid atomic operation: {words[-1]} ({usage})")
        dst, off = line.mem(ops[0])
        src = line.reg(ops[1])
        size = Size.DW if wide else Size.W
        self.emit(Insn(Class.STX | Mode.ATOMIC | size, dst, src, off, int(imm)))

    def call(self, rest: str, line: _Line) -> None:
        words = rest.replace(",", " ").split()
        if len(words) == 1 and words[0] not in ("helper", "local", "runtime"):
            words.insert(0, "%" if words[0].startswith("%") else "helper")
        if len(words) not in (2, 3) or (len(words) == 3 and words[0] != "runtime"):
            raise line.error(
                "Invalid number of operands for mnemonic: call takes 'N', 'helper N', 'local LABEL', "
                "'runtime ID[, OFF]' or '%rN'"
            )
        mode, arg = words[0], words[1]
        op = Class.JMP | Jmp.CALL
        if mode == "%":
            self.emit(Insn(op | Source.X, line.reg(arg)))
        elif mode == "helper":
            self.emit(Insn(op, 0, CallKind.HELPER, 0, line.imm32(arg)))
        elif mode == "local":
            imm = self.target(arg, line, "imm", wide=True)
            self.emit(Insn(op, 0, CallKind.PSEUDO_CALL, 0, imm))
        elif mode == "runtime":
            off = line.offset(words[2]) if len(words) == 3 else 0
            self.emit(Insn(op, 0, CallKind.KFUNC_CALL, off, line.imm32(arg)))
        else:
            raise line.error(f"Invalid call mode: {mode} (use helper, local or runtime)")


def _split_operands(rest: str) -> list[str]:
    """Split on commas outside ``(...)`` and ``[...]``."""
    if not rest:
        return []
    out, depth, start = [], 0, 0
    for i, ch in enumerate(rest):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(rest[start:i].strip())
            start = i + 1
    out.append(rest[start:].strip())
    return out


# --------------------------------------------------------------------------- handlers

_Handler = Callable[[_Assembler, str, list[str], _Line], None]


def _alu(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    if mnem.endswith("32"):
        cls, name = Class.ALU, mnem[:-2]
    else:
        cls, name = Class.ALU64, mnem.removesuffix("64")
    aop = _ALU_OPS[name]
    off = 1 if name in ("sdiv", "smod") else 0
    dst = line.reg(ops[0])
    if line.is_reg(ops[1]):
        a.emit(Insn(cls | aop | Source.X, dst, line.reg(ops[1]), off, 0))
    else:
        a.emit(Insn(cls | aop | Source.K, dst, 0, off, line.imm32(ops[1])))


def _neg(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    cls = Class.ALU if mnem == "neg32" else Class.ALU64
    a.emit(Insn(cls | Alu.NEG, line.reg(ops[0])))


def _movsx(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    spec = mnem[len("movsx") :]
    width, cls = int(spec[:-2]), (Class.ALU if spec.endswith("32") else Class.ALU64)
    a.emit(Insn(cls | Alu.MOV | Source.X, line.reg(ops[0]), line.reg(ops[1]), width, 0))


def _endian(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    m = re.match(r"^(le|be|bswap|swap)(16|32|64)$", mnem)
    assert m is not None  # the handler table only routes these names here
    kind, width = m.group(1), int(m.group(2))
    if kind in ("bswap", "swap"):
        op = Class.ALU64 | Alu.END | Source.K
    else:
        op = Class.ALU | Alu.END | (Source.X if kind == "be" else Source.K)
    a.emit(Insn(op, line.reg(ops[0]), 0, 0, width))


def _ja(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    if mnem == "ja32":
        a.emit(Insn(Class.JMP32 | Jmp.JA, 0, 0, 0, a.target(ops[0], line, "imm", wide=True)))
    elif mnem == "may_goto":
        a.emit(Insn(Class.JMP | Jmp.JCOND, 0, 0, a.target(ops[0], line, "off"), 0))
    else:
        a.emit(Insn(Class.JMP | Jmp.JA, 0, 0, a.target(ops[0], line, "off"), 0))


def _jcond(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    cls = Class.JMP32 if mnem.endswith("32") else Class.JMP
    jop = _JMP_OPS[mnem.removesuffix("32")]
    dst = line.reg(ops[0])
    if line.is_reg(ops[1]):
        src, imm, source = line.reg(ops[1]), 0, Source.X
    else:
        src, imm, source = 0, line.imm32(ops[1]), Source.K
    off = a.target(ops[2], line, "off")
    a.emit(Insn(cls | jop | source, dst, src, off, imm))


def _exit(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    if a.first_exit is None:
        a.first_exit = a.slot
    a.emit(Insn(Class.JMP | Jmp.EXIT))


def _lddw(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    dst = line.reg(ops[0])
    m = _PSEUDO_RE.match(ops[1])
    if not m:
        a.emit(Insn(LDDW, dst, 0, 0, line.imm64(ops[1])))
        return
    kind = _PSEUDO_NAMES.get(m.group(1))
    if kind is None:
        raise line.error(f"Invalid lddw operand: {m.group(1)}(...) (use {', '.join(_PSEUDO_NAMES)})")
    args = [x.strip() for x in m.group(2).split(",")]
    want = {Pseudo.MAP_VALUE: (2,), Pseudo.MAP_IDX_VALUE: (2,), Pseudo.BTF_ID: (1, 2)}.get(kind, (1,))
    if len(args) not in want or not all(args):
        raise line.error(f"Invalid number of operands for {m.group(1)}: takes {' or '.join(map(str, want))}")
    if kind == Pseudo.FUNC:
        imm = a.target(args[0], line, "imm64", wide=True) & 0xFFFFFFFF
    else:
        imm = line.uint32(args[0], f"{m.group(1)} value")
        if len(args) == 2:
            what = "BTF object fd" if kind == Pseudo.BTF_ID else "map value offset"
            imm |= line.uint32(args[1], what) << 32
    a.emit(Insn(LDDW, dst, kind, 0, imm))


def _ldx(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    signed = mnem.startswith("ldxs")
    size = _SIZES[mnem[4:] if signed else mnem[3:]]
    src, off = line.mem(ops[1])
    mode = Mode.MEMSX if signed else Mode.MEM
    a.emit(Insn(Class.LDX | mode | size, line.reg(ops[0]), src, off, 0))


def _st(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    dst, off = line.mem(ops[0])
    a.emit(Insn(Class.ST | Mode.MEM | _SIZES[mnem[2:]], dst, 0, off, line.imm32(ops[1])))


def _stx(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    dst, off = line.mem(ops[0])
    a.emit(Insn(Class.STX | Mode.MEM | _SIZES[mnem[3:]], dst, line.reg(ops[1]), off, 0))


def _ldabs(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    size = _SIZES[mnem[5:]]
    if mnem.startswith("ldabs"):
        a.emit(Insn(Class.LD | Mode.ABS | size, 0, 0, 0, line.imm32(ops[0])))
    else:
        a.emit(Insn(Class.LD | Mode.IND | size, 0, line.reg(ops[0]), 0, line.imm32(ops[1])))


def _ldacq(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    size = _SIZES[mnem[5:]]
    op = Class.STX | Mode.ATOMIC | size
    if mnem.startswith("ldacq"):
        src, off = line.mem(ops[1])
        a.emit(Insn(op, line.reg(ops[0]), src, off, Atomic.LOAD_ACQ))
    else:
        dst, off = line.mem(ops[0])
        a.emit(Insn(op, dst, line.reg(ops[1]), off, Atomic.STORE_REL))


def _addr_space_cast(a: _Assembler, mnem: str, ops: list[str], line: _Line) -> None:
    dst_as = line.uint32(ops[2], "address space")
    src_as = line.uint32(ops[3], "address space")
    if dst_as > 0xFFFF or src_as > 0xFFFF:
        raise line.error("Invalid address space: must be 0..65535")
    imm = (dst_as << 16) | src_as
    imm = imm - (1 << 32) if imm & 0x80000000 else imm
    op = Class.ALU64 | Alu.MOV | Source.X
    a.emit(Insn(op, line.reg(ops[0]), line.reg(ops[1]), ADDR_SPACE_CAST, imm))


def _build_handlers() -> dict[str, tuple[_Handler, int]]:
    h: dict[str, tuple[_Handler, int]] = {}
    for name in _ALU_OPS:
        for suffix in ("", "32", "64"):
            h[name + suffix] = (_alu, 2)
    for suffix in ("", "32", "64"):
        h["neg" + suffix] = (_neg, 1)
    for spec in ("832", "1632", "864", "1664", "3264"):
        h["movsx" + spec] = (_movsx, 2)
    for kind in ("le", "be", "bswap", "swap"):
        for width in ("16", "32", "64"):
            h[kind + width] = (_endian, 1)
    for name in ("ja", "ja32", "may_goto"):
        h[name] = (_ja, 1)
    for name in _JMP_OPS:
        h[name] = (_jcond, 3)
        h[name + "32"] = (_jcond, 3)
    h["exit"] = (_exit, 0)
    h["lddw"] = (_lddw, 2)
    for s in _SIZES:
        h["ldx" + s] = (_ldx, 2)
        h["st" + s] = (_st, 2)
        h["stx" + s] = (_stx, 2)
        h["ldacq" + s] = (_ldacq, 2)
        h["strel" + s] = (_ldacq, 2)
        if s != "dw":
            h["ldxs" + s] = (_ldx, 2)
            h["ldabs" + s] = (_ldabs, 1)
            h["ldind" + s] = (_ldabs, 2)
    h["addr_space_cast"] = (_addr_space_cast, 4)
    return h


_HANDLERS = _build_handlers()


def assemble(text: str, source: str | None = None) -> list[Insn]:
    """Assemble conformance-syntax text into instructions.

    Immediates come out as the decoder produces them (``imm`` signed 32-bit;
    ``lddw``'s 64-bit ``imm`` unsigned), so ``decode(encode(assemble(t)))``
    equals ``assemble(t)``.

    :param source: a file name or description for error messages.
    :raises ParseError: a syntax error, an unknown mnemonic or register, a
        wrong operand count, a number out of range, an undefined or duplicate
        label, or no instructions at all. The message starts with
        ``line N:``; ``err.offset`` is ``N``.
    """
    return _Assembler(source).run(text)


# --------------------------------------------------------------------------- formatting


def _mem(reg: int, off: int) -> str:
    return f"[%r{reg}{off:+d}]"


def _rel(off: int) -> str:
    return f"{off:+d}"


def format_asm(insn: Insn) -> str:
    """One instruction in the conformance syntax; :func:`assemble` reads it back to the same ``Insn``.

    Jump and call targets print as relative offsets (``+3``).

    :raises ParseError: ``insn`` is not a valid instruction (see :func:`~bpfmux.isa.validity.validate`).
    """
    validate(insn)
    op = insn.opcode
    cls = op & 0x07
    d, s = insn.dst, insn.src
    x = op & Source.X
    if cls in (Class.ALU, Class.ALU64):
        wide = cls == Class.ALU64
        sfx = "" if wide else "32"
        aop = op & 0xF0
        if aop == Alu.END:
            kind = "bswap" if wide else ("be" if x else "le")
            return f"{kind}{insn.imm} %r{d}"
        if aop == Alu.NEG:
            return f"neg{sfx} %r{d}"
        if aop == Alu.MOV and x and insn.off:
            if wide and insn.off == ADDR_SPACE_CAST:
                imm = insn.imm & 0xFFFFFFFF
                return f"addr_space_cast %r{d}, %r{s}, {imm >> 16}, {imm & 0xFFFF}"
            return f"movsx{insn.off}{'64' if wide else '32'} %r{d}, %r{s}"
        name = _ALU_NAME[Alu(aop)]
        if insn.off == 1:
            name = "s" + name
        rhs = f"%r{s}" if x else str(insn.imm)
        return f"{name}{sfx} %r{d}, {rhs}"
    if cls in (Class.JMP, Class.JMP32):
        jop = op & 0xF0
        if jop == Jmp.JA:
            return f"ja32 {_rel(insn.imm)}" if cls == Class.JMP32 else f"ja {_rel(insn.off)}"
        if jop == Jmp.CALL:
            if x:
                return f"call %r{d}"
            if s == CallKind.PSEUDO_CALL:
                return f"call local {_rel(insn.imm)}"
            if s == CallKind.KFUNC_CALL:
                return f"call runtime {insn.imm}" + (f", {insn.off}" if insn.off else "")
            return f"call {insn.imm}"
        if jop == Jmp.EXIT:
            return "exit"
        if jop == Jmp.JCOND:
            return f"may_goto {_rel(insn.off)}"
        name = {v: k for k, v in _JMP_OPS.items()}[Jmp(jop)] + ("32" if cls == Class.JMP32 else "")
        rhs = f"%r{s}" if x else str(insn.imm)
        return f"{name} %r{d}, {rhs}, {_rel(insn.off)}"
    size = {v: k for k, v in _SIZES.items()}[Size(op & 0x18)]
    mode = op & 0xE0
    if cls == Class.LD:
        if op == LDDW:
            low, high = insn.imm & 0xFFFFFFFF, (insn.imm >> 32) & 0xFFFFFFFF
            if s == Pseudo.NONE:
                return f"lddw %r{d}, {insn.imm & 0xFFFFFFFFFFFFFFFF:#x}"
            name = {v: k for k, v in _PSEUDO_NAMES.items()}[Pseudo(s)]
            if s == Pseudo.FUNC:
                return f"lddw %r{d}, func({_rel(low - (1 << 32) if low & 0x80000000 else low)})"
            if s in (Pseudo.MAP_VALUE, Pseudo.MAP_IDX_VALUE) or (s == Pseudo.BTF_ID and high):
                return f"lddw %r{d}, {name}({low}, {high})"
            return f"lddw %r{d}, {name}({low})"
        if mode == Mode.ABS:
            return f"ldabs{size} {insn.imm}"
        return f"ldind{size} %r{s}, {insn.imm}"
    if cls == Class.LDX:
        return f"ldx{'s' if mode == Mode.MEMSX else ''}{size} %r{d}, {_mem(s, insn.off)}"
    if cls == Class.ST:
        return f"st{size} {_mem(d, insn.off)}, {insn.imm}"
    if mode == Mode.MEM:
        return f"stx{size} {_mem(d, insn.off)}, %r{s}"
    imm = insn.imm
    if imm == Atomic.LOAD_ACQ:
        return f"ldacq{size} %r{d}, {_mem(s, insn.off)}"
    if imm == Atomic.STORE_REL:
        return f"strel{size} {_mem(d, insn.off)}, %r{s}"
    sfx = "" if op & 0x18 == Size.DW else "32"
    if imm == Atomic.XCHG:
        name = "xchg"
    elif imm == Atomic.CMPXCHG:
        name = "cmpxchg"
    else:
        name = ("fetch " if imm & Atomic.FETCH else "") + ATOMIC_RMW_OPS[Atomic(imm & ~Atomic.FETCH)]
    return f"lock {name}{sfx} {_mem(d, insn.off)}, %r{s}"


def format_program(insns: Sequence[Insn]) -> str:
    """A whole program in conformance syntax, one instruction per line.

    :raises ParseError: an instruction is invalid.
    """
    return "".join(format_asm(i) + "\n" for i in insns)
