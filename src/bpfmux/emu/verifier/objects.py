"""Verify programs of an ELF object: build :func:`~bpfmux.emu.verifier.core.verify`'s inputs from specs.

:func:`verify_program` (:func:`prepare_program` then verify) takes an :class:`~bpfmux.obj.ObjectSpec` and one of its
programs and does what a loader does before ``BPF_PROG_LOAD``: gives every map
a handle, relocates the instructions (maps, global data, CO-RE and kfunc ids
against the target BTF), describes the maps, the kfuncs called, and the
program's context (for tracing programs, the frame of the attach target from
BTF), then verifies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...abi import ArgInfo, ContextLayout, FrameView, context_for, frame_layout, frame_view_for
from ...errors import BpfmuxError, NotFoundError, NotSupportedError
from ...isa.opcodes import Class, Jmp
from ...uapi import AttachType, MapType, ProgFlags, ProgType
from .core import KfuncInfo, MapInfo, VerifierResult, verify

if TYPE_CHECKING:
    from ...btf import Btf
    from ...btf.model import TypeRef
    from ...obj import MapSpec, ObjectSpec, ProgramSpec

__all__ = ["PreparedProgram", "map_infos", "prepare_program", "program_context", "verify_program"]

#: Fake address given to untyped ksyms (``&_stext``) when no kallsyms is at hand.
KSYM_PLACEHOLDER = 0xFFFF_FFFF_8100_0000


def _map_info(ms: MapSpec, contents: bytes | None = None) -> MapInfo:
    inner = _map_info(ms.inner) if ms.inner is not None else None
    frozen = None
    if contents is not None and ms.frozen and int(ms.type) == MapType.ARRAY and ms.max_entries == 1:
        frozen = bytes(contents).ljust(ms.value_size, b"\0")[: ms.value_size]
    return MapInfo(int(ms.type), ms.key_size, ms.value_size, ms.max_entries, int(ms.flags), ms.name, inner, frozen)


def _contents(obj: ObjectSpec, ms: MapSpec, kconfig: Mapping[str, object] | None) -> bytes | None:
    """What a loader writes into a global-data map before freezing it (``.kconfig``: the config values)."""
    if ms.section == ".kconfig" or ms.name == ".kconfig":
        from ...host.kconfig import kernel_config

        values: dict[str, object] = dict(kernel_config())
        values.update(kconfig or {})
        try:
            return obj.kconfig_data(values)
        except BpfmuxError:
            return None
    return ms.value if ms.is_global_data else None


def map_infos(obj: ObjectSpec, kconfig: Mapping[str, object] | None = None) -> tuple[dict[str, int], dict[int, MapInfo]]:
    """Handles (1, 2, …) for every map of ``obj`` and their descriptions; frozen
    read-only global data (``.rodata``, ``.kconfig`` filled from the running
    kernel's config and ``kconfig``) comes with its contents, which the
    kernel's verifier reads as constants."""
    handles: dict[str, int] = {}
    infos: dict[int, MapInfo] = {}
    for i, (name, ms) in enumerate(obj.maps.items(), 1):
        handles[name] = i
        infos[i] = _map_info(ms, _contents(obj, ms, kconfig))
    return handles, infos


def _arg(btf: Btf, t: TypeRef, name: str) -> ArgInfo:
    from ...btf.types import Composite, Enum, Int, Ptr, Void

    r = btf.resolve(t)
    if isinstance(r, Ptr):
        target = btf.resolve(btf[r.type_id]) if r.type_id else None
        if isinstance(target, Composite):
            return ArgInfo(name, 8, True, target.name or None)
        return ArgInfo(name, 8, True)
    if isinstance(r, Void):
        return ArgInfo(name, 0)
    signed = (isinstance(r, Int) and r.signed) or (isinstance(r, Enum) and r.signed)
    try:
        size = btf.sizeof(r)
    except (BpfmuxError, TypeError, ValueError):  # a type without size: an 8-byte scalar
        size = 8
    return ArgInfo(name, size, False, None, bool(signed))


def _func_frame(btf: Btf, func: str) -> tuple[list[ArgInfo], ArgInfo | None]:
    from ...btf.funcs import signature

    sig = signature(btf, func)
    args = [_arg(btf, a.type, a.name) for a in sig.args]
    ret = _arg(btf, sig.return_type, "ret") if sig.return_size else ArgInfo("ret")
    return args, ret


def _tp_btf_frame(btf: Btf, tp: str) -> list[ArgInfo]:
    from ...btf.types import FuncProto, Ptr

    ids = btf.find_ids(f"btf_trace_{tp}")
    if not ids:
        raise NotFoundError("BTF tracepoint", tp, "is it a raw tracepoint of this kernel?")
    p = btf.resolve(btf[ids[0]])
    proto = btf[p.type_id] if isinstance(p, Ptr) else None
    if not isinstance(proto, FuncProto):
        raise NotFoundError("BTF tracepoint prototype", tp)
    return [_arg(btf, btf[q.type_id], q.name) for q in proto.params[1:]]


def program_context(prog: ProgramSpec, btf: Btf | None = None) -> ContextLayout:
    """The context layout of ``prog``; tracing frames come from ``btf`` (the target kernel's).

    :raises NotSupportedError: no context model for the program type.
    :raises NotFoundError: the attach target is not in ``btf``.
    """
    pt, at = prog.prog_type, prog.expected_attach_type
    multi = bool(prog.flags & ProgFlags.MULTI_FUNC)
    if pt == ProgType.TRACING:
        view = frame_view_for(at, multi)
        if view in (FrameView.SEED_MULTI, FrameView.MAINLINE_MULTI) or btf is None or not prog.attach_target:
            return context_for(pt, at, multi_func=multi)
        if view == FrameView.TP_BTF:
            return frame_layout(view, _tp_btf_frame(btf, prog.attach_target), None, prog.attach_target)
        args, ret = _func_frame(btf, prog.attach_target)
        return frame_layout(view, args, ret, prog.attach_target)
    if pt == ProgType.LSM and btf is not None and prog.attach_target:
        args, ret = _func_frame(btf, f"bpf_lsm_{prog.attach_target}")
        return frame_layout(FrameView.FEXIT, args, ret, prog.attach_target)
    return context_for(pt, at)


def _kfuncs(insns: list, btf: Btf | None) -> dict[int, KfuncInfo]:
    from ...btf.funcs import prototype
    from ...btf.types import Enum, Func, FuncProto, Int, Ptr, Void

    out: dict[int, KfuncInfo] = {}
    if btf is None:
        return out
    for insn in insns:
        if insn.opcode == (Class.JMP | Jmp.CALL) and insn.src == 2 and insn.imm not in out:
            try:
                f = btf[insn.imm]
            except (KeyError, IndexError, NotFoundError):
                continue
            proto = btf[f.type_id] if isinstance(f, Func) else None
            if not isinstance(f, Func) or not isinstance(proto, FuncProto):
                continue
            sig = prototype(btf, proto, f.name, f.id)
            r = btf.resolve(sig.return_type)
            size = 0
            if isinstance(r, Void) or not sig.return_size:
                ret = "void"
            elif isinstance(r, Ptr):
                target = btf.resolve(btf[r.type_id]) if r.type_id else None
                ret = "mem" if isinstance(target, (Int, Enum)) else "ptr"
                if ret == "mem" and target is not None:
                    size = btf.sizeof(target)
            else:
                ret = "scalar"
            out[insn.imm] = KfuncInfo(f.name, sig.nargs, ret, size)
    return out


@dataclass(frozen=True)
class PreparedProgram:
    """One program of an object, relocated: what :func:`~bpfmux.emu.verifier.core.verify` takes."""

    insns: list
    options: dict[str, Any]

    def verify(self, **options: Any) -> VerifierResult:
        """Verify it (``options`` override or add to the prepared ones).

        :raises VerifierError: rejected.
        """
        return verify(self.insns, **{**self.options, **options})


def prepare_program(obj: ObjectSpec, prog: ProgramSpec | str, btf: Btf | None = None, *,
                    maps: Mapping[str, int] | None = None,
                    kconfig: Mapping[str, object] | None = None) -> PreparedProgram:
    """Relocate one program of ``obj`` and gather what its verification needs
    (context layout, maps, kfuncs, flags); see :func:`verify_program`.
    ``kconfig`` adds to or overrides the running kernel's config values for
    ``.kconfig`` externs.

    :raises NotSupportedError: the program type has no context model.
    :raises NotFoundError: an extern or attach target cannot be resolved.
    """
    from ...btf import Btf as _Btf

    p = obj.program(prog) if isinstance(prog, str) else prog
    if btf is None:
        try:
            btf = _Btf.vmlinux()
        except (OSError, NotFoundError, NotSupportedError):
            btf = None
    handles, infos = map_infos(obj, kconfig)
    if maps is not None:
        handles = dict(maps)
        infos = {handles[n]: _map_info(ms, _contents(obj, ms, kconfig)) for n, ms in obj.maps.items() if n in handles}
    insns = p.instructions(lambda name: handles[name], btf, ksym_addr=lambda name: KSYM_PLACEHOLDER)
    ctx = program_context(p, btf)
    return PreparedProgram(insns, {
        "prog_type": p.prog_type, "attach_type": p.expected_attach_type, "ctx": ctx, "maps": infos,
        "kfuncs": _kfuncs(insns, btf), "gpl": "GPL" in (p.license or obj.license or ""), "flags": int(p.flags),
        "name": p.name, "func_info": bool(p.func_info)})


def verify_program(obj: ObjectSpec, prog: ProgramSpec | str, btf: Btf | None = None, *,
                   maps: Mapping[str, int] | None = None, **options: object) -> VerifierResult:
    """Relocate and verify one program of ``obj``.

    :param btf: the target kernel's BTF (CO-RE, kfuncs, tracing frames);
        default ``Btf.vmlinux()`` when the machine has one.
    :param maps: handles to use for the maps (default: 1, 2, … in object order).
    :param options: passed on to :func:`~bpfmux.emu.verifier.core.verify` (``log_level``, ``max_insns``, …).
    :raises VerifierError: rejected.
    :raises NotSupportedError: the program type has no context model.
    :raises NotFoundError: an extern or attach target cannot be resolved.
    """
    return prepare_program(obj, prog, btf, maps=maps).verify(**options)


# keep names importable for type checkers of callers
_ = AttachType
