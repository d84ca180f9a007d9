"""Invalid programs for differential verifier runs: one defect spliced into a valid one.

:func:`invalid_case` takes a valid :class:`~bpfmux.emu.vm.progen_cases.ProgramCase`
and splices in one defect of :data:`DEFECTS`: an encoding the kernel
refuses (unknown opcodes, reserved fields, bad registers, malformed
``lddw``), a structural error (jumps out of range, unreachable code,
missing exit, bad call targets), a bad map fd or kfunc id, an unsafe access
(uninitialized registers, stack, context and map values out of bounds,
misaligned or through modified pointers, null map values), forbidden pointer
arithmetic, wrong helper use (not allowed, bad arguments, sizes, leaked
ringbuf records), infinite or too long loops, call chains too deep or too
much stack, bad callbacks, wrong load flags. About one in five defects is
put behind a branch that is never taken (``if r10 != 0``): the kernel checks
some defects on every instruction and others only where a path goes, and a
verifier must agree on which.

Some defects are not defects for a privileged loader (the kernel accepts
them: pointer negation, byte swaps of pointers, uninitialized stack reads);
they are kept to check that direction too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

from ...isa.insn import Insn, slot_offsets
from ...uapi import MapType
from .progen_cases import ProgramCase, relocate_insert

__all__ = ["DEFECTS", "invalid_case"]

_R10_NONZERO = 0x55  # jne dst, imm


def _jne_r10(skip: int) -> Insn:
    """``if r10 != 0 goto +skip``: always taken (the frame pointer is never null)."""
    return Insn(_R10_NONZERO, 10, 0, skip, 0)


def _main_positions(case: ProgramCase) -> int:
    """Index of the last instruction of the main function (subprograms follow it)."""
    from ...isa.analysis import subprogram_entries

    entries = [e for e in subprogram_entries(case.insns) if e > 0]
    return (min(entries) if entries else len(case.insns)) - 1


def _insert(case: ProgramCase, rng: random.Random, new: list[Insn], dead: bool, name: str,
            at: int | None = None) -> ProgramCase:
    last = _main_positions(case)
    pos = at if at is not None else rng.randint(1, last)
    if dead:
        new = [_jne_r10(sum(i.size for i in new)), *new]
    insns = relocate_insert(case.insns, pos, new)
    funcs = case.funcs
    if funcs is not None:  # subprograms follow the main function: they move by what was inserted
        at = slot_offsets(case.insns)[pos]
        grow = sum(i.size for i in new)
        funcs = [(s + grow if s > at else s, linkage) for s, linkage in funcs]
    return replace(case, insns=insns, funcs=funcs, defect=name, dead=dead)


# ---------------------------------------------------------------------------- defects as inserted code


def _reg(rng: random.Random) -> int:
    return rng.choice([0, 1, 2, 3, 4, 5, 6, 7, 8])


def _ins_bad_map_fd(rng: random.Random) -> list[Insn]:
    return [Insn(0x18, rng.choice([1, 2, 3]), rng.choice([1, 2]), 0, rng.choice([999, 4000, 65535]))]


def _ins_kfunc_id(rng: random.Random) -> list[Insn]:
    return [Insn(0x85, 0, 2, 0, rng.choice([1, 2, 3]))]


def _ins_unknown_opcode(rng: random.Random) -> list[Insn]:
    from ...emu.verifier.cfg import unknown_opcode

    ops = [op for op in range(256) if op != 0x18 and op & 7 != 1 and unknown_opcode(op)]
    return [Insn(rng.choice(ops), _reg(rng), _reg(rng), 0, 0)]


def _ins_ldx_reserved(rng: random.Random) -> list[Insn]:
    if rng.random() < 0.5:
        return [Insn(0x79, _reg(rng), 10, -8, rng.randint(1, 100))]
    return [Insn(rng.choice([0x01, 0x21, 0x41, 0xA1]), _reg(rng), 10, -8, 0)]


def _ins_lddw_src(rng: random.Random) -> list[Insn]:
    return [Insn(0x18, _reg(rng), rng.choice([7, 8, 15]), 0, 1)]


def _ins_reserved(rng: random.Random) -> list[Insn]:
    d = _reg(rng)
    return [rng.choice([
        Insn(0x07, d, rng.randint(1, 10), 0, 1),  # add imm with src
        Insn(0x0F, d, 1, rng.randint(2, 9), 0),  # add reg with off
        Insn(0x0F, d, 1, 0, rng.randint(1, 9)),  # add reg with imm
        Insn(0x87, d, 1, 0, 0),  # neg with src
        Insn(0xD4, d, 0, 0, rng.choice([0, 8, 24, 128])),  # byte swap width
        Insn(0xBC, d, 1, 32, 0),  # 32-bit movsx from 32 bits
        Insn(0xBF, d, 1, rng.choice([2, 4, 7, 64]), 0),  # movsx width
        Insn(0x37, d, 0, 2, 3),  # div off 2
        Insn(0x7B, 10, d, -8, 1),  # stx imm
        Insn(0x62, 10, 1, -8, 0),  # st src
        Insn(0x05, 1, 0, 0, 0),  # ja dst
        Insn(0x15, d, 1, 0, 0),  # jeq imm with src
        Insn(0x1D, d, 1, 0, 5),  # jeq reg with imm
        Insn(0x85, 1, 0, 0, 7),  # call dst
        Insn(0x18, d, 0, 3, 1),  # lddw off
        Insn(0xE5, 0, 0, 0, 0),  # may_goto off 0
        Insn(0xE5, 1, 0, 1, 0),  # may_goto dst
        Insn(0xDB, 10, d, -8, 0x02),  # atomic op
        Insn(0xD3, 10, d, -8, 0x00),  # atomic add 1 byte
    ])]


def _ins_bad_register(rng: random.Random) -> list[Insn]:
    r = rng.randint(11, 15)
    return [rng.choice([Insn(0xB7, r, 0, 0, 1), Insn(0xBF, 0, r, 0, 0), Insn(0x79, r, 10, -8, 0),
                        Insn(0x79, 0, r, 0, 0), Insn(0x15, r, 0, 0, 0)])]


def _ins_div_zero(rng: random.Random) -> list[Insn]:
    return [Insn(rng.choice([0x37, 0x34, 0x97, 0x94]), _reg(rng), 0, rng.choice([0, 1]), 0)]


def _ins_shift(rng: random.Random) -> list[Insn]:
    wide = rng.random() < 0.5
    return [Insn((0x07 if wide else 0x04) | rng.choice([0x60, 0x70, 0xC0]), _reg(rng), 0, 0,
                 rng.choice([64, 65, -1, 100] if wide else [32, 33, -1, 64]))]


def _ins_uninit(rng: random.Random) -> list[Insn]:
    r = rng.choice([1, 2, 3, 4, 5])
    return [Insn(0x85, 0, 0, 0, 7), rng.choice([Insn(0xBF, 0, r, 0, 0), Insn(0x0F, 0, r, 0, 0),
                                                Insn(0x7B, 10, r, -8, 0), Insn(0x15, r, 0, 0, 0)])]


def _ins_stack_oob(rng: random.Random) -> list[Insn]:
    off = rng.choice([-520, -513, -1024, 0, 8, -4 + 8])
    size = 0x18 if off % 8 == 0 else 0x00
    if rng.random() < 0.5:
        return [Insn(0x63 | size, 10, _reg(rng), off, 0)]
    return [Insn(0x61 | size, _reg(rng), 10, off, 0)]


def _ins_stack_misaligned(rng: random.Random) -> list[Insn]:
    size, sz = rng.choice([(2, 0x08), (4, 0x00), (8, 0x18)])
    off = -8 * rng.randint(1, 8) + rng.randint(1, size - 1)
    return [rng.choice([Insn(0x63 | sz, 10, _reg(rng), off, 0), Insn(0x61 | sz, _reg(rng), 10, off, 0)])]


def _ins_stack_var(rng: random.Random) -> list[Insn]:
    return [Insn(0x85, 0, 0, 0, 7), Insn(0xBF, 1, 10, 0, 0), Insn(0x0F, 1, 0, 0, 0), Insn(0x71, 0, 1, -8, 0)]


def _ins_write_fp(rng: random.Random) -> list[Insn]:
    return [rng.choice([Insn(0xB7, 10, 0, 0, 0), Insn(0x07, 10, 0, 0, 8), Insn(0xBF, 10, 1, 0, 0),
                        Insn(0x79, 10, 10, -8, 0)])]


def _ins_ctx(rng: random.Random) -> list[Insn]:
    return [rng.choice([Insn(0x79, 0, 9, -8, 0), Insn(0x61, 0, 9, 2, 0), Insn(0x79, 0, 9, 4, 0),
                        Insn(0x79, 0, 9, 32767, 0)])]


def _ins_modified_ctx(rng: random.Random) -> list[Insn]:
    return [Insn(0xBF, 1, 9, 0, 0), Insn(0x07, 1, 0, 0, 8), Insn(0x79, 0, 1, 0, 0)]


def _ins_ptr_arith(rng: random.Random) -> list[Insn]:
    return rng.choice([
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x27, 1, 0, 0, 2)],  # ptr *= 2
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x0F, 1, 9, 0, 0)],  # ptr += ptr
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x04, 1, 0, 0, 8)],  # 32-bit ptr arithmetic
        [Insn(0xB7, 0, 0, 0, 0), Insn(0x1F, 0, 10, 0, 0)],  # scalar -= ptr
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x17, 1, 0, 0, 8), Insn(0x7A, 1, 0, 0, 0)],  # fp -= 8
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x57, 1, 0, 0, -8)],  # ptr &= k
        [Insn(0xBF, 1, 9, 0, 0), Insn(0x07, 1, 0, 0, 1 << 29)],  # offset too large
    ])


def _ins_spill(rng: random.Random) -> list[Insn]:
    return rng.choice([
        [Insn(0x63, 10, 9, -8, 0)],  # 4-byte spill of the context pointer
        [Insn(0x7B, 10, 9, -8, 0), Insn(0x61, 0, 10, -8, 0)],  # 4-byte fill of a spilled pointer
        [Insn(0x7B, 10, 9, -16, 0), Insn(0x69, 0, 10, -16, 0)],
    ])


def _ins_helper_type(rng: random.Random) -> list[Insn]:
    return [Insn(0x85, 0, 0, 0, rng.choice([26, 9, 44, 31, 999, 212, 0]))]


def _ins_helper_args(rng: random.Random) -> list[Insn]:
    return rng.choice([
        [Insn(0xB7, 1, 0, 0, 0), Insn(0xB7, 2, 0, 0, 0), Insn(0x85, 0, 0, 0, 1)],  # lookup with a scalar map
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x07, 1, 0, 0, -8), Insn(0xB7, 2, 0, 0, 16), Insn(0x85, 0, 0, 0, 16)],
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x07, 1, 0, 0, -8), Insn(0xB7, 2, 0, 0, 0), Insn(0x85, 0, 0, 0, 16)],
        [Insn(0x85, 0, 0, 0, 7), Insn(0xBF, 2, 0, 0, 0), Insn(0xBF, 1, 10, 0, 0), Insn(0x07, 1, 0, 0, -8),
         Insn(0xB7, 3, 0, 0, 0), Insn(0x85, 0, 0, 0, 113)],  # probe_read_kernel of unknown size
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x07, 1, 0, 0, -520), Insn(0xB7, 2, 0, 0, 8), Insn(0xB7, 3, 0, 0, 0),
         Insn(0x85, 0, 0, 0, 113)],  # below the stack
        [Insn(0xBF, 1, 9, 0, 0), Insn(0xB7, 2, 0, 0, 8), Insn(0x85, 0, 0, 0, 16)],  # ctx as memory
        [Insn(0xB7, 1, 0, 0, 3), Insn(0xB7, 2, 0, 0, 0), Insn(0xB7, 3, 0, 0, 0), Insn(0xB7, 4, 0, 0, 0),
         Insn(0x85, 0, 0, 0, 181)],  # bpf_loop with a scalar callback
    ])


def _ins_infinite(rng: random.Random) -> list[Insn]:
    return rng.choice([[Insn(0x05, 0, 0, -1, 0)], [Insn(0xB7, 0, 0, 0, 0), Insn(0x05, 0, 0, -2, 0)],
                       [Insn(0xB7, 1, 0, 0, 0), Insn(0x07, 1, 0, 0, 0), Insn(0xA5, 1, 0, -2, 10)]])


def _ins_ld_abs(rng: random.Random) -> list[Insn]:
    return [Insn(0xBF, 6, 9, 0, 0), Insn(rng.choice([0x20, 0x28, 0x30]), 0, 0, 0, 0)]


def _ins_atomic(rng: random.Random) -> list[Insn]:
    return rng.choice([
        [Insn(0xDB, 9, 1, 0, 0x00)],  # atomic add into the context
        [Insn(0xDB, 1, 10, 0, 0x100)],  # load-acquire from the context
        [Insn(0xBF, 2, 9, 0, 0), Insn(0xDB, 2, 1, 8, 0x110)],  # store-release into the context
        [Insn(0xC3, 10, 1, -6, 0x00)],  # misaligned
        [Insn(0xDB, 10, 10, -8, 0xE1)],  # xchg into r10
    ])


def _ins_value_tracking(rng: random.Random) -> list[Insn]:
    """An uninitialized read behind a branch that the value of r6 decides:
    the kernel accepts only when its value tracking proves the branch always
    taken (add, and, shifts by constants) and rejects when it does not track
    the operation (division, modulo, shifts by a register past the width)."""
    a = rng.choice([7, 9, 100, -5, 0x7FFFFFFF, 1])
    b = rng.choice([7, 3, 1, 8, 32, 64, 65, -1])
    alu64 = rng.random() < 0.7
    cls = 0x07 if alu64 else 0x04
    op = rng.choice([0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x90, 0xA0, 0xC0, 0x80])
    sdiv = op in (0x30, 0x90) and rng.random() < 0.3
    use_reg = rng.random() < 0.5
    code: list[Insn] = [Insn(0x85, 0, 0, 0, 7), Insn(0xB7, 6, 0, 0, a)]
    if op == 0x80:
        code.append(Insn(cls | 0x80, 6, 0, 0, 0))
    elif use_reg:
        code += [Insn(0xB7, 7, 0, 0, b), Insn(cls | op | 0x08, 6, 7, 1 if sdiv else 0, 0)]
    else:
        code.append(Insn(cls | op, 6, 0, 1 if sdiv else 0, b))
    value = _eval(op, a, b, alu64, sdiv)
    if rng.random() < 0.3:  # a range, not a constant: x % 8 then x > 7
        code = [Insn(0x79, 6, 9, 8 * rng.randint(0, 12), 0), Insn(cls | op, 6, 0, 0, 8)]
        return [*code, Insn(0x25, 6, 0, 1, 7), Insn(0x85, 0, 0, 0, 7), Insn(0xBF, 0, 3, 0, 0)]
    if value is None:
        value = 0
    return [*code, Insn(0x18, 8, 0, 0, value & 0xFFFFFFFF), Insn(0, 0, 0, 0, value >> 32),
            Insn(0x1D, 6, 8, 1, 0), Insn(0xBF, 0, 3, 0, 0)]


def _eval(op: int, a: int, b: int, alu64: bool, signed: bool) -> int | None:
    """The result of ``a op b`` as the CPU computes it (None: a division by zero)."""
    bits = 64 if alu64 else 32
    mask = (1 << bits) - 1
    x, y = a & mask, b & mask
    sx = x - (1 << bits) if x >> (bits - 1) else x
    sy = y - (1 << bits) if y >> (bits - 1) else y
    if op == 0x00:
        r = x + y
    elif op == 0x10:
        r = x - y
    elif op == 0x20:
        r = x * y
    elif op == 0x30:
        if not y:
            r = 0
        elif signed:
            q = abs(sx) // abs(sy)
            r = q if (sx < 0) == (sy < 0) else -q
        else:
            r = x // y
    elif op == 0x90:
        if not y:
            r = x
        elif signed:
            m = abs(sx) % abs(sy)
            r = -m if sx < 0 else m
        else:
            r = x % y
    elif op == 0x40:
        r = x | y
    elif op == 0x50:
        r = x & y
    elif op == 0x60:
        r = x << (y & (bits - 1))
    elif op == 0x70:
        r = x >> (y & (bits - 1))
    elif op == 0xC0:
        r = sx >> (y & (bits - 1))
    elif op == 0xA0:
        r = x ^ y
    else:
        r = -x
    return r & mask


def _ins_benign(rng: random.Random) -> list[Insn]:
    """Things only an unprivileged loader may not do (the kernel accepts them here)."""
    return rng.choice([
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x87, 1, 0, 0, 0)],  # negate a pointer
        [Insn(0xBF, 1, 9, 0, 0), Insn(0xD7, 1, 0, 0, 64)],  # byte-swap a pointer
        [Insn(0xBF, 1, 10, 32, 0)],  # sign-extend a pointer
        [Insn(0xBC, 1, 10, 0, 0)],  # 32-bit copy of a pointer
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x1F, 1, 10, 0, 0)],  # pointer - pointer
        [Insn(0x7B, 9, 10, 128, 0)],  # a pointer into the context
        [Insn(0x1D, 9, 10, 0, 0)],  # compare pointers
        [Insn(0x79, 0, 10, -256, 0)],  # read never-written stack
    ])


_INSERTED: dict[str, Callable[[random.Random], list[Insn]]] = {
    "bad_map_fd": _ins_bad_map_fd, "kfunc_id": _ins_kfunc_id, "unknown_opcode": _ins_unknown_opcode,
    "ldx_reserved": _ins_ldx_reserved, "lddw_src": _ins_lddw_src, "reserved_field": _ins_reserved,
    "bad_register": _ins_bad_register, "div_zero": _ins_div_zero, "shift_range": _ins_shift,
    "uninit_reg": _ins_uninit, "stack_oob": _ins_stack_oob, "stack_misaligned": _ins_stack_misaligned,
    "stack_var_offset": _ins_stack_var, "write_fp": _ins_write_fp, "ctx_access": _ins_ctx,
    "modified_ctx": _ins_modified_ctx, "ptr_arith": _ins_ptr_arith, "spill_size": _ins_spill,
    "helper_type": _ins_helper_type, "helper_args": _ins_helper_args, "infinite_loop": _ins_infinite,
    "ld_abs": _ins_ld_abs, "atomic": _ins_atomic, "benign": _ins_benign, "value_tracking": _ins_value_tracking,
}


# ---------------------------------------------------------------------------- defects as rewrites


def _rw_jump_out(case: ProgramCase, rng: random.Random) -> ProgramCase:
    n = sum(i.size for i in case.insns)
    return _insert(case, rng, [Insn(0x05, 0, 0, rng.choice([n + 5, -n - 5, 30000]), 0)], False, "jump_range")


def _rw_unreachable(case: ProgramCase, rng: random.Random) -> ProgramCase:
    return _insert(case, rng, [Insn(0x05, 0, 0, 1, 0), Insn(0xB7, 0, 0, 0, 0)], False, "unreachable")


def _rw_into_lddw(case: ProgramCase, rng: random.Random) -> ProgramCase:
    return _insert(case, rng, [Insn(0x05, 0, 0, 1, 0), Insn(0x18, 0, 0, 0, 1)], False, "jump_into_lddw")


def _rw_no_exit(case: ProgramCase, rng: random.Random) -> ProgramCase:
    last = _main_positions(case)
    insns = list(case.insns)
    insns[last] = Insn(0xB7, 0, 0, 0, 0)
    return replace(case, insns=insns, defect="no_exit")


def _rw_call_target(case: ProgramCase, rng: random.Random) -> ProgramCase:
    n = sum(i.size for i in case.insns)
    return _insert(case, rng, [Insn(0x85, 0, 1, 0, rng.choice([n + 3, -n - 3]))], False, "call_target")


def _rw_r0_exit(case: ProgramCase, rng: random.Random) -> ProgramCase:
    last = _main_positions(case)
    return _insert(case, rng, [Insn(0x85, 0, 0, 0, 7), Insn(0xBF, 0, 3, 0, 0)], False, "r0_exit", at=last)


def _rw_deep_calls(case: ProgramCase, rng: random.Random) -> ProgramCase:
    """A subprogram that calls itself (the kernel runs out of frames)."""
    insns = list(case.insns)
    n = sum(i.size for i in insns)
    extra = [Insn(0xB7, 0, 0, 0, 0), Insn(0x85, 0, 1, 0, -2), Insn(0x95)]
    insns = relocate_insert(insns, 1, [Insn(0x85, 0, 1, 0, 0)])  # patched below
    n = sum(i.size for i in insns)
    slots = slot_offsets(insns)
    insns[1] = Insn(0x85, 0, 1, 0, n - slots[1] - 1)
    insns += extra
    return replace(case, insns=insns, funcs=None if case.funcs is None else _refuncs(insns), defect="call_depth")


def _rw_big_stack(case: ProgramCase, rng: random.Random) -> ProgramCase:
    insns = list(case.insns)
    n = sum(i.size for i in insns)
    insns = relocate_insert(insns, 1, [Insn(0x85, 0, 1, 0, 0)])
    n = sum(i.size for i in insns)
    slots = slot_offsets(insns)
    insns[1] = Insn(0x85, 0, 1, 0, n - slots[1] - 1)
    insns += [Insn(0x7A, 10, 0, -rng.choice([464, 480, 512]), 0), Insn(0xB7, 0, 0, 0, 0), Insn(0x95)]
    return replace(case, insns=insns, funcs=None if case.funcs is None else _refuncs(insns), defect="stack_size")


def _rw_return_fp(case: ProgramCase, rng: random.Random) -> ProgramCase:
    insns = relocate_insert(list(case.insns), 1, [Insn(0x85, 0, 1, 0, 0), Insn(0xB7, 0, 0, 0, 0)])
    n = sum(i.size for i in insns)
    slots = slot_offsets(insns)
    insns[1] = Insn(0x85, 0, 1, 0, n - slots[1] - 1)
    insns += [Insn(0xBF, 0, 10, 0, 0), Insn(0x07, 0, 0, 0, -8), Insn(0x95)]
    return replace(case, insns=insns, funcs=None if case.funcs is None else _refuncs(insns), defect="return_fp")


def _refuncs(insns: list[Insn]) -> list[tuple[int, int]]:
    from .progen_cases import _funcs

    return _funcs(insns)


def _rw_not_sleepable(case: ProgramCase, rng: random.Random) -> ProgramCase:
    return replace(case, sleepable=False, defect="not_sleepable")


def _rw_no_func_info(case: ProgramCase, rng: random.Random) -> ProgramCase:
    if case.funcs is None:
        return _rw_not_sleepable(case, rng)
    return replace(case, funcs=None, defect="no_func_info")


def _rw_callback_ret(case: ProgramCase, rng: random.Random) -> ProgramCase:
    """A callback that returns 2 (only callback cases have one)."""
    if case.kind != "callbacks":
        return _rw_r0_exit(case, rng)
    insns = list(case.insns)
    last = len(insns) - 1  # the last callback's exit
    insns = relocate_insert(insns, last, [Insn(0xB7, 0, 0, 0, rng.choice([2, -1, 100]))])
    return replace(case, insns=insns, defect="callback_ret")


def _rw_dead_callback(case: ProgramCase, rng: random.Random) -> ProgramCase:
    """The last ``bpf_loop`` runs no iteration, so its callback (the last
    subprogram) is never explored: the kernel removes it and then fails to
    split the program for the JIT (``EFAULT``) when another subprogram is left."""
    if case.kind != "callbacks":
        return _rw_r0_exit(case, rng)
    insns = list(case.insns)
    calls = [i for i, x in enumerate(insns) if x.opcode == 0x85 and x.src == 0 and x.imm == 181]
    k = calls[-1]
    while insns[k].opcode != 0xB7 or insns[k].dst != 1:  # r1 = iterations, before the call
        k -= 1
    insns[k] = Insn(0xB7, 1, 0, 0, 0)
    return replace(case, insns=insns, defect="dead_callback")


def _rw_ringbuf(case: ProgramCase, rng: random.Random) -> ProgramCase:
    """Reserve a ringbuf record and never submit it."""
    idx = len(case.maps)
    maps = [*case.maps, (int(MapType.RINGBUF), 0, 0, 4096, 0)]
    new = [Insn(0x18, 1, 1, 0, idx), Insn(0xB7, 2, 0, 0, 8), Insn(0xB7, 3, 0, 0, 0), Insn(0x85, 0, 0, 0, 131)]
    c = _insert(replace(case, maps=maps), rng, new, False, "ringbuf_leak")
    return c


def _rw_map_value(case: ProgramCase, rng: random.Random) -> ProgramCase:
    """A map value read without a null check, past its end, or through unchecked arithmetic."""
    idx = len(case.maps)
    vs = rng.choice([4, 8, 16])
    maps = [*case.maps, (int(rng.choice([MapType.HASH, MapType.ARRAY])), 4, vs, 4, 0)]
    look = [Insn(0x62, 10, 0, -4, 0), Insn(0x18, 1, 1, 0, idx), Insn(0xBF, 2, 10, 0, 0), Insn(0x07, 2, 0, 0, -4),
            Insn(0x85, 0, 0, 0, 1)]
    tail = rng.choice([
        [Insn(0x79, 0, 0, 0, 0)],  # no null check
        [Insn(0x15, 0, 0, 1, 0), Insn(0x61, 1, 0, vs, 0)],  # past the end
        [Insn(0x07, 0, 0, 0, 4), Insn(0x15, 0, 0, 1, 0), Insn(0x61, 1, 0, 0, 0)],  # arithmetic before the check
        [Insn(0x15, 0, 0, 3, 0), Insn(0x85, 0, 0, 0, 7), Insn(0x0F, 0, 0, 0, 0), Insn(0x71, 1, 0, 0, 0)],
    ])
    return _insert(replace(case, maps=maps), rng, look + tail, False, "map_value")


def _rw_license(case: ProgramCase, rng: random.Random) -> ProgramCase:
    """A GPL-only helper (``bpf_probe_read_kernel``, ``bpf_trace_printk``…) or a kfunc in a non-GPL program."""
    new = rng.choice([
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x07, 1, 0, 0, -8), Insn(0xB7, 2, 0, 0, 8), Insn(0xB7, 3, 0, 0, 0),
         Insn(0x85, 0, 0, 0, 113)],
        [Insn(0xBF, 1, 10, 0, 0), Insn(0x07, 1, 0, 0, -8), Insn(0xB7, 2, 0, 0, 8), Insn(0x85, 0, 0, 0, 6)],
        [Insn(0x85, 0, 0, 0, 14)],  # get_current_pid_tgid: allowed to any license
    ])
    return replace(_insert(case, rng, new, False, "license"), license=rng.choice(["Dual BSD/MIT", "Proprietary"]))


def _map_lookup(idx: int, key_off: int = -4) -> list[Insn]:
    return [Insn(0x18, 1, 1, 0, idx), Insn(0xBF, 2, 10, 0, 0), Insn(0x07, 2, 0, 0, key_off), Insn(0x85, 0, 0, 0, 1)]


def _rw_helper_maps(case: ProgramCase, rng: random.Random) -> ProgramCase:
    """Map helpers used wrongly: a map type the helper does not take, a key
    or value on the stack too small or never written."""
    idx = len(case.maps)
    choice = rng.randrange(5)
    if choice == 0:  # ringbuf output into an array
        maps = [*case.maps, (int(MapType.ARRAY), 4, 8, 4, 0)]
        new = [Insn(0x18, 1, 1, 0, idx), Insn(0xBF, 2, 10, 0, 0), Insn(0x07, 2, 0, 0, -8), Insn(0xB7, 3, 0, 0, 8),
               Insn(0xB7, 4, 0, 0, 0), Insn(0x85, 0, 0, 0, 130)]
    elif choice == 1:  # an 8-byte key that pokes above the frame
        maps = [*case.maps, (int(MapType.HASH), 8, 8, 4, 0)]
        new = _map_lookup(idx, -rng.choice([2, 4]))
    elif choice == 2:  # an update from a value never written
        maps = [*case.maps, (int(MapType.HASH), 4, 8, 4, 0)]
        new = [Insn(0x62, 10, 0, -4, 1), Insn(0x18, 1, 1, 0, idx), Insn(0xBF, 2, 10, 0, 0), Insn(0x07, 2, 0, 0, -4),
               Insn(0xBF, 3, 10, 0, 0), Insn(0x07, 3, 0, 0, -200), Insn(0xB7, 4, 0, 0, 0), Insn(0x85, 0, 0, 0, 2)]
    elif choice == 3:  # a write into a read-only (BPF_F_RDONLY_PROG) array value
        maps = [*case.maps, (int(MapType.ARRAY), 4, 8, 4, 0x80)]
        new = [Insn(0x62, 10, 0, -4, 0), *_map_lookup(idx), Insn(0x15, 0, 0, 1, 0), Insn(0x7A, 0, 0, 0, 1)]
    else:  # a second submit of the same ringbuf record
        maps = [*case.maps, (int(MapType.RINGBUF), 0, 0, 4096, 0)]
        new = [Insn(0x18, 1, 1, 0, idx), Insn(0xB7, 2, 0, 0, 8), Insn(0xB7, 3, 0, 0, 0), Insn(0x85, 0, 0, 0, 131),
               Insn(0x15, 0, 0, 6, 0), Insn(0xBF, 6, 0, 0, 0), Insn(0xBF, 1, 0, 0, 0), Insn(0xB7, 2, 0, 0, 0),
               Insn(0x85, 0, 0, 0, 132), Insn(0xBF, 1, 6, 0, 0), Insn(0xB7, 2, 0, 0, 0), Insn(0x85, 0, 0, 0, 132)]
    return _insert(replace(case, maps=maps), rng, new, rng.random() < 0.2, "helper_maps")


_REWRITES: dict[str, Callable[[ProgramCase, random.Random], ProgramCase]] = {
    "jump_range": _rw_jump_out, "unreachable": _rw_unreachable, "jump_into_lddw": _rw_into_lddw,
    "no_exit": _rw_no_exit, "call_target": _rw_call_target, "r0_exit": _rw_r0_exit, "call_depth": _rw_deep_calls,
    "stack_size": _rw_big_stack, "return_fp": _rw_return_fp, "not_sleepable": _rw_not_sleepable,
    "no_func_info": _rw_no_func_info, "callback_ret": _rw_callback_ret, "dead_callback": _rw_dead_callback,
    "ringbuf_leak": _rw_ringbuf, "license": _rw_license, "helper_maps": _rw_helper_maps,
    "map_value": _rw_map_value,
}
#: The defect kinds.
DEFECTS = tuple(_INSERTED) + tuple(_REWRITES)


def invalid_case(base: ProgramCase, seed: int, defect: str | None = None) -> ProgramCase:
    """``base`` with one defect (default: the one ``seed`` selects) spliced in.

    :raises KeyError: an unknown defect.
    """
    rng = random.Random(seed)
    defect = defect or DEFECTS[seed % len(DEFECTS)]
    if defect in _REWRITES:
        c = _REWRITES[defect](base, rng)
    else:
        c = _insert(base, rng, _INSERTED[defect](rng), rng.random() < 0.2, defect)
    return replace(c, seed=seed)
