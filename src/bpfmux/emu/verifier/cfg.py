"""Structural checks of the emulator's verifier: opcodes, jumps, subprograms,
reachability, prune points and register liveness.

Everything here looks at the instruction list only (no abstract values).
Failures raise ``_Reject`` with the kernel's wording and errno (``EINVAL`` for
malformed programs).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field

from ...isa.insn import Insn
from ...isa.opcodes import LDDW, Alu, Class, Jmp, Mode, Size
from ...uapi import HelperId
from .helpers import PROTOS


class Reject(Exception):
    """Internal: the program is rejected (turned into ``VerifierError`` by ``verify``)."""

    def __init__(self, err: int, msg: str, insn: int | None = None) -> None:
        super().__init__(msg)
        self.errno = err
        self.msg = msg
        self.insn = insn


_ALU_OPS = {int(o) for o in Alu}
_JMP_OPS = {int(o) for o in Jmp}
_SIZES: dict[int, int] = {Size.B: 1, Size.H: 2, Size.W: 4, Size.DW: 8}
_SZ_NAME = {1: "u8", 2: "u16", 4: "u32", 8: "u64"}
_ALU_SYM: dict[int, str] = {
    Alu.ADD: "+=", Alu.SUB: "-=", Alu.MUL: "*=", Alu.DIV: "/=", Alu.OR: "|=", Alu.AND: "&=",
    Alu.LSH: "<<=", Alu.RSH: ">>=", Alu.MOD: "%=", Alu.XOR: "^=", Alu.MOV: "=", Alu.ARSH: "s>>=",
}
_JMP_SYM: dict[int, str] = {
    Jmp.JEQ: "==", Jmp.JGT: ">", Jmp.JGE: ">=", Jmp.JSET: "&", Jmp.JNE: "!=", Jmp.JSGT: "s>",
    Jmp.JSGE: "s>=", Jmp.JLT: "<", Jmp.JLE: "<=", Jmp.JSLT: "s<", Jmp.JSLE: "s<=",
}


def helper_name(hid: int) -> str:
    try:
        return f"bpf_{HelperId(hid).name}"
    except ValueError:
        return "unknown"


def format_insn(insn: Insn, slot: int = 0) -> str:
    """Kernel-verifier-log text of one instruction (``r0 = *(u32 *)(r1 +8)``)."""
    op, cls = insn.opcode, insn.opcode & 7
    d, s, off, imm = insn.dst, insn.src, insn.off, insn.imm
    if op == LDDW:
        kinds = {1: "map_fd", 2: "map_value", 3: "btf_id", 4: "func", 5: "map_idx", 6: "map_idx_value"}
        if s in kinds:
            return f"r{d} = {kinds[s]}[{imm & 0xFFFFFFFF}]" + (f"+{imm >> 32}" if s in (2, 6) and imm >> 32 else "")
        return f"r{d} = {imm:#x}"
    if cls in (Class.ALU, Class.ALU64):
        r = "r" if cls == Class.ALU64 else "w"
        aop = op & 0xF0
        if aop == Alu.NEG:
            return f"{r}{d} = -{r}{d}"
        if aop == Alu.END:
            kind = "bswap" if cls == Class.ALU64 else ("be" if op & 0x08 else "le")
            return f"r{d} = {kind}{imm} r{d}"
        sym = _ALU_SYM.get(aop, "?=")
        if aop == Alu.DIV and off == 1:
            sym = "s/="
        if aop == Alu.MOD and off == 1:
            sym = "s%="
        srcs = f"{r}{s}" if op & 0x08 else f"{imm}"
        if aop == Alu.MOV and off in (8, 16, 32) and op & 0x08:
            return f"{r}{d} = ({'s' + str(off)}){r}{s}"
        return f"{r}{d} {sym} {srcs}"
    if cls == Class.LDX:
        sz = _SZ_NAME.get(_SIZES.get(op & 0x18, 0), "?")
        sx = "s" if op & 0xE0 == Mode.MEMSX else "u"
        return f"r{d} = *({sx}{sz[1:]} *)(r{s} {off:+d})"
    if cls == Class.ST:
        sz = _SZ_NAME.get(_SIZES.get(op & 0x18, 0), "?")
        return f"*({sz} *)(r{d} {off:+d}) = {imm}"
    if cls == Class.STX:
        sz = _SZ_NAME.get(_SIZES.get(op & 0x18, 0), "?")
        if op & 0xE0 == Mode.ATOMIC:
            return f"atomic[{imm:#x}] *({sz} *)(r{d} {off:+d}), r{s}"
        return f"*({sz} *)(r{d} {off:+d}) = r{s}"
    if cls == Class.LD:
        sz = _SZ_NAME.get(_SIZES.get(op & 0x18, 0), "?")
        if op & 0xE0 == Mode.ABS:
            return f"r0 = *({sz} *)skb[{imm}]"
        return f"r0 = *({sz} *)skb[r{s} + {imm}]"
    if cls in (Class.JMP, Class.JMP32):
        jop = op & 0xF0
        if jop == Jmp.EXIT:
            return "exit"
        if jop == Jmp.CALL:
            if s == 1:
                return f"call pc{imm:+d}"
            if s == 2:
                return f"call kernel-function#{imm}"
            return f"call {helper_name(imm)}#{imm}"
        if jop == Jmp.JA:
            return f"goto pc{(imm if cls == Class.JMP32 else off):+d}"
        r = "w" if cls == Class.JMP32 else "r"
        rhs = f"{r}{s}" if op & 0x08 else f"{imm:#x}"
        return f"if {r}{d} {_JMP_SYM.get(jop, '?')} {rhs} goto pc{off:+d}"
    return f"(bad opcode {op:#04x})"


@dataclass
class Cfg:
    """The structure of a program, as the verifier needs it."""

    insns: list[Insn]
    slots: list[int]
    slot_to_idx: dict[int, int]
    targets: list[int]  # jump / call / func-pointer target index, -1 if none
    subprogs: list[int]  # start index of each subprogram
    subprog_of: list[int]
    prune: list[bool]
    live: list[int] = field(default_factory=list)  # live-in registers bitmask per insn
    has_loops: bool = False


def _validate(insn: Insn, slot: int) -> None:
    op, cls = insn.opcode, insn.opcode & 7
    if insn.dst > 10 or insn.src > 10:
        raise Reject(errno.EINVAL, f"R{max(insn.dst, insn.src)} is invalid", slot)
    if cls in (Class.ALU, Class.ALU64):
        aop = op & 0xF0
        if aop not in _ALU_OPS:
            raise Reject(errno.EINVAL, f"unknown opcode {op:02x}", slot)
        if aop == Alu.END:
            if insn.imm not in (16, 32, 64) or insn.src or (cls == Class.ALU64 and op & 0x08):
                raise Reject(errno.EINVAL, "BPF_END uses reserved fields", slot)
            return
        if aop == Alu.NEG:
            if insn.src or insn.off or insn.imm or op & 0x08:
                raise Reject(errno.EINVAL, "BPF_NEG uses reserved fields", slot)
            return
        if op & 0x08:
            ok_off = (0,) if aop not in (Alu.DIV, Alu.MOD, Alu.MOV) else ((0, 1) if aop != Alu.MOV else
                                                                           (0, 8, 16, 32))
            if insn.imm or insn.off not in ok_off:
                raise Reject(errno.EINVAL, f"BPF_{'ALU64' if cls == Class.ALU64 else 'ALU'} uses reserved fields",
                             slot)
        else:
            ok_off = (0, 1) if aop in (Alu.DIV, Alu.MOD) else (0,)
            if insn.src or insn.off not in ok_off:
                raise Reject(errno.EINVAL, f"BPF_{'ALU64' if cls == Class.ALU64 else 'ALU'} uses reserved fields",
                             slot)
            if aop in (Alu.DIV, Alu.MOD) and insn.imm == 0:
                raise Reject(errno.EINVAL, "div by zero", slot)
            if aop in (Alu.LSH, Alu.RSH, Alu.ARSH):
                bits = 64 if cls == Class.ALU64 else 32
                if not 0 <= insn.imm < bits:
                    raise Reject(errno.EINVAL, f"invalid shift {insn.imm}", slot)
        return
    if cls in (Class.JMP, Class.JMP32):
        jop = op & 0xF0
        if jop not in _JMP_OPS:
            raise Reject(errno.EINVAL, f"unknown opcode {op:02x}", slot)
        if jop == Jmp.EXIT:
            if cls != Class.JMP or insn.src or insn.dst or insn.off or insn.imm or op & 0x08:
                raise Reject(errno.EINVAL, "BPF_EXIT uses reserved fields", slot)
        elif jop == Jmp.CALL:
            if cls != Class.JMP or insn.off or insn.dst or op & 0x08 or insn.src > 2:
                raise Reject(errno.EINVAL, "BPF_CALL uses reserved fields", slot)
        elif jop == Jmp.JA:
            if op & 0x08 or insn.src or insn.dst or (cls == Class.JMP and insn.imm) or (
                    cls == Class.JMP32 and insn.off):
                raise Reject(errno.EINVAL, "BPF_JA uses reserved fields", slot)
        elif not op & 0x08 and insn.src:
            raise Reject(errno.EINVAL, "BPF_JMP/JMP32 uses reserved fields", slot)
        elif op & 0x08 and insn.imm:
            raise Reject(errno.EINVAL, "BPF_JMP/JMP32 uses reserved fields", slot)
        return
    mode = op & 0xE0
    if cls == Class.LD:
        if op == LDDW:
            if insn.src > 6 or insn.off:
                raise Reject(errno.EINVAL, "invalid bpf_ld_imm64 insn", slot)
            return
        if mode in (Mode.ABS, Mode.IND) and op & 0x18 != Size.DW:
            if insn.dst or insn.off or (mode == Mode.ABS and insn.src):
                raise Reject(errno.EINVAL, "BPF_LD_[ABS|IND] uses reserved fields", slot)
            return
        raise Reject(errno.EINVAL, f"unknown opcode {op:02x}", slot)
    if cls == Class.LDX:
        if mode not in (Mode.MEM, Mode.MEMSX) or (mode == Mode.MEMSX and op & 0x18 == Size.DW):
            raise Reject(errno.EINVAL, f"unknown opcode {op:02x}", slot)
        if insn.imm:
            raise Reject(errno.EINVAL, "BPF_LDX uses reserved fields", slot)
        return
    if cls == Class.ST:
        if mode != Mode.MEM:
            raise Reject(errno.EINVAL, f"unknown opcode {op:02x}", slot)
        if insn.src:
            raise Reject(errno.EINVAL, "BPF_ST uses reserved fields", slot)
        return
    if cls == Class.STX:
        if mode == Mode.ATOMIC:
            if op & 0x18 not in (Size.W, Size.DW):
                raise Reject(errno.EINVAL, "invalid atomic operand size", slot)
            if insn.imm not in (0x00, 0x01, 0x40, 0x41, 0x50, 0x51, 0xA0, 0xA1, 0xE1, 0xF1):
                raise Reject(errno.EINVAL, f"BPF_ATOMIC uses invalid atomic opcode {insn.imm:02x}", slot)
            return
        if mode != Mode.MEM:
            raise Reject(errno.EINVAL, f"unknown opcode {op:02x}", slot)
        if insn.imm:
            raise Reject(errno.EINVAL, "BPF_STX uses reserved fields", slot)
        return
    raise Reject(errno.EINVAL, f"unknown opcode {op:02x}", slot)


def _uses_defs(insn: Insn) -> tuple[int, int]:
    """(use mask, def mask) of registers for liveness."""
    op, cls = insn.opcode, insn.opcode & 7
    d, s = 1 << insn.dst, 1 << insn.src
    if cls in (Class.ALU, Class.ALU64):
        aop = op & 0xF0
        use = 0 if aop == Alu.MOV else d
        if op & 0x08 and aop not in (Alu.END, Alu.NEG):
            use |= s
        return use, d
    if cls == Class.LDX:
        return s, d
    if cls == Class.ST:
        return d, 0
    if cls == Class.STX:
        use = d | s
        if op & 0xE0 == Mode.ATOMIC:
            if insn.imm == 0xF1:
                return use | 1, 1
            if insn.imm & 1:
                return use, s
        return use, 0
    if cls == Class.LD:
        if op == LDDW:
            return 0, d
        return (1 << 6) | (s if op & 0xE0 == Mode.IND else 0), 0x3F
    jop = op & 0xF0
    if jop == Jmp.EXIT:
        return 1, 0
    if jop == Jmp.CALL:
        if insn.src == 0 and insn.imm in PROTOS:
            n = len(PROTOS[insn.imm].args)
            return (1 << (n + 1)) - 2, 0x3F
        return 0x3E, 0x3F
    if jop == Jmp.JA:
        return 0, 0
    return d | (s if op & 0x08 else 0), 0


def build_cfg(insns: list[Insn]) -> Cfg:
    """Check the program's structure and compute what the verifier needs.

    :raises Reject: a malformed or unreachable instruction, a bad jump.
    """
    n = len(insns)
    if n == 0:
        raise Reject(errno.EINVAL, "empty program")
    slots: list[int] = []
    pos = 0
    for ins in insns:
        slots.append(pos)
        pos += ins.size
    nslots = pos
    if nslots > 1_000_000:
        raise Reject(errno.E2BIG, f"program has {nslots} instructions; the limit is 1000000")
    slot_to_idx = {s: i for i, s in enumerate(slots)}
    targets = [-1] * n
    sub_starts = {0}
    for i, insn in enumerate(insns):
        slot = slots[i]
        _validate(insn, slot)
        op, cls = insn.opcode, insn.opcode & 7
        if cls in (Class.JMP, Class.JMP32):
            jop = op & 0xF0
            if jop == Jmp.CALL:
                if insn.src == 1:
                    t = slot + insn.imm + 1
                    if t < 0 or t >= nslots or t not in slot_to_idx:
                        raise Reject(errno.EINVAL, "call to invalid destination", slot)
                    targets[i] = slot_to_idx[t]
                    sub_starts.add(targets[i])
                continue
            if jop == Jmp.EXIT:
                continue
            off = insn.imm if (jop == Jmp.JA and cls == Class.JMP32) else insn.off
            t = slot + off + 1
            if t < 0 or t >= nslots:
                raise Reject(errno.EINVAL, f"jump out of range from insn {slot} to {t}", slot)
            if t not in slot_to_idx:
                raise Reject(errno.EINVAL, f"jump into the middle of ldimm64 insn {t - 1}", slot)
            targets[i] = slot_to_idx[t]
        elif op == LDDW and insn.src == 4:
            t = slot + _s32(insn.imm & 0xFFFFFFFF) + 1
            if t < 0 or t >= nslots or t not in slot_to_idx:
                raise Reject(errno.EINVAL, "invalid func pointer destination", slot)
            targets[i] = slot_to_idx[t]
            sub_starts.add(targets[i])
    subprogs = sorted(sub_starts)
    subprog_of = [0] * n
    k = 0
    for i in range(n):
        while k + 1 < len(subprogs) and subprogs[k + 1] <= i:
            k += 1
        subprog_of[i] = k
    # last insn of each subprog; jumps stay inside their subprog
    for k, start in enumerate(subprogs):
        end = subprogs[k + 1] if k + 1 < len(subprogs) else n
        last = insns[end - 1]
        lop = last.opcode
        if not (lop & 7 in (Class.JMP, Class.JMP32) and lop & 0xF0 in (Jmp.EXIT, Jmp.JA)):
            raise Reject(errno.EINVAL, "last insn is not an exit or jmp", slots[end - 1])
        for i in range(start, end):
            t = targets[i]
            insn = insns[i]
            if t >= 0 and not (insn.opcode & 0xF0 == Jmp.CALL or insn.opcode == LDDW) and not start <= t < end:
                raise Reject(errno.EINVAL, f"jump out of range from insn {slots[i]} to {slots[t]}", slots[i])
    # reachability (DFS following jumps and calls), back-edges
    seen = bytearray(n)
    onstack = bytearray(n)
    has_loops = False
    prune = [False] * n
    work: list[tuple[int, int]] = [(0, 0)]
    # iterative DFS with explicit successor index to find back edges
    succs_cache: dict[int, list[int]] = {}

    def succs(i: int) -> list[int]:
        c = succs_cache.get(i)
        if c is not None:
            return c
        insn = insns[i]
        op, cls = insn.opcode, insn.opcode & 7
        out: list[int] = []
        if cls in (Class.JMP, Class.JMP32):
            jop = op & 0xF0
            if jop == Jmp.EXIT:
                out = []
            elif jop == Jmp.CALL:
                out = [i + 1] if i + 1 < n else []
                if insn.src == 1:
                    out.append(targets[i])
            elif jop == Jmp.JA:
                out = [targets[i]]
            else:
                out = [i + 1, targets[i]]
        else:
            out = [i + 1] if i + 1 < n else []
            if op == LDDW and insn.src == 4:
                out.append(targets[i])
        succs_cache[i] = out
        return out

    seen[0] = 1
    onstack[0] = 1
    while work:
        i, k = work[-1]
        ss = succs(i)
        if k < len(ss):
            work[-1] = (i, k + 1)
            j = ss[k]
            if j >= n:
                raise Reject(errno.EINVAL, f"jump out of range from insn {slots[i]} to {slots[-1] + 1}", slots[i])
            if onstack[j]:
                has_loops = True
                continue
            if not seen[j]:
                seen[j] = 1
                onstack[j] = 1
                work.append((j, 0))
        else:
            onstack[i] = 0
            work.pop()
    for i in range(n):
        if not seen[i]:
            raise Reject(errno.EINVAL, f"unreachable insn {slots[i]}", slots[i])
    # prune points: jump targets, both sides of conditional jumps, after calls
    for i, insn in enumerate(insns):
        op, cls = insn.opcode, insn.opcode & 7
        if cls in (Class.JMP, Class.JMP32):
            jop = op & 0xF0
            if jop == Jmp.EXIT:
                continue
            if jop == Jmp.CALL:
                if i + 1 < n:
                    prune[i + 1] = True
                continue
            prune[targets[i]] = True
            if jop != Jmp.JA and i + 1 < n:
                prune[i + 1] = True
    cfg = Cfg(insns, slots, slot_to_idx, targets, subprogs, subprog_of, prune, has_loops=has_loops)
    cfg.live = _liveness(cfg, succs)
    return cfg


def _s32(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def _liveness(cfg: Cfg, succs) -> list[int]:
    insns = cfg.insns
    n = len(insns)
    ud = [_uses_defs(i) for i in insns]
    live = [0] * n
    # successors for liveness stay inside the function: calls continue at i+1
    local: list[list[int]] = []
    preds: list[list[int]] = [[] for _ in range(n)]
    for i, insn in enumerate(insns):
        op = insn.opcode
        if op & 7 in (Class.JMP, Class.JMP32) and op & 0xF0 == Jmp.CALL:
            ss = [i + 1] if i + 1 < n else []
        elif op == LDDW:
            ss = [i + 1] if i + 1 < n else []
        else:
            ss = succs(i)
        local.append(ss)
        for j in ss:
            preds[j].append(i)
    work = list(range(n - 1, -1, -1))
    inwork = bytearray([1]) * n
    while work:
        i = work.pop()
        inwork[i] = 0
        out = 0
        for j in local[i]:
            out |= live[j]
        use, d = ud[i]
        new = use | (out & ~d)
        if new != live[i]:
            live[i] = new
            for p in preds[i]:
                if not inwork[p]:
                    inwork[p] = 1
                    work.append(p)
    return live
