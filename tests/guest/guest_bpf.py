"""Tiny raw bpf(2)/perf_event_open(2) shim for the VM tier's own smoke tests.

The in-guest smoke tests (``test_guest_kernel.py``) check the guest kernel's
kprobe and fentry support independently of ``bpfmux.live``, so that a
failure there points at the harness or the kernel, not at the library under
test. Only the few commands those checks need are here; the library's own
``bpfmux.live.sys`` is what the link tests use.
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

from bpfmux.isa.insn import Insn, encode

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

SYS_BPF = 321
SYS_PERF_EVENT_OPEN = 298

BPF_MAP_CREATE = 0
BPF_MAP_LOOKUP_ELEM = 1
BPF_PROG_LOAD = 5
BPF_PROG_TEST_RUN = 10
BPF_LINK_CREATE = 28

BPF_MAP_TYPE_ARRAY = 2
BPF_PROG_TYPE_KPROBE = 2
BPF_PROG_TYPE_TRACING = 26
BPF_TRACE_FENTRY = 24

PERF_EVENT_IOC_ENABLE = 0x2400
PERF_EVENT_IOC_SET_BPF = 0x40042408
PERF_FLAG_FD_CLOEXEC = 8

#: Offset of ``di`` (first argument) in x86-64 ``struct pt_regs``.
PT_REGS_DI = 14 * 8
#: Offset of ``ax`` (return value) in x86-64 ``struct pt_regs``.
PT_REGS_AX = 10 * 8


def _check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return ret


def bpf(cmd: int, attr: bytearray, what: str) -> int:
    """Call bpf(2) with *attr* (updated in place by the kernel); return its result."""
    buf = (ctypes.c_char * len(attr)).from_buffer(attr)
    return _check(_libc.syscall(SYS_BPF, cmd, buf, len(attr)), what)


def map_create_array(value_size: int, max_entries: int) -> int:
    """Create an ARRAY map with u32 keys; return its fd."""
    attr = bytearray(72)
    struct.pack_into("<IIII", attr, 0, BPF_MAP_TYPE_ARRAY, 4, value_size, max_entries)
    return bpf(BPF_MAP_CREATE, attr, "BPF_MAP_CREATE")


def map_lookup(fd: int, key: int, value_size: int) -> bytes:
    """Read one element of an array map."""
    k = ctypes.create_string_buffer(struct.pack("<I", key))
    v = ctypes.create_string_buffer(value_size)
    attr = bytearray(32)
    struct.pack_into("<IIQQ", attr, 0, fd, 0, ctypes.addressof(k), ctypes.addressof(v))
    bpf(BPF_MAP_LOOKUP_ELEM, attr, "BPF_MAP_LOOKUP_ELEM")
    return v.raw


def prog_load(prog_type: int, insns: list[Insn], *, attach_type: int = 0, attach_btf_id: int = 0) -> int:
    """Load a GPL program; on failure the verifier log is in the OSError message."""
    code = ctypes.create_string_buffer(encode(insns))
    lic = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(1 << 16)
    attr = bytearray(128)
    n = len(code.raw) // 8
    struct.pack_into("<IIQQIIQ", attr, 0, prog_type, n, ctypes.addressof(code), ctypes.addressof(lic), 1, len(log), ctypes.addressof(log))
    struct.pack_into("<I", attr, 68, attach_type)
    struct.pack_into("<I", attr, 108, attach_btf_id)
    try:
        return bpf(BPF_PROG_LOAD, attr, "BPF_PROG_LOAD")
    except OSError as err:
        raise OSError(err.errno, f"{err.strerror}\n{log.value.decode(errors='replace')}") from None


def link_create(prog_fd: int, attach_type: int, target_fd: int = 0) -> int:
    """BPF_LINK_CREATE (fentry/fexit need no target: the BTF id was given at load)."""
    attr = bytearray(64)
    struct.pack_into("<IIII", attr, 0, prog_fd, target_fd, attach_type, 0)
    return bpf(BPF_LINK_CREATE, attr, "BPF_LINK_CREATE")


def test_run(prog_fd: int) -> int:
    """BPF_PROG_TEST_RUN without input; return the program's return value."""
    attr = bytearray(80)
    struct.pack_into("<I", attr, 0, prog_fd)
    bpf(BPF_PROG_TEST_RUN, attr, "BPF_PROG_TEST_RUN")
    return struct.unpack_from("<I", attr, 4)[0]


