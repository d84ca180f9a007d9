"""Disassembler producing ``llvm-objdump -d`` text for BPF.

:func:`format_insn` renders one instruction exactly as LLVM 14's
``llvm-objdump -d --no-show-raw-insn`` prints it (without the address and
without the ``<label>`` it appends to jumps)::

    r1 = *(u32 *)(r1 + 0)
    if r1 > 5 goto +3
    call 6
    r1 = 4660 ll
    lock *(u64 *)(r1 + 0) += r2

``alu32=True`` mirrors ``llvm-objdump --mattr=+alu32``, the right choice for
objects built with ``-mcpu=v3``: 32-bit loads, stores and atomics then name
``w`` registers. Encodings LLVM 14 does not know are printed in the syntax of
later LLVM releases (``r1 s/= r2``, ``r1 = (s8)r2``, ``r1 = *(s8 *)(r2 + 0)``,
``r1 = bswap16 r1``, ``gotol +5``, ``if r1 & r2 goto +1``, ``r1 %= r2``,
``*(u32 *)(r10 - 4) = 5``, ``may_goto +2``, ``load_acquire``/``store_release``,
``addr_space_cast``). An invalid encoding prints as ``<unknown>``, as LLVM does.

:func:`format_kernel` renders the kernel verifier-log style
(``(b7) r0 = 0``, ``(79) r1 = *(u64 *)(r1 +8)``, ``(15) if r1 == 0x0 goto pc+3``).
"""

from __future__ import annotations

from collections.abc import Sequence

from .insn import Insn, decode
from .opcodes import ADDR_SPACE_CAST, LDDW, Alu, Atomic, Class, Jmp, Mode, Pseudo, Size, Source
from .validity import first_flaw

__all__ = ["disassemble", "format_insn", "format_kernel", "helper_name"]

_ALU_OPS = {
    Alu.ADD: "+=",
    Alu.SUB: "-=",
    Alu.MUL: "*=",
    Alu.DIV: "/=",
    Alu.OR: "|=",
    Alu.AND: "&=",
    Alu.LSH: "<<=",
    Alu.RSH: ">>=",
    Alu.MOD: "%=",
    Alu.XOR: "^=",
    Alu.MOV: "=",
    Alu.ARSH: "s>>=",
}
_JMP_OPS = {
    Jmp.JEQ: "==",
    Jmp.JGT: ">",
    Jmp.JGE: ">=",
    Jmp.JSET: "&",
    Jmp.JNE: "!=",
    Jmp.JSGT: "s>",
    Jmp.JSGE: "s>=",
    Jmp.JLT: "<",
    Jmp.JLE: "<=",
    Jmp.JSLT: "s<",
    Jmp.JSLE: "s<=",
}
_ATOMIC_OPS = {Atomic.ADD: ("+=", "add"), Atomic.OR: ("|=", "or"), Atomic.AND: ("&=", "and"), Atomic.XOR: ("^=", "xor")}
_USIZE = {Size.B: "u8", Size.H: "u16", Size.W: "u32", Size.DW: "u64"}
_SSIZE = {Size.B: "s8", Size.H: "s16", Size.W: "s32"}
UNKNOWN = "<unknown>"


def _off(off: int) -> str:
    return f"+ {off}" if off >= 0 else f"- {-off}"


def _rel(off: int) -> str:
    return f"+{off}" if off >= 0 else str(off)


