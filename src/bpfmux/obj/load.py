"""Load-time relocation: turn a :class:`ProgramSpec` into final instructions.

This is the one step of :mod:`bpfmux.obj` that depends on the kernel being
loaded into: map fds (or emulator handles), the target BTF (CO-RE, kfunc and
typed-ksym ids) and kernel symbol addresses (untyped ksyms). Both backends
call it through :meth:`ProgramSpec.instructions`.

CO-RE values come from :func:`bpfmux.btf.core.resolve` and are patched by
:func:`bpfmux.btf.core.patch_insn` (libbpf's rules: ALU immediates, load/store
offsets with size adjustment, ``lddw`` immediates); a relocation that cannot
be satisfied poisons its instruction with ``call 0xbad2310`` (both slots of
an ``lddw``) so the verifier rejects it only if it is reachable.
:func:`apply_core_result` is the same patching for a caller-supplied
resolver (``core_resolver=``), used to test the loader in isolation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import NotFoundError, NotSupportedError, ParseError
from ..isa.insn import Insn
from ..isa.opcodes import LDDW, CallKind, Class, Jmp, Pseudo, Size, Source
from ..uapi import BtfKind
from .spec import POISON_CALL_KFUNC_BASE, CoreRelo, ExternKind, ProgramSpec, RelocKind

if TYPE_CHECKING:
    from ..btf import Btf

__all__ = ["CORE_POISON_IMM", "CoreResult", "apply_core_result", "finalize"]

#: libbpf's marker for an unsatisfiable CO-RE relocation (``call 0xbad2310``).
CORE_POISON_IMM = 0xBAD2310
_CALL = Class.JMP | Jmp.CALL
_SIZES = {1: Size.B, 2: Size.H, 4: Size.W, 8: Size.DW}


@dataclasses.dataclass(frozen=True, slots=True)
class CoreResult:
    """The outcome of one CO-RE relocation (what :mod:`bpfmux.btf.core` computes).

    :ivar orig: the value the compiler put in the instruction (local BTF).
    :ivar new: the value for the target kernel.
    :ivar poison: no target matches: the instruction must be poisoned.
    :ivar orig_size, new_size: field sizes for byte-offset relocations of
        loads (0 when not applicable); a load is resized to ``new_size``.
    """

    orig: int
    new: int
    poison: bool = False
    orig_size: int = 0
    new_size: int = 0


#: ``resolver(local_btf, target_btf, relo) -> CoreResult``
CoreResolver = Callable[["Btf", "Btf", CoreRelo], CoreResult]


def _btf_core_apply(insns: list[Insn], poisoned: dict[int, list[Insn]], prog: ProgramSpec, local_btf: Btf,
                    target_btf: Btf) -> None:
    """Resolve and patch every CO-RE record through :mod:`bpfmux.btf.core`."""
    from ..btf import core, ext

    for relo in prog.core_relos:
        erelo = ext.CoreRelo(relo.insn * 8, relo.type_id, relo.access, ext.CoreReloKind(int(relo.kind)))
        try:
            res = core.resolve(erelo, local_btf, target_btf)
            ins = insns[relo.insn]
            if res.poison and ins.opcode == LDDW:
                poison = Insn(_CALL, 0, 0, 0, CORE_POISON_IMM)
                poisoned[relo.insn] = [poison, poison]  # keep both slots, as libbpf does
            else:
                insns[relo.insn] = core.patch_insn(ins, res)
        except core.CoreRelocationError as err:
            raise ParseError(f"program {prog.name!r} insn {relo.insn}: {err}") from None


def finalize(
    prog: ProgramSpec,
    map_fd: Callable[[str], int],
    target_btf: Btf | None,
    *,
    ksym_addr: Callable[[str], int | None] | None = None,
    core_resolver: CoreResolver | None = None,
) -> list[Insn]:
    """See :meth:`ProgramSpec.instructions`.

    :raises ParseError: a relocation that cannot be applied.
    :raises NotSupportedError: CO-RE relocations or ksym externs without ``target_btf``.
    :raises NotFoundError: a missing map or strong extern.
    """
    insns = list(prog.insns)
    poisoned: dict[int, list[Insn]] = {}
    if prog.core_relos:
        if target_btf is None:
            raise NotSupportedError(
                "co-re", f"program {prog.name!r} has CO-RE relocations; pass target_btf (e.g. Btf.vmlinux())")
        if prog.btf is None:
            raise ParseError(f"program {prog.name!r} has CO-RE relocations but its object has no BTF")
        if core_resolver is None:
            _btf_core_apply(insns, poisoned, prog, prog.btf, target_btf)
        else:
            for relo in prog.core_relos:
                apply_core_result(insns, poisoned, relo, core_resolver(prog.btf, target_btf, relo), prog.name)
    fds: dict[str, int] = {}

    def fd(name: str) -> int:
        if name not in fds:
            fds[name] = int(map_fd(name))
        return fds[name]

    ext_index = {name: i for i, name in enumerate(prog.externs)}
    for r in prog.relocations:
        ins = insns[r.insn]
        if r.kind is RelocKind.MAP:
            insns[r.insn] = ins.replace(src=Pseudo.MAP_FD, imm=fd(r.target) & 0xFFFFFFFF)
        elif r.kind in (RelocKind.MAP_VALUE, RelocKind.KCONFIG):
            imm = (fd(r.target) & 0xFFFFFFFF) | ((r.offset & 0xFFFFFFFF) << 32)
            insns[r.insn] = ins.replace(src=Pseudo.MAP_VALUE, imm=imm)
        elif r.kind is RelocKind.KFUNC:
            insns[r.insn] = _kfunc_call(prog, r.target, target_btf, ext_index.get(r.target, 0))
        elif r.kind is RelocKind.KSYM:
            insns[r.insn] = _ksym_load(prog, ins, r.target, target_btf, ksym_addr)
    if poisoned:
        out: list[Insn] = []
        for i, ins in enumerate(insns):
            out.extend(poisoned.get(i, (ins,)))
        return out
    return insns


def _find(target_btf: Btf | None, name: str, kind: BtfKind, prog: ProgramSpec) -> int | None:
    if target_btf is None:
        raise NotSupportedError("ksym", f"program {prog.name!r} uses extern {name!r}; pass target_btf "
                                        "(e.g. Btf.vmlinux()) to resolve it")
    ids = target_btf.find_ids(name, kind)
    return ids[0] if ids else None


def _kfunc_call(prog: ProgramSpec, name: str, target_btf: Btf | None, ext_idx: int) -> Insn:
    ext = prog.externs.get(name)
    tid = _find(target_btf, name, BtfKind.FUNC, prog)
    if tid is None:
        if ext is not None and ext.weak:
            return Insn(_CALL, 0, 0, 0, POISON_CALL_KFUNC_BASE + ext_idx)
        raise NotFoundError("kernel function", name, "the target kernel's BTF has no such kfunc; declare it __weak "
                                                     "to make it optional")
    return Insn(_CALL, 0, CallKind.KFUNC_CALL, 0, tid)


def _ksym_load(prog: ProgramSpec, ins: Insn, name: str, target_btf: Btf | None,
               ksym_addr: Callable[[str], int | None] | None) -> Insn:
    ext = prog.externs.get(name)
    weak = bool(ext and ext.weak)
    if ext is not None and ext.kind is ExternKind.KFUNC:
        tid = _find(target_btf, name, BtfKind.FUNC, prog)
        if tid is None:
            if weak:
                return ins.replace(src=0, imm=0)
            raise NotFoundError("kernel function", name, "the target kernel's BTF has no such kfunc")
        return ins.replace(src=Pseudo.BTF_ID, imm=tid)
    if ext is not None and ext.type_id:
        tid = _find(target_btf, name, BtfKind.VAR, prog)
        if tid is None:
            if weak:
                return ins.replace(src=0, imm=0)
            raise NotFoundError("kernel variable", name, "the target kernel's BTF has no such variable (typed ksym)")
        return ins.replace(src=Pseudo.BTF_ID, imm=tid)
    addr = ksym_addr(name) if ksym_addr is not None else None
    if addr is None:
        if weak:
            return ins.replace(src=0, imm=0)
        hint = "pass ksym_addr (e.g. a kallsyms lookup)" if ksym_addr is None else "kallsyms has no such symbol"
        raise NotFoundError("kernel symbol", name, hint)
    return ins.replace(src=0, imm=addr & 0xFFFFFFFFFFFFFFFF)


def apply_core_result(insns: list[Insn], poisoned: dict[int, list[Insn]], relo: CoreRelo, res: CoreResult,
                      prog_name: str = "") -> None:
    """Patch ``insns[relo.insn]`` with a CO-RE result, as libbpf does.

    Poisoned instructions are recorded in ``poisoned`` (index → replacement
    instructions; an ``lddw`` becomes two poison calls, keeping the slot count).

    :raises ParseError: the instruction does not hold the expected original
        value, or the new value does not fit.
    """
    i = relo.insn
    ins = insns[i]
    where = f"program {prog_name!r} insn {i}: CO-RE {relo.kind.name} relocation"
    poison = Insn(_CALL, 0, 0, 0, CORE_POISON_IMM)
    if res.poison:
        poisoned[i] = [poison, poison] if ins.opcode == LDDW else [poison]
        return
    cls = ins.cls
    if cls in (Class.ALU, Class.ALU64):
        if ins.opcode & Source.X:
            raise ParseError(f"{where}: ALU instruction uses a register, not an immediate")
        if _s32(ins.imm) != _s32(res.orig):
            raise ParseError(f"{where}: instruction has {ins.imm}, expected {res.orig}")
        if not -(1 << 31) <= res.new < (1 << 32):
            raise ParseError(f"{where}: value {res.new} does not fit a 32-bit immediate")
        insns[i] = ins.replace(imm=_s32(res.new))
    elif cls in (Class.LDX, Class.ST, Class.STX):
        if ins.off != res.orig:
            raise ParseError(f"{where}: instruction has offset {ins.off}, expected {res.orig}")
        if not -(1 << 15) <= res.new < (1 << 15):
            raise ParseError(f"{where}: offset {res.new} does not fit 16 bits")
        opcode = ins.opcode
        if res.orig_size and res.new_size and res.orig_size != res.new_size:
            if cls != Class.LDX or res.new_size not in _SIZES:
                raise ParseError(f"{where}: field size changed from {res.orig_size} to {res.new_size}; "
                                 "only loads can be resized")
            opcode = (opcode & ~0x18) | _SIZES[res.new_size]
        insns[i] = ins.replace(opcode=opcode, off=res.new)
    elif ins.opcode == LDDW:
        if ins.imm != res.orig & 0xFFFFFFFFFFFFFFFF:
            raise ParseError(f"{where}: lddw has {ins.imm}, expected {res.orig}")
        insns[i] = ins.replace(imm=res.new & 0xFFFFFFFFFFFFFFFF)
    else:
        raise ParseError(f"{where}: cannot patch opcode {ins.opcode:#04x}")


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v