def kprobe_perf_event(func: str, *, retprobe: bool = False) -> int:
    """Open a kprobe through the ``kprobe`` PMU (no tracefs event) on CPU 0; return the perf event fd."""
    pmu = Path("/sys/bus/event_source/devices/kprobe")
    ptype = int((pmu / "type").read_text())
    config = 0
    if retprobe:
        bit = int((pmu / "format/retprobe").read_text().split(":")[1])
        config |= 1 << bit
    name = ctypes.create_string_buffer(func.encode())
    attr = ctypes.create_string_buffer(128)
    struct.pack_into("<IIQQ", attr, 0, ptype, 128, config, 1)  # type, size, config, sample_period
    struct.pack_into("<QQ", attr, 56, ctypes.addressof(name), 0)  # config1 = kprobe_func, config2 = offset
    fd = _libc.syscall(SYS_PERF_EVENT_OPEN, attr, -1, 0, -1, PERF_FLAG_FD_CLOEXEC)
    return _check(fd, f"perf_event_open(kprobe {func})")


def perf_attach_bpf(event_fd: int, prog_fd: int) -> None:
    """Attach *prog_fd* to the perf event and enable it."""
    _libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong]
    _check(_libc.ioctl(event_fd, PERF_EVENT_IOC_SET_BPF, prog_fd), "PERF_EVENT_IOC_SET_BPF")
    _check(_libc.ioctl(event_fd, PERF_EVENT_IOC_ENABLE, 0), "PERF_EVENT_IOC_ENABLE")


def btf_func_id(name: str, path: str = "/sys/kernel/btf/vmlinux") -> int:
    """Find the BTF id of the FUNC named *name* in a BTF blob (KeyError when absent)."""
    data = Path(path).read_bytes()
    magic, _ver, _flags, hdr_len, type_off, type_len, str_off, _str_len = struct.unpack_from("<HBBIIIII", data)
    if magic != 0xEB9F:
        raise ValueError(f"{path} is not BTF")
    strings = hdr_len + str_off
    target = data.find(b"\0" + name.encode() + b"\0", strings - 1)
    pos, end, tid = hdr_len + type_off, hdr_len + type_off + type_len, 0
    # Bytes following the 12-byte header, per kind: fixed part and per-vlen member size.
    extra = {1: (4, 0), 3: (12, 0), 4: (0, 12), 5: (0, 12), 6: (0, 8), 13: (0, 8), 14: (4, 0), 15: (0, 12), 17: (4, 0), 19: (0, 12)}
    unpack = struct.Struct("<II").unpack_from
    while pos < end:
        tid += 1
        name_off, info = unpack(data, pos)
        kind, vlen = (info >> 24) & 0x1F, info & 0xFFFF
        if kind == 12 and strings + name_off == target + 1:
            return tid
        fixed, per = extra.get(kind, (0, 0))
        pos += 12 + fixed + per * vlen
    raise KeyError(f"no BTF FUNC {name} in {path}")


def counter_prog(map_fd: int, ctx_off: int) -> list[Insn]:
    """A program that counts its runs in slot 0 of array element 0 and stores ``*(u64 *)(ctx + ctx_off)`` in slot 1."""
    return [
        Insn(0x79, 6, 1, ctx_off, 0),  # r6 = *(u64 *)(r1 + ctx_off)
        Insn(0x62, 10, 0, -4, 0),  # *(u32 *)(r10 - 4) = 0
        Insn(0x18, 1, 1, 0, map_fd),  # r1 = map (pseudo map fd)
        Insn(0xBF, 2, 10, 0, 0),  # r2 = r10
        Insn(0x07, 2, 0, 0, -4),  # r2 += -4
        Insn(0x85, 0, 0, 0, 1),  # call bpf_map_lookup_elem
        Insn(0x15, 0, 0, 3, 0),  # if r0 == 0 goto out
        Insn(0xB7, 1, 0, 0, 1),  # r1 = 1
        Insn(0xDB, 0, 1, 0, 0),  # lock *(u64 *)(r0 + 0) += r1
        Insn(0x7B, 0, 6, 8, 0),  # *(u64 *)(r0 + 8) = r6
        Insn(0xB7, 0, 0, 0, 0),  # out: r0 = 0
        Insn(0x95, 0, 0, 0, 0),  # exit
    ]
