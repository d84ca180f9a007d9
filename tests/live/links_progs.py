"""Hand-assembled counting programs and helpers for the link tests.

Every program counts into a u64 array map (``Counters``), at a slot chosen
by the BPF cookie, a constant, or the syscall id, and only for the calling
process (``tgid`` filter) so other processes on the machine cannot disturb
the counts.
"""

from __future__ import annotations

import os
import struct
import subprocess

from bpfmux.isa.insn import Insn, encode
from bpfmux.live import sys as lsys
from bpfmux.live.links import RawProgram
from bpfmux.uapi import AttachType, MapType, ProgType

MOV64_IMM, MOV64_REG, ADD64_IMM, RSH64_IMM = 0xB7, 0xBF, 0x07, 0x77
LDDW, STX_W, LDX_DW, ATOMIC_DW, CALL, EXIT = 0x18, 0x63, 0x79, 0xDB, 0x85, 0x95
JEQ_IMM, JNE_IMM, JGE_IMM = 0x15, 0x55, 0x35
GET_CURRENT_PID_TGID, MAP_LOOKUP, GET_ATTACH_COOKIE = 14, 1, 174


class Counters:
    """A u64 ``ARRAY`` map of ``n`` slots."""

    def __init__(self, n: int = 64) -> None:
        self.n = n
        self.fd_obj = lsys.map_create(MapType.ARRAY, 4, 8, n, name="links_test")

    @property
    def fd(self) -> int:
        """The map fd number (what ``lddw`` map references take)."""
        return self.fd_obj.fd

    def __getitem__(self, slot: int) -> int:
        out = bytearray(8)
        lsys.map_lookup_elem(self.fd, struct.pack("<I", slot), out)
        return struct.unpack("<Q", out)[0]

    def all(self) -> list[int]:
        return [self[i] for i in range(self.n)]

    def close(self) -> None:
        self.fd_obj.close()


def _count(map_fd: int, key_reg: int) -> list[Insn]:
    """``counters[key_reg] += 1`` (key in a register), then ``return 0``."""
    return [
        Insn(STX_W, 10, key_reg, -4, 0),
        Insn(LDDW, 1, 1, 0, map_fd),
        Insn(MOV64_REG, 2, 10),
        Insn(ADD64_IMM, 2, 0, 0, -4),
        Insn(CALL, 0, 0, 0, MAP_LOOKUP),
        Insn(JEQ_IMM, 0, 0, 2, 0),
        Insn(MOV64_IMM, 1, 0, 0, 1),
        Insn(ATOMIC_DW, 0, 1, 0, 0),
    ]


def _tgid_filter(tgid: int | None, skip: int) -> list[Insn]:
    """Jump ``skip`` instructions ahead unless the current tgid is ``tgid``
    (keeps ctx in r6)."""
    if tgid is None:
        return [Insn(MOV64_REG, 6, 1)]
    return [
        Insn(MOV64_REG, 6, 1),
        Insn(CALL, 0, 0, 0, GET_CURRENT_PID_TGID),
        Insn(RSH64_IMM, 0, 0, 0, 32),
        Insn(JNE_IMM, 0, 0, skip, tgid),
    ]


def counting_insns(map_fd: int, *, slot: int | None = None, by_cookie: bool = False, tgid: int | None = None,
                   syscall_nr: int | None = None, ret: int = 0) -> bytes:  # fmt: skip
    """A program counting hits into ``map_fd``: at ``slot``, or at the BPF
    cookie (``by_cookie``); only for ``tgid``; for raw sys_enter
    (``syscall_nr``) only that syscall (``ctx[1]``)."""
    body: list[Insn] = []
    if syscall_nr is not None:
        body += [Insn(LDX_DW, 2, 6, 8, 0), Insn(JNE_IMM, 2, 0, None, syscall_nr)]  # patched below
    if by_cookie:
        body += [Insn(MOV64_REG, 1, 6), Insn(CALL, 0, 0, 0, GET_ATTACH_COOKIE), Insn(MOV64_REG, 7, 0)]
    else:
        body += [Insn(MOV64_IMM, 7, 0, 0, slot or 0)]
    body += _count(map_fd, 7)
    tail = [Insn(MOV64_IMM, 0, 0, 0, ret), Insn(EXIT)]
    # slot distance from each skip point to the tail
    size_after = sum(i.size for i in body)
    if syscall_nr is not None:
        body[1] = Insn(JNE_IMM, 2, 0, size_after - 2, syscall_nr)
    head = _tgid_filter(tgid, size_after)
    return encode(head + body + tail)