def _s64(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v & (1 << 63) else v


def format_insn(insn: Insn, *, alu32: bool = False) -> str:
    """One instruction in ``llvm-objdump`` syntax, or ``<unknown>`` for an invalid encoding.

    :param alu32: print like ``llvm-objdump --mattr=+alu32`` (``w`` registers
        for 8/16/32-bit loads, stores and atomics).
    """
    if first_flaw(insn) is not None:
        return UNKNOWN
    op = insn.opcode
    cls = op & 0x07
    if cls in (Class.ALU, Class.ALU64):
        return _alu(insn)
    if cls in (Class.JMP, Class.JMP32):
        return _jmp(insn)
    size = Size(op & 0x18)
    mode = op & 0xE0
    d, s = insn.dst, insn.src
    narrow = "w" if alu32 and size != Size.DW else "r"
    mem = f"(r{s} {_off(insn.off)})"
    if cls == Class.LD:
        if op == LDDW:
            if insn.src == Pseudo.NONE:
                return f"r{d} = {_s64(insn.imm)} ll"
            return f"ld_pseudo\tr{d}, {insn.src}, {insn.imm & 0xFFFFFFFF}"
        where = insn.imm if mode == Mode.ABS else f"r{s}"
        return f"r0 = *({_USIZE[size]} *)skb[{where}]"
    if cls == Class.LDX:
        if mode == Mode.MEMSX:
            return f"r{d} = *({_SSIZE[size]} *){mem}"
        return f"{narrow}{d} = *({_USIZE[size]} *){mem}"
    dmem = f"(r{d} {_off(insn.off)})"
    if cls == Class.ST:
        return f"*({_USIZE[size]} *){dmem} = {insn.imm}"
    if mode == Mode.MEM:
        return f"*({_USIZE[size]} *){dmem} = {narrow}{s}"
    return _atomic(insn, size, narrow, dmem)


def _alu(insn: Insn) -> str:
    op = insn.opcode
    aop = op & 0xF0
    wide = op & 0x07 == Class.ALU64
    p = "r" if wide else "w"
    d, s = insn.dst, insn.src
    x = op & Source.X
    if aop == Alu.END:
        if wide:
            return f"r{d} = bswap{insn.imm} r{d}"
        return f"r{d} = {'be' if x else 'le'}{insn.imm} r{d}"
    if aop == Alu.NEG:
        return f"{p}{d} = -{p}{d}"
    if aop == Alu.MOV and x and insn.off:
        if wide and insn.off == ADDR_SPACE_CAST:
            imm = insn.imm & 0xFFFFFFFF
            return f"r{d} = addr_space_cast(r{s}, {imm >> 16}, {imm & 0xFFFF})"
        return f"{p}{d} = (s{insn.off}){p}{s}"
    sym = _ALU_OPS[Alu(aop)]
    if insn.off == 1 and aop in (Alu.DIV, Alu.MOD):
        sym = "s" + sym
    rhs = f"{p}{s}" if x else str(insn.imm)
    return f"{p}{d} {sym} {rhs}"


def _jmp(insn: Insn) -> str:
    op = insn.opcode
    jop = op & 0xF0
    j32 = op & 0x07 == Class.JMP32
    if jop == Jmp.JA:
        return f"gotol {_rel(insn.imm)}" if j32 else f"goto {_rel(insn.off)}"
    if jop == Jmp.CALL:
        if op & Source.X:
            return f"callx r{insn.dst}"
        return f"call {insn.imm}"
    if jop == Jmp.EXIT:
        return "exit"
    if jop == Jmp.JCOND:
        return f"may_goto {_rel(insn.off)}"
    p = "w" if j32 else "r"
    rhs = f"{p}{insn.src}" if op & Source.X else str(insn.imm)
    return f"if {p}{insn.dst} {_JMP_OPS[Jmp(jop)]} {rhs} goto {_rel(insn.off)}"


def _atomic(insn: Insn, size: Size, narrow: str, dmem: str) -> str:
    imm = insn.imm
    s = insn.src
    t = _USIZE[size]
    if imm == Atomic.LOAD_ACQ:
        return f"{narrow}{insn.dst} = load_acquire(({t} *)(r{insn.src} {_off(insn.off)}))"
    if imm == Atomic.STORE_REL:
        return f"store_release(({t} *){dmem}, {narrow}{s})"
    bits = "64" if size == Size.DW else "32"
    plain = dmem[1:-1]  # "r1 + 0"
    if imm == Atomic.XCHG:
        return f"{narrow}{s} = xchg{'' if bits == '64' else '32'}_{bits}({plain}, {narrow}{s})"
    if imm == Atomic.CMPXCHG:
        return f"{narrow}0 = cmpxchg{'' if bits == '64' else '32'}_{bits}({plain}, {narrow}0, {narrow}{s})"
    sym, name = _ATOMIC_OPS[Atomic(imm & ~Atomic.FETCH)]
    if imm & Atomic.FETCH:
        return f"{narrow}{s} = atomic_fetch_{name}(({t} *){dmem}, {narrow}{s})"
    return f"lock *({t} *){dmem} {sym} {narrow}{s}"


def disassemble(
    program: bytes | Sequence[Insn],
    *,
    alu32: bool = False,
    addresses: bool = True,
) -> str:
    """Disassemble a whole program into ``llvm-objdump``-style lines.

    Each line is ``"{slot:>8}:\\t{text}"`` (the slot is the instruction's
    8-byte index, as objdump prints it) or just the text with
    ``addresses=False``.

    :param program: raw bytes, or a list of :class:`Insn`.
    :raises ParseError: ``program`` is bytes and cannot be decoded.
    """
    insns = decode(program) if isinstance(program, bytes | bytearray | memoryview) else program
    lines = []
    pos = 0
    for insn in insns:
        text = format_insn(insn, alu32=alu32)
        lines.append(f"{pos:>8}:\t{text}" if addresses else text)
        pos += insn.size
    return "\n".join(lines) + ("\n" if lines else "")


# --------------------------------------------------------------------------- kernel style


def format_kernel(insn: Insn) -> str:
    """One instruction in the kernel verifier log's style, e.g. ``(b7) r0 = 0``.

    Matches the 6.18 kernel's log text for every instruction the kernel
    accepts (checked against a live verifier log in
    ``tests/live/test_isa_kernel_log.py``): immediates of jumps and ``lddw``
    in hex, helper calls as ``call bpf_<name>#<id>``, bpf-to-bpf calls as
    ``call pc+<off>``. Where the kernel prints something only it knows, this
    prints a stand-in: kfunc calls are ``call kfunc#<btf id>`` (the kernel
    names the function), pseudo ``lddw`` loads are ``map[fd:N]``,
    ``map[fd:N][0]+OFF``, ``btf_id[N]``, ``func[pc+N]``, ``map[idx:N]``
    (the kernel prints resolved addresses). Invalid encodings print
    ``(xx) <unknown>``.
    """
    code = f"({insn.opcode & 0xFF:02x})"
    if first_flaw(insn) is not None:
        return f"{code} {UNKNOWN}"
    op = insn.opcode
    cls = op & 0x07
    d, s = insn.dst, insn.src
    if cls in (Class.ALU, Class.ALU64):
        return f"{code} {_alu(insn)}"  # the kernel prints ALU ops as LLVM does
    if cls in (Class.JMP, Class.JMP32):
        jop = op & 0xF0
        if jop == Jmp.JA:
            return f"{code} gotol pc{insn.imm:+d}" if cls == Class.JMP32 else f"{code} goto pc{insn.off:+d}"
        if jop == Jmp.CALL:
            if op & Source.X:
                return f"{code} callx r{d}"
            if s == 1:
                return f"{code} call pc{insn.imm:+d}"
            if s == 2:
                return f"{code} call kfunc#{insn.imm}"
            return f"{code} call {helper_name(insn.imm)}#{insn.imm}"
        if jop == Jmp.EXIT:
            return f"{code} exit"
        if jop == Jmp.JCOND:
            return f"{code} may_goto pc{insn.off:+d}"
        p = "w" if cls == Class.JMP32 else "r"
        rhs = f"{p}{s}" if op & Source.X else f"{insn.imm & 0xFFFFFFFF:#x}"
        return f"{code} if {p}{d} {_JMP_OPS[Jmp(jop)]} {rhs} goto pc{insn.off:+d}"
    size = Size(op & 0x18)
    mode = op & 0xE0
    t = _USIZE[size]
    if cls == Class.LD:
        if op == LDDW:
            if s == Pseudo.NONE:
                return f"{code} r{d} = {insn.imm & 0xFFFFFFFFFFFFFFFF:#x}"
            low, high = insn.imm & 0xFFFFFFFF, (insn.imm >> 32) & 0xFFFFFFFF
            kind = {
                Pseudo.MAP_FD: f"map[fd:{low}]",
                Pseudo.MAP_VALUE: f"map[fd:{low}][0]+{high}",
                Pseudo.BTF_ID: f"btf_id[{low}]",
                Pseudo.FUNC: f"func[pc{_s32(low):+d}]",
                Pseudo.MAP_IDX: f"map[idx:{low}]",
                Pseudo.MAP_IDX_VALUE: f"map[idx:{low}][0]+{high}",
            }[Pseudo(s)]
            return f"{code} r{d} = {kind}"
        if mode == Mode.ABS:
            return f"{code} r0 = *({t} *)skb[{insn.imm}]"
        return f"{code} r0 = *({t} *)skb[r{s} + {insn.imm}]"
    if cls == Class.LDX:
        t = _SSIZE[size] if mode == Mode.MEMSX else t
        return f"{code} r{d} = *({t} *)(r{s} {insn.off:+d})"
    if cls == Class.ST:
        return f"{code} *({t} *)(r{d} {insn.off:+d}) = {insn.imm}"
    if mode == Mode.MEM:
        return f"{code} *({t} *)(r{d} {insn.off:+d}) = r{s}"
    imm = insn.imm
    p = "r"  # the kernel names r registers for 32-bit atomics too
    b = "64" if size == Size.DW else ""
    addr = f"({t} *)(r{d} {insn.off:+d})"
    if imm == Atomic.LOAD_ACQ:
        return f"{code} {p}{d} = load_acquire(({t} *)(r{s} {insn.off:+d}))"
    if imm == Atomic.STORE_REL:
        return f"{code} store_release({addr}, {p}{s})"
    if imm == Atomic.XCHG:
        return f"{code} {p}{s} = atomic{b}_xchg({addr}, {p}{s})"
    if imm == Atomic.CMPXCHG:
        return f"{code} {p}0 = atomic{b}_cmpxchg({addr}, {p}0, {p}{s})"
    sym, name = _ATOMIC_OPS[Atomic(imm & ~Atomic.FETCH)]
    if imm & Atomic.FETCH:
        return f"{code} {p}{s} = atomic{b}_fetch_{name}({addr}, {p}{s})"
    return f"{code} lock *{addr} {sym} {p}{s}"


def helper_name(helper: int) -> str:
    """The kernel's name of helper ``helper`` (``bpf_map_lookup_elem``), ``unknown`` for an id it does not define."""
    from ..uapi import HelperId

    try:
        name = HelperId(helper).name
    except ValueError:
        return "unknown"
    return "unknown" if name == "unspec" else f"bpf_{name}"


def _s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v
