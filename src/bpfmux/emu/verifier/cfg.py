"""Load-time checks of the emulator's verifier: what the kernel checks on every
instruction before it explores any path, in the kernel's order.

1. subprograms: every bpf-to-bpf call and function load lands in the
   program; every kfunc call names a known kernel function;
2. per subprogram: jumps stay inside it, its last instruction is an exit or
   an unconditional jump;
3. per instruction slot: ``LDX`` modes and ``imm``, the ``lddw`` forms and
   the maps they name (a bad fd is ``EBADF``), known opcodes;
4. the control-flow graph from instruction 0 (following calls and function
   loads): no jump out of the program, no unreachable instruction, no jump
   into an ``lddw``.

Encodings that the kernel only checks on explored paths (reserved fields,
registers r11-r15, …) are checked by :mod:`.encoding` when an instruction
is explored. Offsets in messages are slots, as the kernel counts them.

:func:`build_cfg` also computes what exploration needs: subprogram starts,
jump targets, the kernel's prune points, jump-history points and forced
checkpoints, and the registers live before each instruction
(:mod:`bpfmux.isa.flow`).
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ...isa.flow import CFG, by_slot, live_in, regs_read, regs_written
from ...isa.insn import Insn, slot_offsets
from ...isa.opcodes import CALLX, LDDW, Class, Jmp, Mode, Pseudo
from ...isa.validity import FlawKind, flaws
from ...uapi import HelperId, MapType
from .helpers import PROTOS

__all__ = ["SYNC_CALLBACK_HELPERS", "Cfg", "Reject", "build_cfg", "unknown_opcode"]

#: Largest offset of a direct map value access (``BPF_MAX_VAR_OFF``).
_MAX_VAR_OFF = 1 << 29
#: ``ENOTSUPP`` (kernel-internal errno 524).
_ENOTSUPP = 524
#: Helpers that call a callback before they return (the kernel re-verifies the callback as a loop).
SYNC_CALLBACK_HELPERS = frozenset({int(HelperId.loop), int(HelperId.for_each_map_elem), int(HelperId.find_vma),
                                   int(HelperId.user_ringbuf_drain)})
#: Map types a sleepable program may use.
_SLEEPABLE_MAPS = frozenset({MapType.HASH, MapType.LRU_HASH, MapType.ARRAY, MapType.PERCPU_HASH,
                             MapType.PERCPU_ARRAY, MapType.LRU_PERCPU_HASH, MapType.ARRAY_OF_MAPS,
                             MapType.HASH_OF_MAPS, MapType.RINGBUF, MapType.USER_RINGBUF,
                             MapType.INODE_STORAGE, MapType.SK_STORAGE, MapType.TASK_STORAGE,
                             MapType.CGRP_STORAGE, MapType.QUEUE, MapType.STACK, MapType.ARENA})


class Reject(Exception):
    """Internal: the program is rejected (turned into ``VerifierError`` by ``verify``)."""

    def __init__(self, err: int, msg: str, insn: int | None = None) -> None:
        super().__init__(msg)
        self.errno = err
        self.msg = msg
        self.insn = insn


@dataclass
class Cfg:
    """The structure of a program, as the verifier needs it (indices are list indices)."""

    insns: list[Insn]
    slots: list[int]
    slot_to_idx: dict[int, int]
    targets: list[int]  # jump / call / func-pointer target index, -1 if none
    subprogs: list[int]  # start index of each subprogram
    subprog_of: list[int]
    prune: list[bool]
    jmp_point: list[bool]
    force_cp: list[bool]
    calls_callback: list[bool]
    live: list[int] = field(default_factory=list)  # live-in registers bitmask per insn
    has_loops: bool = False


@functools.lru_cache(maxsize=256)
def unknown_opcode(op: int) -> bool:
    """Whether the kernel's table of instruction codes lacks ``op``."""
    if op == CALLX:
        return True
    return any(f.kind is FlawKind.OPCODE for f in flaws(Insn(op)))


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def _is_jmp_class(op: int) -> bool:
    return op & 7 in (Class.JMP, Class.JMP32)


