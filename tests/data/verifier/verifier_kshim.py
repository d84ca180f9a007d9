"""Minimal private ctypes ``bpf(2)`` shim for the verifier's live tests.

Only what the tests need: ``BPF_MAP_CREATE`` and ``BPF_PROG_LOAD`` with a
verifier log. (The project's real syscall layer is ``bpfmux.live.sys``; this
shim keeps the verifier tests independent of it.)
"""

from __future__ import annotations

import ctypes
import os
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_NR_BPF = 321  # x86-64
_BPF_MAP_CREATE = 0
_BPF_PROG_LOAD = 5


def _bpf(cmd: int, attr: bytes) -> tuple[int, int]:
    buf = ctypes.create_string_buffer(attr, len(attr))
    ret = _libc.syscall(_NR_BPF, cmd, buf, len(attr))
    return ret, ctypes.get_errno()


def map_create(map_type: int, key_size: int, value_size: int, max_entries: int, flags: int = 0) -> int:
    """Create a map; returns its fd.

    :raises OSError: the kernel refused.
    """
    attr = struct.pack("<5I", map_type, key_size, value_size, max_entries, flags).ljust(128, b"\0")
    fd, err = _bpf(_BPF_MAP_CREATE, attr)
    if fd < 0:
        raise OSError(err, f"BPF_MAP_CREATE: {os.strerror(err)}")
    return fd


def map_freeze(fd: int) -> None:
    """``BPF_MAP_FREEZE``.

    :raises OSError: the kernel refused.
    """
    ret, err = _bpf(22, struct.pack("<I", fd).ljust(16, b"\0"))
    if ret < 0:
        raise OSError(err, f"BPF_MAP_FREEZE: {os.strerror(err)}")


def prog_load(prog_type: int, insns: bytes, expected_attach: int = 0, attach_btf_id: int = 0,
              flags: int = 0, log_size: int = 1 << 22) -> tuple[int, str]:
    """Load a program; returns ``(0, log)`` when accepted (the fd is closed)
    or ``(errno, log)`` when rejected."""
    log = ctypes.create_string_buffer(log_size)
    code = ctypes.create_string_buffer(insns, len(insns))
    lic = ctypes.create_string_buffer(b"GPL")
    attr = bytearray(160)
    struct.pack_into("<IIQQIIQ", attr, 0, prog_type, len(insns) // 8, ctypes.addressof(code),
                     ctypes.addressof(lic), 1, log_size, ctypes.addressof(log))
    struct.pack_into("<I", attr, 44, flags)
    struct.pack_into("<I", attr, 68, expected_attach)
    struct.pack_into("<I", attr, 108, attach_btf_id)
    fd, err = _bpf(_BPF_PROG_LOAD, bytes(attr))
    text = log.value.decode(errors="replace")
    if fd >= 0:
        os.close(fd)
        return 0, text
    return err, text
