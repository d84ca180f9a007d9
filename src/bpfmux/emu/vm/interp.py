"""The checked tier: an interpreter with every memory access bounds-checked.

It executes the slot-indexed code of an :class:`~bpfmux.emu.vm.machine.EmuProgram`
one instruction at a time with the kernel's semantics (see
:mod:`bpfmux.emu` for the list), checks every load and store against the
exact region it falls in (:meth:`AddressSpace.check`), counts executed
instructions in :attr:`RunState.insns` and stops a runaway program after
``VM.max_insns`` instructions. Any invalid operation raises
:class:`~bpfmux.errors.EmulatorFault` naming the instruction (slot) and, for
memory, the address.

bpf-to-bpf calls push a frame on an explicit call stack (own 512-byte stack
region, r6-r9 and r10 saved); tail calls replace the running function in
place; callbacks (``bpf_loop``) re-enter :func:`interpret` one frame deeper.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from ...errors import EmulatorFault
from .runtime import MAX_CALL_FRAMES, MAX_TAIL_CALL_CNT, RunState

if TYPE_CHECKING:
    from .machine import EmuProgram

M64 = 0xFFFFFFFFFFFFFFFF
M32 = 0xFFFFFFFF
SIGN64 = 1 << 63
SIGN32 = 1 << 31

#: Pseudo opcodes of the decoded code (never valid eBPF opcodes; class 0).
MIDDLE_OF_LDDW = 0x100
INVALID = 0x200

_LD = {1: struct.Struct("<B"), 2: struct.Struct("<H"), 4: struct.Struct("<I"), 8: struct.Struct("<Q")}
_LDS = {1: struct.Struct("<b"), 2: struct.Struct("<h"), 4: struct.Struct("<i"), 8: struct.Struct("<q")}
_SIZE = {0x00: 4, 0x08: 2, 0x10: 1, 0x18: 8}
_SIZE_MASK = {1: 0xFF, 2: 0xFFFF, 4: M32, 8: M64}


def s64(x: int) -> int:
    """Signed view of a u64."""
    return x - (1 << 64) if x & SIGN64 else x


def s32(x: int) -> int:
    """Signed view of the low 32 bits."""
    x &= M32
    return x - (1 << 32) if x & SIGN32 else x


def sext(x: int, bits: int) -> int:
    """Sign-extend the low ``bits`` of ``x`` to a Python int."""
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def bswap(x: int, bits: int) -> int:
    """Byte-swap the low ``bits`` of ``x``."""
    return int.from_bytes((x & ((1 << bits) - 1)).to_bytes(bits // 8, "little"), "big")


def alu(op: int, a: int, b: int, is64: bool, off: int, imm: int, pc: int) -> int:
    """Result of ALU operation ``op`` (``opcode & 0xf0``) on u64 operands.

    ``b`` is the source operand already sign-extended (64-bit) or truncated
    (32-bit). Returns the new destination value (zero-extended for 32-bit).

    :raises EmulatorFault: an invalid encoding (bad ``off`` or ``imm``).
    """
    if is64:
        if op == 0x00:
            return (a + b) & M64
        if op == 0x10:
            return (a - b) & M64
        if op == 0x20:
            return (a * b) & M64
        if op == 0x30:
            if off == 0:
                return a // b if b else 0
            if off == 1:
                if not b:
                    return 0
                sa, sb = s64(a), s64(b)
                q = abs(sa) // abs(sb)
                return (-q if (sa < 0) != (sb < 0) else q) & M64
            raise _bad(pc, f"div with invalid offset {off}")
        if op == 0x40:
            return a | b
        if op == 0x50:
            return a & b
        if op == 0x60:
            return (a << (b & 63)) & M64
        if op == 0x70:
            return a >> (b & 63)
        if op == 0x80:
            return -a & M64
        if op == 0x90:
            if off == 0:
                return a % b if b else a
            if off == 1:
                if not b:
                    return a
                sa, sb = s64(a), s64(b)
                r = abs(sa) % abs(sb)
                return (-r if sa < 0 else r) & M64
            raise _bad(pc, f"mod with invalid offset {off}")
        if op == 0xA0:
            return a ^ b
        if op == 0xB0:
            if off == 0:
                return b
            if off in (8, 16, 32):
                return sext(b, off) & M64
            raise _bad(pc, f"mov with invalid offset {off}")
        if op == 0xC0:
            return (s64(a) >> (b & 63)) & M64
        raise _bad(pc, f"unknown ALU64 operation {op:#x}")
    a &= M32
    if op == 0x00:
        return (a + b) & M32
    if op == 0x10:
        return (a - b) & M32
    if op == 0x20:
        return (a * b) & M32
    if op == 0x30:
        if off == 0:
            return a // b if b else 0
        if off == 1:
            if not b:
                return 0
            sa, sb = s32(a), s32(b)
            q = abs(sa) // abs(sb)
            return (-q if (sa < 0) != (sb < 0) else q) & M32
        raise _bad(pc, f"div32 with invalid offset {off}")
    if op == 0x40:
        return a | b
    if op == 0x50:
        return a & b
    if op == 0x60:
        return (a << (b & 31)) & M32
    if op == 0x70:
        return a >> (b & 31)
    if op == 0x80:
        return -a & M32
    if op == 0x90:
        if off == 0:
            return a % b if b else a
        if off == 1:
            if not b:
                return a
            sa, sb = s32(a), s32(b)
            r = abs(sa) % abs(sb)
            return (-r if sa < 0 else r) & M32
        raise _bad(pc, f"mod32 with invalid offset {off}")
    if op == 0xA0:
        return a ^ b
    if op == 0xB0:
        if off == 0:
            return b
        if off in (8, 16):
            return sext(b, off) & M32
        raise _bad(pc, f"mov32 with invalid offset {off}")
    if op == 0xC0:
        return (s32(a) >> (b & 31)) & M32
    raise _bad(pc, f"unknown ALU operation {op:#x}")


def endian(opcode: int, a: int, imm: int, pc: int) -> int:
    """``le``/``be`` (ALU class) and ``bswap`` (ALU64 class).

    :raises EmulatorFault: ``imm`` is not 16, 32 or 64.
    """
    if imm not in (16, 32, 64):
        raise _bad(pc, f"byte swap with invalid width {imm}")
    if opcode & 0x07 == 0x07 or opcode & 0x08:  # bswap, or to big endian
        return bswap(a, imm)
    return a & ((1 << imm) - 1)


def condition(op: int, a: int, b: int, is64: bool, pc: int) -> bool:
    """Whether conditional jump ``op`` (``opcode & 0xf0``) is taken.

    :raises EmulatorFault: not a conditional jump.
    """
    if not is64:
        a &= M32
        b &= M32
    if op == 0x10:
        return a == b
    if op == 0x50:
        return a != b
    if op == 0x20:
        return a > b
    if op == 0x30:
        return a >= b
    if op == 0xA0:
        return a < b
    if op == 0xB0:
        return a <= b
    if op == 0x40:
        return bool(a & b)
    sign = SIGN64 if is64 else SIGN32
    sa, sb = a ^ sign, b ^ sign
    if op == 0x60:
        return sa > sb
    if op == 0x70:
        return sa >= sb
    if op == 0xC0:
        return sa < sb
    if op == 0xD0:
        return sa <= sb
    raise _bad(pc, f"unknown jump operation {op:#x}")


def ld_packet(rs: RunState, pc: int, size: int, where: int) -> int | None:
    """Legacy ``ld_abs``/``ld_ind``: the big-endian value at packet offset
    ``where``, or ``None`` when out of bounds (the program then returns 0).

    :raises EmulatorFault: the run has no packet data.
    """
    pkt = rs.context.packet
    if pkt is None:
        raise EmulatorFault(f"insn {pc}: ld_abs/ld_ind needs packet data (RunContext.packet)", pc=pc)
    if where < 0 or where + size > len(pkt):
        return None
    return int.from_bytes(pkt[where : where + size], "big")


def _bad(pc: int, what: str) -> EmulatorFault:
    return EmulatorFault(f"insn {pc}: invalid instruction: {what}", pc=pc)


def _imm64(imm: int) -> int:
    """The 32-bit immediate sign-extended to 64 bits, as u64."""
    imm &= M32
    return (imm | 0xFFFFFFFF00000000) if imm & SIGN32 else imm


def interpret(rs: RunState, prog: EmuProgram, pc: int, args: list[int], depth: int) -> int:
    """Run the function of ``prog`` starting at slot ``pc`` with r1-r5 =
    ``args`` in a new frame at call depth ``depth``; return its ``r0``.

    :raises EmulatorFault: the program faults.
    """
    space = rs.space
    check = space.check
    vm = rs.vm
    helpers = vm.helpers.table
    limit = vm.max_insns
    code = prog.code
    n = len(code)
    regs = [0] * 11
    regs[1:6] = args
    base, _ = rs.frame(depth)
    regs[10] = base + 512
    stack: list[tuple] = []  # (return pc, code, prog, r6-r9, r10, depth)
    count = rs.insns
    try:
        while True:
            if not 0 <= pc < n:
                raise EmulatorFault(f"insn {pc}: jump outside the program (0..{n - 1})", pc=pc)
            rs.pc = pc
            op, dst, src, off, imm = code[pc]
            count += 1
            if count > limit:
                raise EmulatorFault(
                    f"insn {pc}: more than {limit} instructions executed; the program does not terminate "
                    "(raise VM.max_insns if it really needs more)", pc=pc)
            cls = op & 0x07
            if cls == 0x07 or cls == 0x04:  # ALU64 / ALU
                is64 = cls == 0x07
                o = op & 0xF0
                if o == 0xD0:
                    regs[dst] = endian(op, regs[dst], imm, pc)
                elif op & 0x08:
                    b = regs[src] if is64 else regs[src] & M32
                    regs[dst] = alu(o, regs[dst], b, is64, off, imm, pc)
                else:
                    b = _imm64(imm) if is64 else imm & M32
                    regs[dst] = alu(o, regs[dst], b, is64, off, imm, pc)
                pc += 1
            elif cls == 0x05 or cls == 0x06:  # JMP / JMP32
                o = op & 0xF0
                if o == 0x00:  # ja / gotol
                    pc += 1 + (off if cls == 0x05 else s32(imm))
                elif o == 0x90:  # exit
                    if not stack:
                        rs.insns = count
                        return regs[0]
                    pc, code, prog, saved, r10, depth = stack.pop()
                    n = len(code)
                    regs[1:10] = saved
                    regs[10] = r10
                elif o == 0x80:  # call
                    if op & 0x08:  # callx: target in a register
                        target = regs[dst]
                        callee = space.handle(target) if target >= 1 << 32 else None
                        kind = 0 if callee is None else 1
                    else:
                        kind, target, callee = src, None, None
                    if kind == 0:  # helper
                        hid = imm if target is None else target
                        fn = helpers.get(hid)
                        if fn is None:
                            raise EmulatorFault(f"insn {pc}: unknown helper {hid}; register it with "
                                                "VM.helpers.register()", pc=pc)
                        rs.depth = depth
                        rs.insns = count
                        if hid == 12 and target is not None:
                            raise EmulatorFault(f"insn {pc}: a tail call through callx is not supported", pc=pc)
                        if hid == 12:  # tail call
                            tgt = fn(rs, regs[1], regs[2], regs[3], regs[4], regs[5])
                            count = rs.insns
                            if tgt is not None:
                                prog = tgt
                                code = prog.code
                                n = len(code)
                                rs.current = prog
                                regs[0] = regs[6] = regs[7] = regs[8] = regs[9] = 0
                                base, _ = rs.frame(depth)
                                regs[10] = base + 512
                                pc = 0
                                continue
                        else:
                            regs[0] = fn(rs, regs[1], regs[2], regs[3], regs[4], regs[5]) & M64
                            count = rs.insns
                        pc += 1
                    elif kind == 1:  # bpf-to-bpf
                        if callee is not None:
                            cprog, tpc = _resolve_code(rs, callee, target, pc)  # type: ignore[arg-type]  # set with callee
                        else:
                            cprog, tpc = prog, pc + 1 + s32(imm)
                        if depth + 1 >= MAX_CALL_FRAMES:
                            raise EmulatorFault(f"insn {pc}: call depth exceeds {MAX_CALL_FRAMES} frames", pc=pc)
                        stack.append((pc + 1, code, prog, regs[1:10], regs[10], depth))
                        regs[0] = regs[6] = regs[7] = regs[8] = regs[9] = 0
                        depth += 1
                        base, _ = rs.frame(depth)
                        regs[10] = base + 512
                        prog = cprog
                        code = prog.code
                        n = len(code)
                        pc = tpc
                    else:  # kfunc
                        fn = vm.kfuncs.get(imm)
                        if fn is None:
                            raise EmulatorFault(f"insn {pc}: unknown kfunc (BTF id {imm}); register it with "
                                                "VM.register_kfunc()", pc=pc)
                        rs.depth = depth
                        rs.insns = count
                        regs[0] = fn(rs, regs[1], regs[2], regs[3], regs[4], regs[5]) & M64
                        count = rs.insns
                        pc += 1
                elif o == 0xE0:  # may_goto
                    if rs.loops_left <= 0:
                        pc += 1 + off
                    else:
                        rs.loops_left -= 1
                        pc += 1
                else:
                    b = regs[src] if op & 0x08 else (_imm64(imm) if cls == 0x05 else imm & M32)
                    if condition(o, regs[dst], b, cls == 0x05, pc):
                        pc += 1 + off
                    else:
                        pc += 1
            elif cls == 0x01:  # LDX
                mode = op & 0xE0
                size = _SIZE[op & 0x18]
                addr = (regs[src] + off) & M64
                buf, o = check(addr, size, False, pc)
                if mode == 0x60:
                    regs[dst] = _LD[size].unpack_from(buf, o)[0]
                else:  # MEMSX
                    regs[dst] = _LDS[size].unpack_from(buf, o)[0] & M64
                pc += 1
            elif cls == 0x03 or cls == 0x02:  # STX / ST
                mode = op & 0xE0
                size = _SIZE[op & 0x18]
                if mode == 0x60:
                    value = regs[src] if cls == 0x03 else _imm64(imm)
                    addr = (regs[dst] + off) & M64
                    buf, o = check(addr, size, True, pc)
                    _LD[size].pack_into(buf, o, value & _SIZE_MASK[size])
                else:  # STX | ATOMIC
                    _atomic(rs, regs, pc, dst, src, off, imm, size)
                pc += 1
            elif op == 0x18:  # lddw (resolved at load)
                regs[dst] = imm
                pc += 2
            elif cls == 0x00 and op & 0xE0 in (0x20, 0x40):  # legacy ld_abs / ld_ind
                size = _SIZE[op & 0x18]
                where = s32(imm) + (s32(regs[src]) if op & 0xE0 == 0x40 else 0)
                value = ld_packet(rs, pc, size, where)  # type: ignore[assignment]  # None checked below
                if value is None:
                    rs.insns = count
                    return 0  # the kernel ends the program with r0 = 0
                regs[0] = value
                pc += 1
            elif op == MIDDLE_OF_LDDW:
                raise EmulatorFault(f"insn {pc}: jump into the middle of an lddw", pc=pc)
            elif op == INVALID:
                raise _bad(pc, prog.invalid.get(pc, "malformed"))
            else:
                raise _bad(pc, f"unknown opcode {op:#04x}")
    finally:
        rs.insns = count


def _resolve_code(rs: RunState, callee: object, target: int, pc: int) -> tuple[EmuProgram, int]:
    from .machine import EmuProgram

    if not isinstance(callee, EmuProgram):
        raise EmulatorFault(f"insn {pc}: callx to {target:#x}, which is not code", pc=pc, address=target)
    off = target - callee.code_addr
    if off % 8 or not 0 <= off // 8 < len(callee.code):
        raise EmulatorFault(f"insn {pc}: callx to {target:#x}, not an instruction of {callee.name}", pc=pc,
                            address=target)
    return callee, off // 8


def _atomic(rs: RunState, regs: list[int], pc: int, dst: int, src: int, off: int, imm: int, size: int) -> None:
    if imm in (0x100, 0x110):  # load-acquire / store-release
        if imm == 0x100:
            buf, o = rs.space.check((regs[src] + off) & M64, size, False, pc)
            regs[dst] = _LD[size].unpack_from(buf, o)[0]
        else:
            buf, o = rs.space.check((regs[dst] + off) & M64, size, True, pc)
            _LD[size].pack_into(buf, o, regs[src] & _SIZE_MASK[size])
        return
    mask = _SIZE_MASK[size]
    st = _LD[size]
    buf, o = rs.space.check((regs[dst] + off) & M64, size, True, pc)
    old = st.unpack_from(buf, o)[0]
    v = regs[src] & mask
    base = imm & ~0x01
    if imm == 0xF1:  # cmpxchg
        if old == regs[0] & mask:
            st.pack_into(buf, o, v)
        regs[0] = old
        return
    if imm == 0xE1:  # xchg
        st.pack_into(buf, o, v)
        regs[src] = old
        return
    if base == 0x00:
        new = (old + v) & mask
    elif base == 0x40:
        new = old | v
    elif base == 0x50:
        new = old & v
    elif base == 0xA0:
        new = old ^ v
    else:
        raise _bad(pc, f"unknown atomic operation {imm:#x}")
    st.pack_into(buf, o, new)
    if imm & 0x01:
        regs[src] = old


__all__ = ["MAX_TAIL_CALL_CNT", "alu", "condition", "endian", "interpret"]
