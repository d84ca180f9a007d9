"""System calls in the emulated kernel, as the kernel's syscall path shows them to probes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...abi.ptregs import pack_pt_regs
from ...abi.syscalls import syscall_number
from ...errors import NotFoundError
from .trampoline.frame import U64

if TYPE_CHECKING:  # pragma: no cover
    from .emulator import Emulator

__all__ = ["emulate_syscall"]


def emulate_syscall(emu: Emulator, name: str, args: Sequence[int], ret: int = 0) -> int:
    """What :meth:`bpfmux.emu.Emulator.syscall` does (see there).

    :raises NotFoundError: an x86-64 syscall bpfmux does not know.
    """
    nr = syscall_number(name)
    if nr is None:
        raise NotFoundError("system call", name, "give its name as in syscalls:sys_enter_NAME")
    vals = [a & U64 for a in args][:6]
    full = vals + [0] * (6 - len(vals))
    regs = dict(zip(("di", "si", "dx", "r10", "r8", "r9"), full, strict=True), orig_ax=nr)
    region = emu.vm.space.map(bytearray(pack_pt_regs(regs)), "pt_regs of a syscall", "kernel", True)
    addr = region.base
    try:
        ran = emu.fire("raw_syscalls:sys_enter", addr, nr, id=nr, args=full)
        ran += _syscall_tracepoint(emu, f"syscalls:sys_enter_{name}", nr, vals)
        fname = next((c for c in (f"__x64_sys_{name}", f"__se_sys_{name}") if c in emu.functions), None)
        if fname is not None:
            f = emu.functions[fname]
            body, f.body = f.body, lambda *a: ret
            try:
                emu.call(f, *([addr] + [0] * (f.nargs - 1))[: f.nargs])
            finally:
                f.body = body
        regs["ax"] = ret & U64
        emu.write(addr, pack_pt_regs(regs))
        ran += emu.fire("raw_syscalls:sys_exit", addr, ret & U64, id=nr, ret=ret)
        ran += _syscall_tracepoint(emu, f"syscalls:sys_exit_{name}", nr, [], ret=ret)
    finally:
        emu.vm.space.unmap(region)  # the registers live as long as the syscall
    return ran


def _syscall_tracepoint(emu: Emulator, name: str, nr: int, args: Sequence[int], **extra: int) -> int:
    try:
        ev = emu.tracepoints.get(name)
    except NotFoundError:
        return 0  # a syscall without its own tracepoint in this kernel's formats
    assert ev.format is not None
    fields: dict[str, Any] = {"__syscall_nr": nr}
    names = [f.name for f in ev.format.fields if not f.common and f.name != "__syscall_nr"]
    fields.update(zip(names, args, strict=False))
    fields.update(extra)
    return emu.fire(name, **fields)