def build_cfg(insns: list[Insn], maps: Mapping[int, object] | None = None, kfuncs: Mapping[int, object] | None = None,
              gpl: bool = True, sleepable: bool = False,
              map_check: Callable[[int, object], None] | None = None) -> Cfg:
    """Run the load-time checks (see the module docstring) and compute the program's structure.

    :param maps: the maps ``lddw`` may name (by fd, or index for ``MAP_IDX``);
        ``None`` skips the map checks.
    :param kfuncs: the kernel functions ``call`` may name (by BTF id).
    :param map_check: called with each map named (fd and description), may raise :class:`Reject`.
    :raises Reject: the first problem, with the kernel's message and errno.
    """
    n = len(insns)
    if n == 0:
        raise Reject(errno.EINVAL, "empty program")
    slots = slot_offsets(insns)
    nslots = slots[-1] + insns[-1].size
    if nslots > 1_000_000:
        raise Reject(errno.E2BIG, f"program has {nslots} instructions; the limit is 1000000")
    slot_to_idx = {s: i for i, s in enumerate(slots)}
    code = by_slot(insns)

    # 1. subprograms and kfuncs
    sub_slots = {0}
    kfunc_seen = False
    for i, insn in enumerate(insns):
        op = insn.opcode
        slot = slots[i]
        if (op == LDDW and insn.src == Pseudo.FUNC) or (op == (Class.JMP | Jmp.CALL) and insn.src == 1):
            t = slot + 1 + _s32(insn.imm)
            if not 0 <= t < nslots:
                raise Reject(errno.EINVAL, "call to invalid destination", slot)
            sub_slots.add(t)
        elif op == (Class.JMP | Jmp.CALL) and insn.src == 2:
            if not kfunc_seen and not gpl:
                raise Reject(errno.EINVAL, "cannot call kernel function from non-GPL compatible program", slot)
            kfunc_seen = True
            if insn.imm == 0 and insn.off == 0:
                continue
            if kfuncs is not None and insn.imm not in kfuncs:
                raise Reject(errno.EINVAL, f"kernel btf_id {insn.imm & 0xFFFFFFFF} is not a function", slot)
    sub_list = sorted(sub_slots)

    # 2. jumps stay in their subprogram; subprograms end in exit or goto
    bounds = sub_list + [nslots]
    k = 0
    for s in range(nslots):
        while s >= bounds[k + 1]:
            k += 1
        at = code[s]
        op = at.opcode if at is not None else 0
        if at is not None and _is_jmp_class(op) and op & 0xF0 not in (Jmp.EXIT, Jmp.CALL):
            off = at.imm if op == (Class.JMP32 | Jmp.JA) else at.off
            t = s + 1 + _s32(off) if op == (Class.JMP32 | Jmp.JA) else s + 1 + off
            if t < bounds[k] or t >= bounds[k + 1]:
                raise Reject(errno.EINVAL, f"jump out of range from insn {s} to {t}", s)
        if s == bounds[k + 1] - 1:
            if at is None or op not in (Class.JMP | Jmp.EXIT, Class.JMP | Jmp.JA, Class.JMP32 | Jmp.JA):
                raise Reject(errno.EINVAL, "last insn is not an exit or jmp", s)

    # 3. instruction slots: LDX fields, lddw forms and maps, known opcodes
    for i, insn in enumerate(insns):
        op = insn.opcode
        slot = slots[i]
        if op & 7 == Class.LDX and (op & 0xE0 not in (Mode.MEM, Mode.MEMSX) or insn.imm != 0):
            raise Reject(errno.EINVAL, "BPF_LDX uses reserved fields", slot)
        if op == LDDW:
            src = insn.src
            hi = (insn.imm >> 32) & 0xFFFFFFFF
            if src in (Pseudo.NONE, Pseudo.BTF_ID, Pseudo.FUNC):
                continue
            if src not in (Pseudo.MAP_FD, Pseudo.MAP_IDX, Pseudo.MAP_VALUE, Pseudo.MAP_IDX_VALUE) or (
                    src in (Pseudo.MAP_FD, Pseudo.MAP_IDX) and hi):
                raise Reject(errno.EINVAL, "unrecognized bpf_ld_imm64 insn", slot)
            if maps is None:
                continue
            fd = insn.imm & 0xFFFFFFFF
            m = maps.get(fd)
            if m is None:
                raise Reject(errno.EBADF, f"fd {_s32(fd)} is not pointing to valid bpf_map", slot)
            if sleepable and getattr(m, "type", None) not in _SLEEPABLE_MAPS:
                raise Reject(errno.EINVAL, "Sleepable programs can only use array, hash, ringbuf and local storage "
                             "maps", slot)
            if map_check is not None:
                map_check(fd, m)
            if src in (Pseudo.MAP_VALUE, Pseudo.MAP_IDX_VALUE):
                if hi >= _MAX_VAR_OFF:
                    raise Reject(errno.EINVAL, f"direct value offset of {hi} is not allowed", slot)
                mtype = getattr(m, "type", None)
                if mtype != MapType.ARRAY:
                    raise Reject(errno.EINVAL, "no direct value access support for this map type", slot)
                vs = getattr(m, "value_size", 0)
                if getattr(m, "max_entries", 1) != 1:
                    raise Reject(_ENOTSUPP, f"invalid access to map value pointer, value_size={vs} off={hi}", slot)
                if hi >= vs:
                    raise Reject(errno.EINVAL, f"invalid access to map value pointer, value_size={vs} off={hi}", slot)
            continue
        if unknown_opcode(op):
            raise Reject(errno.EINVAL, f"unknown opcode {op:02x}", slot)

    # 4. the control-flow graph (depth first from instruction 0)
    prune = [False] * nslots
    jmp_point = [False] * nslots
    force_cp = [False] * nslots
    calls_cb = [False] * nslots
    state = bytearray(nslots)  # 0 new, 1 on the stack, 2 done
    edges_done = [0] * nslots  # bit 1: fall-through pushed, bit 2: branch pushed
    has_loops = False
    stack = [0]
    state[0] = 1

    def push(t: int, w: int, branch: bool) -> bool:
        nonlocal has_loops
        bit = 2 if branch else 1
        if edges_done[t] & bit:
            return False
        if not 0 <= w < nslots:
            raise Reject(errno.EINVAL, f"jump out of range from insn {t} to {w}", t)
        if branch:
            prune[w] = jmp_point[w] = True
        edges_done[t] |= bit
        if state[w] == 0:
            state[w] = 1
            stack.append(w)
            return True
        if state[w] == 1:
            has_loops = True
        return False

    while stack:
        t = stack[-1]
        cur = code[t]
        if cur is None:  # a jump into the second half of an lddw: the kernel walks on from there
            if not push(t, t + 1, False):
                state[t] = 2
                stack.pop()
            continue
        op = cur.opcode
        cls = op & 7
        size = cur.size
        more = False
        if op == LDDW and cur.src == Pseudo.FUNC:
            more = push(t, t + size, False)
            if not more:
                prune[t + size] = jmp_point[t + size] = True
                prune[t] = True
                more = push(t, t + 1 + _s32(cur.imm), True)
        elif cls not in (Class.JMP, Class.JMP32):
            more = push(t, t + size, False)
        else:
            jop = op & 0xF0
            if jop == Jmp.EXIT:
                more = False
            elif jop == Jmp.CALL:
                if cur.src == 0 and cur.imm in SYNC_CALLBACK_HELPERS:
                    calls_cb[t] = force_cp[t] = prune[t] = jmp_point[t] = True
                more = push(t, t + 1, False)
                if not more:
                    prune[t + 1] = jmp_point[t + 1] = True
                    if cur.src == 1:
                        prune[t] = True
                        more = push(t, t + 1 + _s32(cur.imm), True)
            elif jop == Jmp.JA:
                w = t + 1 + (_s32(cur.imm) if cls == Class.JMP32 else cur.off)
                more = push(t, w, False)
                if 0 <= w < nslots:
                    prune[w] = jmp_point[w] = True
            else:
                prune[t] = True
                if op == (Class.JMP | Jmp.JCOND):
                    force_cp[t] = True
                more = push(t, t + 1, False)
                if not more:
                    more = push(t, t + 1 + cur.off, True)
        if not more:
            state[t] = 2
            stack.pop()
    for s in range(nslots):
        at = code[s]
        if at is None:
            continue
        if state[s] != 2:
            raise Reject(errno.EINVAL, f"unreachable insn {s}", s)
        if at.opcode == LDDW and state[s + 1]:
            raise Reject(errno.EINVAL, f"jump into the middle of ldimm64 insn {s}", s)

    targets = [-1] * n
    for i, insn in enumerate(insns):
        slot = slots[i]
        op = insn.opcode
        if (op == LDDW and insn.src == Pseudo.FUNC) or (op == (Class.JMP | Jmp.CALL) and insn.src == 1):
            targets[i] = slot_to_idx[slot + 1 + _s32(insn.imm)]
        elif _is_jmp_class(op) and op & 0xF0 not in (Jmp.EXIT, Jmp.CALL):
            t = slot + 1 + (_s32(insn.imm) if op == (Class.JMP32 | Jmp.JA) else insn.off)
            targets[i] = slot_to_idx[t]
    subprogs = [slot_to_idx[s] for s in sub_list]
    subprog_of = [0] * n
    k = 0
    for i in range(n):
        while k + 1 < len(subprogs) and subprogs[k + 1] <= i:
            k += 1
        subprog_of[i] = k

    def by_idx(flags: list[bool]) -> list[bool]:
        return [flags[s] for s in slots]

    cfg = Cfg(insns, slots, slot_to_idx, targets, subprogs, subprog_of, by_idx(prune), by_idx(jmp_point),
              by_idx(force_cp), by_idx(calls_cb), has_loops=has_loops)
    cfg.live = _liveness(cfg, code)
    return cfg


@functools.lru_cache(maxsize=1 << 14)
def _reads_writes(insn: Insn | None) -> tuple[frozenset[int], frozenset[int]]:
    """Registers an instruction reads and writes, calls of modelled helpers reading only their arguments."""
    if insn is None:
        return frozenset(), frozenset()
    nargs = 5
    if insn.opcode == (Class.JMP | Jmp.CALL) and insn.src == 0:
        proto = PROTOS.get(insn.imm)
        if proto is not None:
            nargs = len(proto.args)
    return regs_read(insn, call_args=nargs), regs_written(insn)


def _liveness(cfg: Cfg, code: list[Insn | None]) -> list[int]:
    """Live-in registers (bit mask) of each instruction, function by function."""
    live = [0] * len(cfg.insns)
    for start in cfg.subprogs:
        for slot, regs in live_in(CFG(code, cfg.slots[start]), _reads_writes).items():
            idx = cfg.slot_to_idx.get(slot)
            if idx is None:
                continue
            mask = 0
            for r in regs:
                mask |= 1 << r
            live[idx] = mask
    return live