def load(prog_type: ProgType, insns: bytes, expected_attach_type: AttachType | None = None, *, name: str = "t",
         section: str = "", attach_btf_id: int = 0) -> RawProgram:  # fmt: skip
    fd = lsys.prog_load(prog_type, insns, "GPL", name=name, expected_attach_type=int(expected_attach_type or 0),
                        attach_btf_id=attach_btf_id)  # fmt: skip
    return RawProgram(fd, prog_type, expected_attach_type, name=name, section=section)


def counting_prog(prog_type: ProgType, counters: Counters, *, expected_attach_type: AttachType | None = None,
                  section: str = "", name: str = "t", attach_btf_id: int = 0, **kw) -> RawProgram:  # fmt: skip
    return load(prog_type, counting_insns(counters.fd, **kw), expected_attach_type, name=name, section=section,
                attach_btf_id=attach_btf_id)  # fmt: skip


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def bpftool_link_ids() -> set[int]:
    """Ids of every bpf_link the kernel holds (``bpftool link list``)."""
    import json

    out = subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True, text=True, check=True).stdout
    return {int(x["id"]) for x in json.loads(out or "[]")}


def bpftool_links_of_prog(prog_id: int) -> list[dict]:
    import json

    out = subprocess.run(["bpftool", "-j", "link", "list"], capture_output=True, text=True, check=True).stdout
    return [x for x in json.loads(out or "[]") if int(x.get("prog_id", -1)) == prog_id]


STX_DW, ATOMIC_FETCH_ADD = 0x7B, 0x01
SEQ_SLOT = 63


def sequence_insns(map_fd: int, slot: int, tgid: int, seq_slot: int = SEQ_SLOT) -> bytes:
    """Record the order programs run in: ``counters[slot] = ++counters[seq_slot]``
    (the shared sequence number is taken with an atomic fetch-add)."""
    body = [
        Insn(0x62, 10, 0, -4, seq_slot),  # *(u32 *)(fp - 4) = seq_slot
        Insn(LDDW, 1, 1, 0, map_fd),
        Insn(MOV64_REG, 2, 10),
        Insn(ADD64_IMM, 2, 0, 0, -4),
        Insn(CALL, 0, 0, 0, MAP_LOOKUP),
        Insn(JEQ_IMM, 0, 0, None, 0),  # patched: to the tail
        Insn(MOV64_IMM, 8, 0, 0, 1),
        Insn(ATOMIC_DW, 0, 8, 0, ATOMIC_FETCH_ADD),  # r8 = fetch_add(*r0, 1)
        Insn(ADD64_IMM, 8, 0, 0, 1),
        Insn(0x62, 10, 0, -8, slot),  # *(u32 *)(fp - 8) = slot
        Insn(LDDW, 1, 1, 0, map_fd),
        Insn(MOV64_REG, 2, 10),
        Insn(ADD64_IMM, 2, 0, 0, -8),
        Insn(CALL, 0, 0, 0, MAP_LOOKUP),
        Insn(JEQ_IMM, 0, 0, 1, 0),
        Insn(STX_DW, 0, 8, 0, 0),  # *(u64 *)r0 = r8
    ]
    size = sum(i.size for i in body)
    body[5] = Insn(JEQ_IMM, 0, 0, size - sum(i.size for i in body[:6]), 0)
    tail = [Insn(MOV64_IMM, 0, 0, 0, 0), Insn(EXIT)]
    return encode(_tgid_filter(tgid, size) + body + tail)
