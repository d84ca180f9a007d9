"""Random verifier-valid programs of every instruction class, for differential runs.

Each generated :class:`ProgramCase` is a ``BPF_PROG_TYPE_SYSCALL`` program
(sleepable, so the kernel can test-run it) with the context layout of
:mod:`bpfmux.emu.vm.progen`: it ends by storing r0-r8 and its 64 stack
bytes into the context, so that comparing the context after a run compares
every register and all memory.

Kinds (:data:`KINDS`):

``base``        :func:`~bpfmux.emu.vm.progen.random_program`: ALU, JMP/JMP32,
                stack and context memory, atomics, bounded loops, calls;
``alu``         dense ALU of every form (32/64 bit, register/immediate, sdiv,
                smod, movsx, byte swaps, neg) with JMP32 branches;
``jmp``         nested branches of every condition on 32 and 64 bits,
                copies and spills of the compared registers;
``may_goto``    loops kept in check by ``may_goto`` and a counter;
``acqrel``      load-acquire and store-release of every size;
``straight``    long straight-line code (hundreds to thousands of instructions);
``calls``       chains of bpf-to-bpf calls up to the kernel's 8 frames;
``callbacks``   ``bpf_loop`` with callbacks (function pointers need BTF
                function information: :attr:`ProgramCase.funcs`);
``atomics``     every atomic operation on the stack and on map values;
``maps``        :func:`~bpfmux.emu.vm.progen.random_map_program`.

``lddw`` map references carry the index of the map in
:attr:`ProgramCase.maps`; :meth:`ProgramCase.with_fds` substitutes real fds.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ...isa.insn import Insn
from ...uapi import MapType
from .progen import CTX_SIZE, DATA_SIZE, REGS_OFF, STACK_BYTES, STACK_OFF, _Gen, random_map_program, random_program

__all__ = ["KINDS", "ProgramCase", "Asm", "relocate_insert", "valid_case"]

CTX_REG = 9
_DATA = [0, 1, 2, 3, 4, 5, 6, 7, 8]
_ALU_OPS = [0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0]
_JMP_OPS = [0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0xA0, 0xB0, 0xC0, 0xD0]
_SIZES = {1: 0x10, 2: 0x08, 4: 0x00, 8: 0x18}


@dataclass
class ProgramCase:
    """One generated program and how to load and run it.

    :ivar kind: the generator that made it (see :data:`KINDS`).
    :ivar insns: the instructions (map references by index, see the module docstring).
    :ivar ctx: the context to run it with.
    :ivar maps: ``(type, key size, value size, max entries, flags)`` per map.
    :ivar funcs: BTF function information, ``(slot, linkage)`` per subprogram
        (``linkage`` 0 static, 1 global), or ``None`` for none.
    :ivar sleepable: loaded with ``BPF_F_SLEEPABLE``.
    :ivar license: the license string.
    :ivar seed: the seed it was made from.
    :ivar defect: for invalid cases, the defect spliced in (``""`` for valid ones).
    :ivar dead: the defect sits behind a branch that is never taken.
    """

    kind: str
    insns: list[Insn]
    ctx: bytes
    maps: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    funcs: list[tuple[int, int]] | None = None
    sleepable: bool = True
    license: str = "GPL"
    seed: int = 0
    defect: str = ""
    dead: bool = False

    def with_fds(self, fds: list[int]) -> list[Insn]:
        """The instructions with map index ``i`` replaced by ``fds[i]`` (other values kept)."""
        out = []
        for i in self.insns:
            if i.opcode == 0x18 and i.src in (1, 2) and (i.imm & 0xFFFFFFFF) < len(fds):
                i = Insn(i.opcode, i.dst, i.src, i.off, (i.imm & ~0xFFFFFFFF) | fds[i.imm & 0xFFFFFFFF])
            out.append(i)
        return out


# ---------------------------------------------------------------------------- assembling with labels


class Asm:
    """Instructions with symbolic jump and call targets, resolved by :meth:`build`."""

    def __init__(self) -> None:
        self.items: list[tuple[Insn, str | None, str]] = []  # insn, label to resolve, field
        self.labels: dict[str, int] = {}

    def emit(self, *insns: Insn) -> None:
        for i in insns:
            self.items.append((i, None, ""))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.items)

    def jump(self, insn: Insn, target: str) -> None:
        """A jump (``off``), ``ja32``/call (``imm``) or ``lddw`` function load (``imm``) to ``target``."""
        fld = "imm" if insn.opcode in (0x85, 0x06, 0x18) else "off"
        self.items.append((insn, target, fld))

    def build(self) -> list[Insn]:
        slots = []
        pos = 0
        for i, _, _ in self.items:
            slots.append(pos)
            pos += i.size
        end = pos
        out = []
        for k, (insn, target, fld) in enumerate(self.items):
            if target is not None:
                t = self.labels[target]
                tslot = slots[t] if t < len(slots) else end
                rel = tslot - slots[k] - 1
                insn = insn.replace(**{fld: rel})
            out.append(insn)
        return out


def relocate_insert(insns: list[Insn], pos: int, new: list[Insn]) -> list[Insn]:
    """``insns`` with ``new`` inserted before index ``pos``; jumps, calls and
    function loads that cross the insertion point are adjusted (a jump to
    ``pos`` itself lands on the first inserted instruction)."""
    from ...isa.insn import slot_offsets

    slots = slot_offsets(insns)
    at = slots[pos] if pos < len(insns) else slots[-1] + insns[-1].size
    grow = sum(i.size for i in new)
    out: list[Insn] = []
    for k, insn in enumerate(insns):
        s = slots[k]
        op = insn.opcode
        cls = op & 7
        field_, rel = None, 0
        if op == 0x18 and insn.src == 4:
            field_, rel = "imm", _s32(insn.imm)
        elif cls in (5, 6) and op & 0xF0 not in (0x80, 0x90):
            field_, rel = ("imm", _s32(insn.imm)) if op == 0x06 else ("off", insn.off)
        elif op == 0x85 and insn.src == 1:
            field_, rel = "imm", _s32(insn.imm)
        if field_ is not None:
            t = s + 1 + rel
            src_after = s >= at
            dst_after = t > at if not src_after else t >= at
            if src_after and not dst_after:
                rel -= grow
            elif not src_after and dst_after:
                rel += grow
            insn = insn.replace(**{field_: rel})
        if k == pos:
            out.extend(new)
        out.append(insn)
    if pos >= len(insns):
        out.extend(new)
    return out


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


# ---------------------------------------------------------------------------- common pieces


def _imm(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.35:
        return rng.randint(-16, 16)
    if r < 0.55:
        return rng.choice([0, 1, -1, 0x7FFFFFFF, -0x80000000, 0xFF, 0xFFFF, 31, 32, 63, 64, 7, 8, 255, 256])
    return rng.randint(-(1 << 31), (1 << 31) - 1)


def _prologue(rng: random.Random, a: Asm) -> None:
    a.emit(Insn(0xBF, CTX_REG, 1, 0, 0))
    for off in range(8, STACK_BYTES + 1, 8):
        a.emit(Insn(0x7A, 10, 0, -off, 0))
    for r in _DATA:
        if rng.random() < 0.6:
            a.emit(Insn(0x79, r, CTX_REG, rng.randrange(0, DATA_SIZE - 7, 8), 0))
        elif rng.random() < 0.3:
            a.emit(Insn(0x18, r, 0, 0, rng.getrandbits(64)))
        else:
            a.emit(Insn(rng.choice([0xB7, 0xB4]), r, 0, 0, _imm(rng)))


def _epilogue(a: Asm) -> None:
    a.emit(*[Insn(0x7B, CTX_REG, r, REGS_OFF + 8 * r, 0) for r in _DATA])
    for i in range(STACK_BYTES // 8):
        a.emit(Insn(0x79, 1, 10, -STACK_BYTES + 8 * i, 0), Insn(0x7B, CTX_REG, 1, STACK_OFF + 8 * i, 0))
    a.emit(Insn(0x95))


def _ctx(rng: random.Random) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(DATA_SIZE)) + bytes(CTX_SIZE - DATA_SIZE)


def _alu(rng: random.Random, dst: int, srcs: list[int]) -> Insn:
    """One ALU instruction of any form on ``dst`` (divisions by a register may divide by zero: BPF defines it)."""
    wide = rng.random() < 0.55
    cls = 0x07 if wide else 0x04
    r = rng.random()
    if r < 0.06:
        w = rng.choice([16, 32, 64])
        return Insn(0xD7, dst, 0, 0, w) if wide else Insn(0xD4 | rng.choice([0, 0x08]), dst, 0, 0, w)
    if r < 0.12:
        bits = rng.choice([8, 16, 32] if wide else [8, 16])
        return Insn(cls | 0xB8, dst, rng.choice(srcs), bits, 0)
    if r < 0.16:
        return Insn(cls | 0x80, dst, 0, 0, 0)
    if r < 0.24:
        op = rng.choice([0x30, 0x90])
        if rng.random() < 0.5:
            return Insn(cls | op | 0x08, dst, rng.choice(srcs), rng.choice([0, 1]), 0)
        return Insn(cls | op, dst, 0, rng.choice([0, 1]), _imm(rng) or 5)
    op = rng.choice([0x00, 0x10, 0x20, 0x40, 0x50, 0x60, 0x70, 0xA0, 0xB0, 0xC0])
    if rng.random() < 0.45:
        return Insn(cls | op | 0x08, dst, rng.choice(srcs), 0, 0)
    imm = _imm(rng)
    if op in (0x60, 0x70, 0xC0):
        imm = rng.randrange(64 if wide else 32)
    return Insn(cls | op, dst, 0, 0, imm)


def _cond(rng: random.Random, regs: list[int]) -> Insn:
    op = rng.choice(_JMP_OPS)
    cls = rng.choice([0x05, 0x06])
    if rng.random() < 0.5:
        return Insn(cls | op | 0x08, rng.choice(regs), rng.choice(regs), 0, 0)
    return Insn(cls | op, rng.choice(regs), 0, 0, _imm(rng))


def _stack_mem(rng: random.Random, dst: int, src: int) -> list[Insn]:
    size = rng.choice([1, 2, 4, 8])
    sz = _SIZES[size]
    off = -rng.randrange(size, STACK_BYTES + 1, size)
    r = rng.random()
    if r < 0.4:
        return [Insn((0x81 if size != 8 and rng.random() < 0.3 else 0x61) | sz, dst, 10, off, 0)]
    if r < 0.8:
        return [Insn(0x63 | sz, 10, src, off, 0)]
    return [Insn(0x62 | sz, 10, 0, off, _imm(rng))]


# ---------------------------------------------------------------------------- kinds


def _kind_base(rng: random.Random, seed: int) -> ProgramCase:
    g = random_program(rng, rng.randint(10, 60))
    return ProgramCase("base", g.insns, g.ctx, seed=seed)


def _kind_alu(rng: random.Random, seed: int) -> ProgramCase:
    a = Asm()
    _prologue(rng, a)
    n = rng.randint(10, 80)
    label = 0
    for _ in range(n):
        r = rng.random()
        if r < 0.75:
            a.emit(_alu(rng, rng.choice(_DATA), _DATA))
        elif r < 0.85:
            a.emit(*_stack_mem(rng, rng.choice(_DATA), rng.choice(_DATA)))
        else:
            label += 1
            name = f"s{label}"
            a.jump(_cond(rng, _DATA), name)
            for _ in range(rng.randint(1, 4)):
                a.emit(_alu(rng, rng.choice(_DATA), _DATA))
            a.label(name)
    _epilogue(a)
    return ProgramCase("alu", a.build(), _ctx(rng), seed=seed)


#: conditional jumps in one ``jmp`` program: paths double with each one the
#: verifiers cannot prune (beyond about ten the kernel itself takes seconds)
_MAX_BRANCHES = 10


def _kind_jmp(rng: random.Random, seed: int) -> ProgramCase:
    a = Asm()
    _prologue(rng, a)
    counter = [0]

    def block(depth: int, n: int) -> None:
        for _ in range(n):
            r = rng.random()
            if r < 0.35 or depth >= 3 or counter[0] >= _MAX_BRANCHES:
                a.emit(_alu(rng, rng.choice(_DATA), _DATA))
            elif r < 0.5:
                d, s = rng.choice(_DATA), rng.choice(_DATA)
                a.emit(Insn(rng.choice([0xBF, 0xBC]), d, s, 0, 0))  # copies link registers
            elif r < 0.6:
                a.emit(*_stack_mem(rng, rng.choice(_DATA), rng.choice(_DATA)))
            else:
                counter[0] += 1
                k = counter[0]
                a.jump(_cond(rng, _DATA), f"else{k}")
                block(depth + 1, rng.randint(1, 4))
                if rng.random() < 0.5:
                    a.jump(Insn(rng.choice([0x05, 0x06])), f"end{k}")
                    a.label(f"else{k}")
                    block(depth + 1, rng.randint(1, 3))
                    a.label(f"end{k}")
                else:
                    a.label(f"else{k}")

    block(0, rng.randint(5, 20))
    _epilogue(a)
    return ProgramCase("jmp", a.build(), _ctx(rng), seed=seed)


def _kind_may_goto(rng: random.Random, seed: int) -> ProgramCase:
    a = Asm()
    _prologue(rng, a)
    for k in range(rng.randint(1, 2)):
        bound = rng.randint(1, 6)
        a.emit(Insn(0xB7, 8, 0, 0, 0))
        a.label(f"loop{k}")
        a.jump(Insn(0xE5), f"out{k}")
        regs = [r for r in _DATA if r != 8]
        for _ in range(rng.randint(1, 8)):
            if rng.random() < 0.7:
                a.emit(_alu(rng, rng.choice(regs), regs))
            else:
                a.emit(*_stack_mem(rng, rng.choice(regs), rng.choice(regs)))
        a.emit(Insn(0x07, 8, 0, 0, 1))
        a.jump(Insn(rng.choice([0xA5, 0xA6, 0xB5]), 8, 0, 0, bound), f"loop{k}")
        a.label(f"out{k}")
    _epilogue(a)
    return ProgramCase("may_goto", a.build(), _ctx(rng), seed=seed)


def _kind_acqrel(rng: random.Random, seed: int) -> ProgramCase:
    a = Asm()
    _prologue(rng, a)
    for _ in range(rng.randint(4, 30)):
        size = rng.choice([1, 2, 4, 8])
        off = -rng.randrange(size, STACK_BYTES + 1, size)
        r = rng.random()
        d, s = rng.choice(_DATA), rng.choice(_DATA)
        if r < 0.35:
            a.emit(Insn(0xC3 | _SIZES[size], d, 10, off, 0x100))  # load-acquire
        elif r < 0.7:
            a.emit(Insn(0xC3 | _SIZES[size], 10, s, off, 0x110))  # store-release
        else:
            a.emit(_alu(rng, d, _DATA))
    _epilogue(a)
    return ProgramCase("acqrel", a.build(), _ctx(rng), seed=seed)


def _kind_straight(rng: random.Random, seed: int) -> ProgramCase:
    a = Asm()
    _prologue(rng, a)
    n = rng.choice([200, 500, 1000, rng.randint(100, 3000)])
    if rng.random() < 0.3:  # one register through a long chain
        r = rng.choice(_DATA)
        for _ in range(n):
            a.emit(Insn(0x07, r, 0, 0, rng.randint(-3, 3) or 1))
    else:
        for _ in range(n):
            if rng.random() < 0.8:
                a.emit(_alu(rng, rng.choice(_DATA), _DATA))
            else:
                a.emit(*_stack_mem(rng, rng.choice(_DATA), rng.choice(_DATA)))
    _epilogue(a)
    return ProgramCase("straight", a.build(), _ctx(rng), seed=seed)


def _kind_calls(rng: random.Random, seed: int) -> ProgramCase:
    depth = rng.randint(1, 7)
    a = Asm()
    _prologue(rng, a)
    for r in (1, 2, 3, 4, 5):
        a.emit(Insn(0xBF, r, rng.choice(_DATA), 0, 0))
    a.jump(Insn(0x85, 0, 1, 0, 0), "f1")
    a.emit(Insn(0xBF, 8, 0, 0, 0))
    for r in (1, 2, 3, 4, 5):
        a.emit(Insn(0xB7, r, 0, 0, _imm(rng)))
    _epilogue(a)
    for k in range(1, depth + 1):
        a.label(f"f{k}")
        used = rng.choice([8, 16, 32, 48])
        for off in range(8, used + 1, 8):
            a.emit(Insn(0x7A, 10, 0, -off, 0))
        a.emit(Insn(0xB7, 0, 0, 0, rng.randint(0, 9)))
        args = [1, 2, 3, 4, 5]
        for _ in range(rng.randint(1, 6)):
            roll = rng.random()
            if roll < 0.6:
                a.emit(_alu(rng, rng.choice([0, 1, 2, 3, 4, 5]), args))
            elif roll < 0.8:
                a.emit(Insn(0x7B, 10, rng.choice(args), -8 * rng.randint(1, used // 8), 0))
            else:
                a.emit(Insn(0x79, rng.choice([0, 1, 2]), 10, -8 * rng.randint(1, used // 8), 0))
        if k < depth:
            a.emit(Insn(0x7B, 10, 0, -8, 0))  # keep r0 over the call
            a.jump(Insn(0x85, 0, 1, 0, 0), f"f{k + 1}")
            a.emit(Insn(0x79, 1, 10, -8, 0), Insn(0x0F, 0, 1, 0, 0))
        a.emit(Insn(0x95))
    return ProgramCase("calls", a.build(), _ctx(rng), seed=seed)


def _kind_callbacks(rng: random.Random, seed: int) -> ProgramCase:
    a = Asm()
    _prologue(rng, a)
    nloops = rng.randint(1, 2)
    for k in range(nloops):
        a.emit(Insn(0x7A, 10, 0, -8, rng.randint(0, 5)))  # the callback's context: a counter at fp-8
        # iterations; none leaves the callback unexplored, and the kernel fails (EFAULT) when that
        # callback is the last subprogram and another is left: only the first loop may do none
        a.emit(Insn(0xB7, 1, 0, 0, rng.randint(0 if k + 1 < nloops else 1, 6)))
        a.jump(Insn(0x18, 2, 4, 0, 0), f"cb{k}")
        a.emit(Insn(0xBF, 3, 10, 0, 0), Insn(0x07, 3, 0, 0, -8), Insn(0xB7, 4, 0, 0, 0))
        a.emit(Insn(0x85, 0, 0, 0, 181))  # bpf_loop: r0 = iterations done
        a.emit(Insn(0xBF, 7 + k, 0, 0, 0), Insn(0x79, 6, 10, -8, 0))
    for r in (1, 2, 3, 4, 5):
        a.emit(Insn(0xB7, r, 0, 0, _imm(rng)))
    _epilogue(a)
    for k in range(nloops):
        a.label(f"cb{k}")
        # r1 = index, r2 = &counter
        a.emit(Insn(0x79, 3, 2, 0, 0))
        for _ in range(rng.randint(0, 4)):
            a.emit(_alu(rng, 3, [1, 3]))
        a.emit(Insn(0x7B, 2, 3, 0, 0))
        if rng.random() < 0.5:
            a.emit(Insn(0xB7, 0, 0, 0, rng.randint(0, 1)))
        else:
            a.emit(Insn(0xBF, 0, 1, 0, 0), Insn(0x57, 0, 0, 0, 1))  # stop on odd indexes
        a.emit(Insn(0x95))
    insns = a.build()
    funcs = _funcs(insns)
    return ProgramCase("callbacks", insns, _ctx(rng), funcs=funcs, seed=seed)


def _funcs(insns: list[Insn]) -> list[tuple[int, int]]:
    """BTF function information for every subprogram: (slot, static linkage); main is global."""
    from ...isa.analysis import subprogram_entries

    starts = sorted({0, *subprogram_entries(insns)})
    from ...isa.insn import slot_offsets

    slots = slot_offsets(insns)
    return [(slots[i] if i < len(slots) else i, 1 if n == 0 else 0) for n, i in enumerate(starts)]


def _kind_atomics(rng: random.Random, seed: int) -> ProgramCase:
    a = Asm()
    _prologue(rng, a)
    use_map = rng.random() < 0.5
    maps: list[tuple[int, int, int, int, int]] = []
    if use_map:
        maps.append((int(MapType.ARRAY), 4, 64, 1, 0))
        a.emit(Insn(0x62, 10, 0, -4, 0), Insn(0x18, 1, 1, 0, 0), Insn(0xBF, 2, 10, 0, 0), Insn(0x07, 2, 0, 0, -4),
               Insn(0x85, 0, 0, 0, 1))
        a.jump(Insn(0x15, 0, 0, 0, 0), "done")
        a.emit(Insn(0xBF, 6, 0, 0, 0))
        for r in (0, 1, 2, 3, 4, 5):  # no register may hold the value's address
            a.emit(Insn(0xB7, r, 0, 0, _imm(rng)))
    regs = [r for r in _DATA if r != 6] if use_map else _DATA
    ops = [0x00, 0x01, 0x40, 0x41, 0x50, 0x51, 0xA0, 0xA1, 0xE1, 0xF1]
    for _ in range(rng.randint(3, 25)):
        if rng.random() < 0.3:
            a.emit(_alu(rng, rng.choice(regs), regs))
            continue
        size = rng.choice([4, 8])
        op = rng.choice(ops)
        src = rng.choice(regs)
        if use_map and rng.random() < 0.6:
            base, off = 6, rng.randrange(0, 64 - size + 1, size)
        else:
            base, off = 10, -rng.randrange(size, STACK_BYTES + 1, size)
        a.emit(Insn(0xC3 | _SIZES[size], base, src, off, op))
    if use_map:
        a.label("done")
        for r in (0, 1, 2, 3, 4, 5, 6):
            a.emit(Insn(0xB7, r, 0, 0, r))
    _epilogue(a)
    return ProgramCase("atomics", a.build(), _ctx(rng), maps=maps, seed=seed)


def _kind_maps(rng: random.Random, seed: int) -> ProgramCase:
    g = random_map_program(rng, rng.randint(2, 16))
    return ProgramCase("maps", g.insns, g.ctx, maps=[(t, k, v, n, 0) for t, k, v, n in g.maps], seed=seed)


_MAKERS: dict[str, Callable[[random.Random, int], ProgramCase]] = {
    "base": _kind_base, "alu": _kind_alu, "jmp": _kind_jmp, "may_goto": _kind_may_goto, "acqrel": _kind_acqrel,
    "straight": _kind_straight, "calls": _kind_calls, "callbacks": _kind_callbacks, "atomics": _kind_atomics,
    "maps": _kind_maps,
}
#: The kinds of valid programs, in the order :func:`valid_case` cycles through them.
KINDS = tuple(_MAKERS)


def valid_case(seed: int, kind: str | None = None) -> ProgramCase:
    """A valid program of ``kind`` (default: the kind ``seed`` selects) made from ``seed``.

    :raises KeyError: an unknown kind.
    """
    rng = random.Random(seed)
    kind = kind or KINDS[seed % len(KINDS)]
    return _MAKERS[kind](rng, seed)


_ = _Gen
