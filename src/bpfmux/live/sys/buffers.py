"""User memory handed to the kernel: pointers that keep their memory alive."""

from __future__ import annotations

import ctypes
import errno as _errno
from collections.abc import Sequence
from typing import Any

from ...errors import BpfError

__all__ = ["Buf", "cstr", "name16", "u32_array", "u64_array"]


class Buf:
    """A pointer to user memory for the kernel, keeping the memory alive.

    ``bytes`` are copied into a ctypes array (the kernel may read them);
    ``bytearray``, writable ``memoryview``, ctypes objects and numpy arrays are
    passed in place (the kernel may write them).

    :raises BpfError: ``EINVAL`` the buffer is smaller than ``size``.
    """

    __slots__ = ("addr", "size", "_keep")
    addr: int
    size: int
    _keep: object  # what owns the memory at addr

    def __init__(self, data: Any, size: int | None = None) -> None:
        if data is None or (isinstance(data, bytes | bytearray) and not data):
            self.addr, self.size, self._keep = 0, 0, None  # empty input: a NULL pointer, as the kernel expects
            return
        if isinstance(data, bytes):
            arr = (ctypes.c_char * max(len(data), 1)).from_buffer_copy(data or b"\0")
            self.addr, self.size, self._keep = ctypes.addressof(arr), len(data), arr
        elif isinstance(data, ctypes._SimpleCData | ctypes.Structure | ctypes.Array | ctypes.Union):
            self.addr, self.size, self._keep = ctypes.addressof(data), ctypes.sizeof(data), data
        elif hasattr(data, "__array_interface__"):
            self.addr = data.__array_interface__["data"][0]
            self.size, self._keep = data.nbytes, data
        else:
            mv = memoryview(data)
            if mv.readonly:
                arr = (ctypes.c_char * max(mv.nbytes, 1)).from_buffer_copy(mv.tobytes() or b"\0")
            else:
                arr = (ctypes.c_char * mv.nbytes).from_buffer(mv) if mv.nbytes else (ctypes.c_char * 1)()
            self.addr, self.size, self._keep = ctypes.addressof(arr), mv.nbytes, (arr, mv)
        if size is not None and self.size < size:
            raise BpfError(_errno.EINVAL, f"buffer of {self.size} bytes is smaller than the {size} bytes needed")


def cstr(s: str | bytes | None) -> Buf:
    """A NUL-terminated copy of ``s`` (``None``: a NULL pointer)."""
    if s is None:
        return Buf(None)
    b = s.encode() if isinstance(s, str) else s
    return Buf(b + b"\0")


def u32_array(values: Sequence[int]) -> ctypes.Array[ctypes.c_uint32]:
    """A ctypes ``__u32[]`` holding ``values``."""
    return (ctypes.c_uint32 * len(values))(*values)


def u64_array(values: Sequence[int]) -> ctypes.Array[ctypes.c_uint64]:
    """A ctypes ``__u64[]`` holding ``values`` (negative ones wrap to 64 bits)."""
    return (ctypes.c_uint64 * len(values))(*(v & 0xFFFFFFFFFFFFFFFF for v in values))


def name16(name: str | bytes | None) -> bytes:
    """An object name as the kernel takes it: at most 15 bytes (the 16th is the NUL)."""
    b = (name.encode() if isinstance(name, str) else (name or b""))[:15]
    return b
