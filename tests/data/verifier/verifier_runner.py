"""Run corpus cases through bpfmux's verifier and through the kernel (shared by the tests)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from verifier_corpus import CASES, Case

from bpfmux.emu.verifier.core import MapInfo, verify
from bpfmux.errors import VerifierError
from bpfmux.isa import Insn, encode

__all__ = ["CASES", "Case", "kernel_verdict", "ours"]


def _remap(insns: list[Insn], fds: list[int]) -> list[Insn]:
    out = []
    for i in insns:
        if i.opcode == 0x18 and i.src in (1, 2) and (i.imm & 0xFFFFFFFF) < len(fds):
            i = Insn(i.opcode, i.dst, i.src, i.off, (i.imm & ~0xFFFFFFFF) | fds[i.imm & 0xFFFFFFFF])
        out.append(i)
    return out


def ours(case: Case) -> VerifierError | None:
    """bpfmux's verdict: the error, or ``None`` when accepted."""
    maps = {i: MapInfo(m.type, m.key_size, m.value_size, m.max_entries, m.flags) for i, m in enumerate(case.maps)}
    try:
        verify(case.insns, case.prog_type, attach_type=case.attach_type or None, maps=maps)
    except VerifierError as e:
        return e
    return None


def kernel_verdict(case: Case) -> VerifierError | None:
    """The kernel's verdict (root needed): the error, or ``None`` when accepted."""
    from bpfmux.live import sys as lsys
    from bpfmux.uapi import MapFlags

    fds = []
    try:
        for m in case.maps:
            flags = m.flags
            fd = lsys.map_create(m.type, m.key_size, m.value_size, m.max_entries, flags=flags)
            fds.append(fd)
        insns = _remap(case.insns, [int(f) for f in fds])
        try:
            prog = lsys.prog_load(case.prog_type, encode(insns), "GPL", expected_attach_type=case.attach_type,
                                  log_level=1, log_size=1 << 22)
        except VerifierError as e:
            return e
        except OSError as e:  # a non-verifier refusal (EBADF for a bad map fd)
            return VerifierError(e.errno or 0, str(e), log=str(e))
        prog.close()
        return None
    finally:
        for f in fds:
            f.close()
        _ = MapFlags
