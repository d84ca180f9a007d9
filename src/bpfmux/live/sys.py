"""The system-call layer of the live backend: ``bpf(2)``, ``perf_event_open(2)``
and the perf ioctls, through :mod:`ctypes` (no libbpf).

Every ``bpf(2)`` command has its own :class:`ctypes.Structure` laid out as its
member of the uapi ``union bpf_attr`` (facts from ``include/uapi/linux/bpf.h``,
checked against the running kernel's BTF by ``tests/live/test_sys_layout.py``).
The size passed to the kernel is the size of that structure, so the kernel
zero-fills whatever newer fields it knows and we don't.

File descriptors come back as :class:`Fd` objects that own the descriptor:
``close()`` is idempotent, they are context managers, and a finalizer closes
(and warns about) one that was dropped unclosed, so nothing leaks.

A failed call raises :class:`bpfmux.errors.BpfError` (an ``OSError``) with the
kernel's errno and a message that says what to do; a rejected program raises
:class:`bpfmux.errors.VerifierError` carrying the verifier log.

Tests can replace the raw system calls (``_raw_bpf``, ``_raw_perf_event_open``,
``_raw_ioctl``) to exercise this module without a kernel.
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import errno as _errno
import os
import platform
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ENOTSUPP, BpfError, NotSupportedError, VerifierError
from ..uapi import AttachType, Cmd

# ---------------------------------------------------------------------------
# raw system calls
# ---------------------------------------------------------------------------

_NR = {
    "x86_64": {"bpf": 321, "perf_event_open": 298},
    "aarch64": {"bpf": 280, "perf_event_open": 241},
    "riscv64": {"bpf": 280, "perf_event_open": 241},
    "ppc64le": {"bpf": 361, "perf_event_open": 319},
    "s390x": {"bpf": 351, "perf_event_open": 331},
}

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long
_ioctl = _libc.ioctl
_ioctl.restype = ctypes.c_int
_ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]


def _nr(name: str) -> int:
    table = _NR.get(platform.machine())
    if table is None:
        raise NotSupportedError(name, f"bpfmux does not know the {name} syscall number on {platform.machine()}")
    return table[name]


def _raw_bpf(cmd: int, attr_addr: int, size: int) -> int:
    """``syscall(__NR_bpf, cmd, attr, size)``; returns the result or ``-errno``."""
    ret = _syscall(ctypes.c_long(_nr("bpf")), ctypes.c_int(cmd), ctypes.c_void_p(attr_addr), ctypes.c_uint(size))
    return -ctypes.get_errno() if ret < 0 else ret


def _raw_perf_event_open(attr_addr: int, pid: int, cpu: int, group_fd: int, flags: int) -> int:
    """``syscall(__NR_perf_event_open, ...)``; returns the fd or ``-errno``."""
    ret = _syscall(
        ctypes.c_long(_nr("perf_event_open")),
        ctypes.c_void_p(attr_addr),
        ctypes.c_int(pid),
        ctypes.c_int(cpu),
        ctypes.c_int(group_fd),
        ctypes.c_ulong(flags),
    )
    return -ctypes.get_errno() if ret < 0 else ret


def _raw_ioctl(fd: int, request: int, arg: int) -> int:
    """``ioctl(fd, request, arg)``; returns the result or ``-errno``."""
    ret = _ioctl(fd, request, ctypes.c_void_p(arg))
    return -ctypes.get_errno() if ret < 0 else ret


# ---------------------------------------------------------------------------
# owned file descriptors
# ---------------------------------------------------------------------------


class Fd:
    """An owned file descriptor (a map, program, link, BTF object, perf event).

    ``int(fd)`` and ``fd.fileno()`` give the number; :meth:`close` releases it
    (idempotent); :meth:`detach` hands ownership to the caller. A dropped
    ``Fd`` that was never closed is closed by its finalizer, with a
    :class:`ResourceWarning`.

    :ivar kind: what it refers to (``"map"``, ``"prog"``, ``"link"``, …),
        used in messages.
    :raises BpfError: ``EBADF`` a negative descriptor.
    """

    __slots__ = ("_fd", "kind", "__weakref__")

    def __init__(self, fd: int, kind: str = "fd") -> None:
        if fd < 0:
            raise BpfError(_errno.EBADF, f"invalid {kind} file descriptor {fd}")
        self._fd = fd
        self.kind = kind

    @property
    def fd(self) -> int:
        """The descriptor number.

        :raises BpfError: ``EBADF`` once closed.
        """
        if self._fd < 0:
            raise BpfError(_errno.EBADF, f"{self.kind} file descriptor is closed; the object was closed before this use")
        return self._fd

    def fileno(self) -> int:
        """The descriptor number (so ``Fd`` works with :mod:`select`).

        :raises BpfError: ``EBADF`` once closed.
        """
        return self.fd

    __int__ = fileno
    __index__ = fileno

    @property
    def closed(self) -> bool:
        """True once closed or detached."""
        return self._fd < 0

    def close(self) -> None:
        """Close the descriptor; a second call does nothing."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:  # already gone: nothing left to release
                pass

    def detach(self) -> int:
        """Give up ownership and return the number (the caller must close it).

        :raises BpfError: ``EBADF`` once closed.
        """
        fd = self.fd
        self._fd = -1
        return fd

    def dup(self) -> Fd:
        """A new owned descriptor for the same object (``F_DUPFD_CLOEXEC``).

        :raises BpfError: ``EBADF`` once closed, or the ``fcntl`` error.
        """
        import fcntl

        try:
            return Fd(fcntl.fcntl(self.fd, fcntl.F_DUPFD_CLOEXEC, 3), self.kind)
        except OSError as err:
            raise BpfError(err.errno or _errno.EBADF, f"cannot duplicate {self.kind} fd: {err.strerror}") from None

    def __enter__(self) -> Fd:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def close_on_error(self) -> Iterator[Fd]:
        """Keep the descriptor open only if the ``with`` body succeeds: on any
        exception (Ctrl-C included) it is closed and the exception goes on.
        For handing a new descriptor to the object that will own it::

            with fd.close_on_error():
                return LiveMap(fd, info)
        """
        try:
            yield self
        except BaseException:
            self.close()
            raise

    def __del__(self) -> None:
        if getattr(self, "_fd", -1) >= 0:
            warnings.warn(f"unclosed {self!r}; close() it or use it as a context manager", ResourceWarning, stacklevel=2)
            self.close()

    def __repr__(self) -> str:
        return f"<Fd {self.kind} {'closed' if self._fd < 0 else self._fd}>"


def _fdnum(fd: Fd | int | None) -> int:
    if fd is None:
        return 0
    if isinstance(fd, Fd):
        return fd.fd
    return int(fd)


# ---------------------------------------------------------------------------
# buffers
# ---------------------------------------------------------------------------


class _Buf:
    """A pointer to user memory for the kernel, keeping the memory alive.

    ``bytes`` are copied into a ctypes array (the kernel may read them);
    ``bytearray``, writable ``memoryview``, ctypes objects and numpy arrays are
    passed in place (the kernel may write them).
    """

    __slots__ = ("addr", "size", "_keep")

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


def _cstr(s: str | bytes | None) -> _Buf:
    if s is None:
        return _Buf(None)
    b = s.encode() if isinstance(s, str) else s
    return _Buf(b + b"\0")


def _u32_array(values: Sequence[int]) -> ctypes.Array:
    return (ctypes.c_uint32 * len(values))(*values)


def _u64_array(values: Sequence[int]) -> ctypes.Array:
    return (ctypes.c_uint64 * len(values))(*(v & 0xFFFFFFFFFFFFFFFF for v in values))


def _name16(name: str | bytes | None) -> bytes:
    b = (name.encode() if isinstance(name, str) else (name or b""))[:15]
    return b


# ---------------------------------------------------------------------------
# union bpf_attr, one structure per command
# ---------------------------------------------------------------------------

u8, u16, u32, s32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_int32, ctypes.c_uint64


class _S(ctypes.Structure):
    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n, *_ in self._fields_ if not n.startswith("_"))
        return f"{type(self).__name__}({fields})"


class MapCreateAttr(_S):
    """``BPF_MAP_CREATE``."""

    _fields_ = [
        ("map_type", u32),
        ("key_size", u32),
        ("value_size", u32),
        ("max_entries", u32),
        ("map_flags", u32),
        ("inner_map_fd", u32),
        ("numa_node", u32),
        ("map_name", ctypes.c_char * 16),
        ("map_ifindex", u32),
        ("btf_fd", u32),
        ("btf_key_type_id", u32),
        ("btf_value_type_id", u32),
        ("btf_vmlinux_value_type_id", u32),
        ("map_extra", u64),
        ("value_type_btf_obj_fd", s32),
        ("map_token_fd", s32),
        ("excl_prog_hash", u64),
        ("excl_prog_hash_size", u32),
    ]


class MapElemAttr(_S):
    """``BPF_MAP_LOOKUP_ELEM``, ``UPDATE``, ``DELETE``, ``GET_NEXT_KEY``,
    ``LOOKUP_AND_DELETE_ELEM``, ``FREEZE`` (``value`` doubles as ``next_key``)."""

    _fields_ = [("map_fd", u32), ("key", u64), ("value", u64), ("flags", u64)]


class MapBatchAttr(_S):
    """``BPF_MAP_*_BATCH`` (the ``batch`` member)."""

    _fields_ = [
        ("in_batch", u64),
        ("out_batch", u64),
        ("keys", u64),
        ("values", u64),
        ("count", u32),
        ("map_fd", u32),
        ("elem_flags", u64),
        ("flags", u64),
    ]


class ProgLoadAttr(_S):
    """``BPF_PROG_LOAD``."""

    _fields_ = [
        ("prog_type", u32),
        ("insn_cnt", u32),
        ("insns", u64),
        ("license", u64),
        ("log_level", u32),
        ("log_size", u32),
        ("log_buf", u64),
        ("kern_version", u32),
        ("prog_flags", u32),
        ("prog_name", ctypes.c_char * 16),
        ("prog_ifindex", u32),
        ("expected_attach_type", u32),
        ("prog_btf_fd", u32),
        ("func_info_rec_size", u32),
        ("func_info", u64),
        ("func_info_cnt", u32),
        ("line_info_rec_size", u32),
        ("line_info", u64),
        ("line_info_cnt", u32),
        ("attach_btf_id", u32),
        ("attach_prog_fd", u32),  # union with attach_btf_obj_fd
        ("core_relo_cnt", u32),
        ("fd_array", u64),
        ("core_relos", u64),
        ("core_relo_rec_size", u32),
        ("log_true_size", u32),
        ("prog_token_fd", s32),
        ("fd_array_cnt", u32),
        ("signature", u64),
        ("signature_size", u32),
        ("keyring_id", s32),
    ]


class ObjAttr(_S):
    """``BPF_OBJ_PIN`` / ``BPF_OBJ_GET``."""

    _fields_ = [("pathname", u64), ("bpf_fd", u32), ("file_flags", u32), ("path_fd", s32)]


class ProgAttachAttr(_S):
    """``BPF_PROG_ATTACH`` / ``BPF_PROG_DETACH``."""

    _fields_ = [
        ("target_fd", u32),
        ("attach_bpf_fd", u32),
        ("attach_type", u32),
        ("attach_flags", u32),
        ("replace_bpf_fd", u32),
        ("relative_fd", u32),
        ("expected_revision", u64),
    ]


class TestRunAttr(_S):
    """``BPF_PROG_TEST_RUN`` (the ``test`` member)."""

    __test__ = False  # not a pytest test class
    _fields_ = [
        ("prog_fd", u32),
        ("retval", u32),
        ("data_size_in", u32),
        ("data_size_out", u32),
        ("data_in", u64),
        ("data_out", u64),
        ("repeat", u32),
        ("duration", u32),
        ("ctx_size_in", u32),
        ("ctx_size_out", u32),
        ("ctx_in", u64),
        ("ctx_out", u64),
        ("flags", u32),
        ("cpu", u32),
        ("batch_size", u32),
    ]


class GetIdAttr(_S):
    """``BPF_*_GET_NEXT_ID`` / ``BPF_*_GET_FD_BY_ID`` (``start_id`` is also
    ``prog_id``/``map_id``/``btf_id``/``link_id``)."""

    _fields_ = [("start_id", u32), ("next_id", u32), ("open_flags", u32), ("fd_by_id_token_fd", s32)]


class InfoAttr(_S):
    """``BPF_OBJ_GET_INFO_BY_FD`` (the ``info`` member)."""

    _fields_ = [("bpf_fd", u32), ("info_len", u32), ("info", u64)]


class QueryAttr(_S):
    """``BPF_PROG_QUERY`` (the ``query`` member)."""

    _fields_ = [
        ("target_fd", u32),
        ("attach_type", u32),
        ("query_flags", u32),
        ("attach_flags", u32),
        ("prog_ids", u64),
        ("prog_cnt", u32),
        ("prog_attach_flags", u64),
        ("link_ids", u64),
        ("link_attach_flags", u64),
        ("revision", u64),
    ]


class RawTracepointAttr(_S):
    """``BPF_RAW_TRACEPOINT_OPEN``."""

    _fields_ = [("name", u64), ("prog_fd", u32), ("cookie", u64)]


class BtfLoadAttr(_S):
    """``BPF_BTF_LOAD``."""

    _fields_ = [
        ("btf", u64),
        ("btf_log_buf", u64),
        ("btf_size", u32),
        ("btf_log_size", u32),
        ("btf_log_level", u32),
        ("btf_log_true_size", u32),
        ("btf_flags", u32),
        ("btf_token_fd", s32),
    ]


class TaskFdQueryAttr(_S):
    """``BPF_TASK_FD_QUERY``."""

    _fields_ = [
        ("pid", u32),
        ("fd", u32),
        ("flags", u32),
        ("buf_len", u32),
        ("buf", u64),
        ("prog_id", u32),
        ("fd_type", u32),
        ("probe_offset", u64),
        ("probe_addr", u64),
    ]


class _LcIter(_S):
    _fields_ = [("iter_info", u64), ("iter_info_len", u32)]


class _LcPerfEvent(_S):
    _fields_ = [("bpf_cookie", u64)]


class _LcKprobeMulti(_S):
    _fields_ = [("flags", u32), ("cnt", u32), ("syms", u64), ("addrs", u64), ("cookies", u64)]


class _LcTracing(_S):
    _fields_ = [("target_btf_id", u32), ("cookie", u64)]


class _LcNetfilter(_S):
    _fields_ = [("pf", u32), ("hooknum", u32), ("priority", s32), ("flags", u32)]


class _LcRelative(_S):
    _fields_ = [("relative_fd", u32), ("expected_revision", u64)]


class _LcUprobeMulti(_S):
    _fields_ = [
        ("path", u64),
        ("offsets", u64),
        ("ref_ctr_offsets", u64),
        ("cookies", u64),
        ("cnt", u32),
        ("flags", u32),
        ("pid", u32),
    ]


class _LcTracingMulti(_S):
    """The 2026 mainline ``link_create.tracing_multi {ids, cookies, cnt}``:
    ``ids`` points at ``cnt`` u32 BTF ids, ``cookies`` at ``cnt`` u64 (or 0)."""

    _fields_ = [("ids", u64), ("cookies", u64), ("cnt", u32)]


class _LcUnion(ctypes.Union):
    _anonymous_ = ("iter",)
    _fields_ = [
        ("target_btf_id", u32),
        ("iter", _LcIter),
        ("perf_event", _LcPerfEvent),
        ("kprobe_multi", _LcKprobeMulti),
        ("tracing", _LcTracing),
        ("netfilter", _LcNetfilter),
        ("tcx", _LcRelative),
        ("uprobe_multi", _LcUprobeMulti),
        ("netkit", _LcRelative),
        ("cgroup", _LcRelative),
        ("tracing_multi", _LcTracingMulti),
    ]


class LinkCreateAttr(_S):
    """``BPF_LINK_CREATE``; the per-kind arguments are in the anonymous union
    ``u`` (``attr.perf_event.bpf_cookie`` works as in C)."""

    _anonymous_ = ("u",)
    _fields_ = [("prog_fd", u32), ("target_fd", u32), ("attach_type", u32), ("flags", u32), ("u", _LcUnion)]


class LinkUpdateAttr(_S):
    """``BPF_LINK_UPDATE``."""

    _fields_ = [("link_fd", u32), ("new_prog_fd", u32), ("flags", u32), ("old_prog_fd", u32)]


class LinkDetachAttr(_S):
    """``BPF_LINK_DETACH``."""

    _fields_ = [("link_fd", u32)]


class EnableStatsAttr(_S):
    """``BPF_ENABLE_STATS``."""

    _fields_ = [("type", u32)]


class IterCreateAttr(_S):
    """``BPF_ITER_CREATE``."""

    _fields_ = [("link_fd", u32), ("flags", u32)]


class ProgBindMapAttr(_S):
    """``BPF_PROG_BIND_MAP``."""

    _fields_ = [("prog_fd", u32), ("map_fd", u32), ("flags", u32)]


# --- info structures (BPF_OBJ_GET_INFO_BY_FD) -------------------------------


class ProgInfo(_S):
    """``struct bpf_prog_info``."""

    _fields_ = [
        ("type", u32),
        ("id", u32),
        ("tag", u8 * 8),
        ("jited_prog_len", u32),
        ("xlated_prog_len", u32),
        ("jited_prog_insns", u64),
        ("xlated_prog_insns", u64),
        ("load_time", u64),
        ("created_by_uid", u32),
        ("nr_map_ids", u32),
        ("map_ids", u64),
        ("name", ctypes.c_char * 16),
        ("ifindex", u32),
        ("gpl_compatible", u32),  # bit 0
        ("netns_dev", u64),
        ("netns_ino", u64),
        ("nr_jited_ksyms", u32),
        ("nr_jited_func_lens", u32),
        ("jited_ksyms", u64),
        ("jited_func_lens", u64),
        ("btf_id", u32),
        ("func_info_rec_size", u32),
        ("func_info", u64),
        ("nr_func_info", u32),
        ("nr_line_info", u32),
        ("line_info", u64),
        ("jited_line_info", u64),
        ("nr_jited_line_info", u32),
        ("line_info_rec_size", u32),
        ("jited_line_info_rec_size", u32),
        ("nr_prog_tags", u32),
        ("prog_tags", u64),
        ("run_time_ns", u64),
        ("run_cnt", u64),
        ("recursion_misses", u64),
        ("verified_insns", u32),
        ("attach_btf_obj_id", u32),
        ("attach_btf_id", u32),
    ]


class MapInfo(_S):
    """``struct bpf_map_info``."""

    _fields_ = [
        ("type", u32),
        ("id", u32),
        ("key_size", u32),
        ("value_size", u32),
        ("max_entries", u32),
        ("map_flags", u32),
        ("name", ctypes.c_char * 16),
        ("ifindex", u32),
        ("btf_vmlinux_value_type_id", u32),
        ("netns_dev", u64),
        ("netns_ino", u64),
        ("btf_id", u32),
        ("btf_key_type_id", u32),
        ("btf_value_type_id", u32),
        ("btf_vmlinux_id", u32),
        ("map_extra", u64),
        ("hash", u64),
        ("hash_size", u32),
    ]


class BtfInfo(_S):
    """``struct bpf_btf_info``."""

    _fields_ = [("btf", u64), ("btf_size", u32), ("id", u32), ("name", u64), ("name_len", u32), ("kernel_btf", u32)]


class _LiRawTp(_S):
    _fields_ = [("tp_name", u64), ("tp_name_len", u32), ("cookie", u64)]


class _LiTracing(_S):
    _fields_ = [("attach_type", u32), ("target_obj_id", u32), ("target_btf_id", u32), ("cookie", u64)]


class _LiKprobeMulti(_S):
    _fields_ = [("addrs", u64), ("count", u32), ("flags", u32), ("missed", u64), ("cookies", u64)]


class _LiUprobeMulti(_S):
    _fields_ = [
        ("path", u64),
        ("offsets", u64),
        ("ref_ctr_offsets", u64),
        ("cookies", u64),
        ("path_size", u32),
        ("count", u32),
        ("flags", u32),
        ("pid", u32),
    ]


class _LiPeUprobe(_S):
    _fields_ = [("file_name", u64), ("name_len", u32), ("offset", u32), ("cookie", u64), ("ref_ctr_offset", u64)]


class _LiPeKprobe(_S):
    _fields_ = [
        ("func_name", u64),
        ("name_len", u32),
        ("offset", u32),
        ("addr", u64),
        ("missed", u64),
        ("cookie", u64),
    ]


class _LiPeTracepoint(_S):
    _fields_ = [("tp_name", u64), ("name_len", u32), ("cookie", u64)]


class _LiPeEvent(_S):
    _fields_ = [("config", u64), ("type", u32), ("cookie", u64)]


class _LiPeUnion(ctypes.Union):
    _fields_ = [("uprobe", _LiPeUprobe), ("kprobe", _LiPeKprobe), ("tracepoint", _LiPeTracepoint), ("event", _LiPeEvent)]


class _LiPerfEvent(_S):
    _anonymous_ = ("u",)
    _fields_ = [("type", u32), ("u", _LiPeUnion)]


class _LiIfAttach(_S):
    _fields_ = [("ifindex", u32), ("attach_type", u32)]


class _LiMapAttach(_S):
    _fields_ = [("map_id", u32), ("attach_type", u32)]


class _LiNetns(_S):
    _fields_ = [("netns_ino", u32), ("attach_type", u32)]


class _LiUnion(ctypes.Union):
    _fields_ = [
        ("raw_tracepoint", _LiRawTp),
        ("tracing", _LiTracing),
        ("kprobe_multi", _LiKprobeMulti),
        ("uprobe_multi", _LiUprobeMulti),
        ("perf_event", _LiPerfEvent),
        ("netns", _LiNetns),
        ("tcx", _LiIfAttach),
        ("netkit", _LiIfAttach),
        ("sockmap", _LiMapAttach),
    ]


class LinkInfo(_S):
    """``struct bpf_link_info`` (the members bpfmux reads; the union is
    sized to the kernel's; ``info.perf_event`` works as in C)."""

    _anonymous_ = ("u",)
    _fields_ = [("type", u32), ("id", u32), ("prog_id", u32), ("u", _LiUnion)]


class FuncInfo(_S):
    """``struct bpf_func_info``."""

    _fields_ = [("insn_off", u32), ("type_id", u32)]


class LineInfo(_S):
    """``struct bpf_line_info``."""

    _fields_ = [("insn_off", u32), ("file_name_off", u32), ("line_off", u32), ("line_col", u32)]


# ---------------------------------------------------------------------------
# constants that live next to the commands
# ---------------------------------------------------------------------------

#: ``BPF_F_REPLACE`` (link update / prog attach).
F_REPLACE = 1 << 2
#: ``BPF_F_QUERY_EFFECTIVE``.
F_QUERY_EFFECTIVE = 1 << 0
#: ``BPF_F_TEST_RUN_ON_CPU``.
F_TEST_RUN_ON_CPU = 1 << 0
#: ``BPF_F_TEST_XDP_LIVE_FRAMES``.
F_TEST_XDP_LIVE_FRAMES = 1 << 1
#: ``BPF_F_RDONLY``/``BPF_F_WRONLY`` as ``open_flags``/``file_flags``.
F_RDONLY = 1 << 3
F_WRONLY = 1 << 4
#: Largest verifier log buffer the kernel accepts (``UINT_MAX >> 2``).
LOG_SIZE_MAX = (1 << 30) - 1


class StatsType(enum.IntEnum):
    """``enum bpf_stats_type``."""

    RUN_TIME = 0


class TaskFdType(enum.IntEnum):
    """``enum bpf_task_fd_type``."""

    RAW_TRACEPOINT = 0
    TRACEPOINT = 1
    KPROBE = 2
    KRETPROBE = 3
    UPROBE = 4
    URETPROBE = 5


class ObjKind(enum.Enum):
    """The four id spaces: programs, maps, BTF objects, links."""

    PROG = (Cmd.PROG_GET_NEXT_ID, Cmd.PROG_GET_FD_BY_ID)
    MAP = (Cmd.MAP_GET_NEXT_ID, Cmd.MAP_GET_FD_BY_ID)
    BTF = (Cmd.BTF_GET_NEXT_ID, Cmd.BTF_GET_FD_BY_ID)
    LINK = (Cmd.LINK_GET_NEXT_ID, Cmd.LINK_GET_FD_BY_ID)


# ---------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------

_HINTS: dict[int, str] = {
    _errno.EPERM: "run as root (CAP_BPF + CAP_PERFMON, or CAP_SYS_ADMIN); check kernel.unprivileged_bpf_disabled and lockdown",
    _errno.EACCES: "permission denied by the kernel (capabilities, LSM or verifier); run as root",
    _errno.ENOSYS: "this kernel has no bpf(2) (CONFIG_BPF_SYSCALL is off)",
    _errno.E2BIG: "an argument exceeds a kernel limit, or this kernel does not know a non-zero field bpfmux set",
    _errno.ENOMEM: "the kernel is out of memory for this object (memcg limit or RLIMIT_MEMLOCK on old kernels)",
    _errno.EBADF: "a file descriptor passed to the kernel is closed or of the wrong kind",
    _errno.EOPNOTSUPP: "this kernel does not support the operation",
    ENOTSUPP: "this kernel does not support the operation",  # kernel-internal, leaks out of bpf(2)
}


def _error(what: str, err: int, hint: str = "") -> BpfError:
    hint = hint or _HINTS.get(err, "")
    msg = f"{what} failed" + (f": {hint}" if hint else "")
    return BpfError(err, msg)


def bpf(cmd: Cmd | int, attr: ctypes.Structure, what: str = "", hint: str = "") -> int:
    """Issue one ``bpf(2)`` command with ``attr`` (size = ``sizeof(attr)``).

    Retries on ``EINTR`` (and ``EAGAIN`` for ``BPF_PROG_LOAD``, as the kernel
    asks).

    :returns: the command's non-negative result (an fd for creating commands).
    :raises BpfError: the kernel's errno, with ``what``/``hint`` in the message.
    """
    addr, size = ctypes.addressof(attr), ctypes.sizeof(attr)
    for _attempt in range(5):
        ret = _raw_bpf(int(cmd), addr, size)
        if ret >= 0:
            return ret
        if -ret == _errno.EINTR or (-ret == _errno.EAGAIN and int(cmd) == Cmd.PROG_LOAD):
            continue
        break
    name = what or f"bpf({_cmd_name(cmd)})"
    raise _error(name, -ret, hint)


def _cmd_name(cmd: int) -> str:
    try:
        return f"BPF_{Cmd(cmd).name}"
    except ValueError:
        return str(int(cmd))


# ---------------------------------------------------------------------------
# maps
# ---------------------------------------------------------------------------


def map_create(
    map_type: int,
    key_size: int,
    value_size: int,
    max_entries: int,
    *,
    flags: int = 0,
    name: str = "",
    inner_map_fd: Fd | int | None = None,
    numa_node: int = 0,
    btf_fd: Fd | int | None = None,
    btf_key_type_id: int = 0,
    btf_value_type_id: int = 0,
    btf_vmlinux_value_type_id: int = 0,
    map_extra: int = 0,
    map_ifindex: int = 0,
) -> Fd:
    """``BPF_MAP_CREATE``.

    :returns: the map's fd.
    :raises BpfError: ``EINVAL`` bad sizes/flags for this map type, ``EPERM``
        not privileged, ``ENOMEM``.
    """
    a = MapCreateAttr(
        map_type=map_type,
        key_size=key_size,
        value_size=value_size,
        max_entries=max_entries,
        map_flags=flags,
        inner_map_fd=_fdnum(inner_map_fd),
        numa_node=numa_node,
        map_name=_name16(name),
        map_ifindex=map_ifindex,
        btf_fd=_fdnum(btf_fd),
        btf_key_type_id=btf_key_type_id,
        btf_value_type_id=btf_value_type_id,
        btf_vmlinux_value_type_id=btf_vmlinux_value_type_id,
        map_extra=map_extra,
    )
    label = f"creating map {name!r}" if name else "creating a map"
    hints = {_errno.EINVAL: "the kernel rejected its type, sizes or flags; check the map definition"}
    return Fd(_bpf_or(Cmd.MAP_CREATE, a, label, hints), "map")


def _bpf_or(cmd: Cmd, attr: ctypes.Structure, what: str, hints: dict[int, str]) -> int:
    try:
        return bpf(cmd, attr, what)
    except BpfError as err:
        if err.errno in hints:
            raise _error(what, err.errno, hints[err.errno]) from None
        raise


def _elem(cmd: Cmd, map_fd: Fd | int, key: _Buf, value: _Buf, flags: int) -> int:
    a = MapElemAttr(map_fd=_fdnum(map_fd), key=key.addr, value=value.addr, flags=flags)
    ret = _raw_bpf(int(cmd), ctypes.addressof(a), ctypes.sizeof(a))
    while ret == -_errno.EINTR:
        ret = _raw_bpf(int(cmd), ctypes.addressof(a), ctypes.sizeof(a))
    return ret


def map_lookup_elem(map_fd: Fd | int, key: Any, value_out: Any, flags: int = 0) -> bool:
    """``BPF_MAP_LOOKUP_ELEM`` into ``value_out`` (a writable buffer).

    :returns: False when the key is absent (``ENOENT``), else True.
    :raises BpfError: any other error.
    """
    ret = _elem(Cmd.MAP_LOOKUP_ELEM, map_fd, _Buf(key), _Buf(value_out), flags)
    if ret >= 0:
        return True
    if ret == -_errno.ENOENT:
        return False
    raise _error("map lookup", -ret)


def map_lookup_and_delete_elem(map_fd: Fd | int, key: Any, value_out: Any, flags: int = 0) -> bool:
    """``BPF_MAP_LOOKUP_AND_DELETE_ELEM`` (``key`` is None for queue/stack).

    :returns: False when absent/empty (``ENOENT``), else True.
    :raises BpfError: any other error (``ENOTSUPP`` for map types without it).
    """
    ret = _elem(Cmd.MAP_LOOKUP_AND_DELETE_ELEM, map_fd, _Buf(key), _Buf(value_out), flags)
    if ret >= 0:
        return True
    if ret == -_errno.ENOENT:
        return False
    raise _error("map lookup-and-delete", -ret)


def map_update_elem(map_fd: Fd | int, key: Any, value: Any, flags: int = 0) -> None:
    """``BPF_MAP_UPDATE_ELEM`` with ``UpdateFlags``.

    :raises BpfError: ``EEXIST`` (NOEXIST given and present), ``ENOENT`` (EXIST
        given and absent), ``E2BIG`` (map full), ``EINVAL``.
    """
    ret = _elem(Cmd.MAP_UPDATE_ELEM, map_fd, _Buf(key), _Buf(value), flags)
    if ret < 0:
        hints = {
            _errno.E2BIG: "the map is full (max_entries reached)",
            _errno.EEXIST: "the key exists and BPF_NOEXIST was given",
            _errno.ENOENT: "the key is absent and BPF_EXIST was given",
            _errno.EINVAL: "bad key/value/flags for this map type (array index out of range?)",
        }
        raise _error("map update", -ret, hints.get(-ret, ""))


def map_delete_elem(map_fd: Fd | int, key: Any) -> bool:
    """``BPF_MAP_DELETE_ELEM``.

    :returns: False when the key was absent (``ENOENT``).
    :raises BpfError: any other error (``EINVAL`` for arrays, which cannot
        delete).
    """
    ret = _elem(Cmd.MAP_DELETE_ELEM, map_fd, _Buf(key), _Buf(None), 0)
    if ret >= 0:
        return True
    if ret == -_errno.ENOENT:
        return False
    raise _error("map delete", -ret, "array maps cannot delete elements" if ret == -_errno.EINVAL else "")


def map_get_next_key(map_fd: Fd | int, key: Any, next_key_out: Any) -> bool:
    """``BPF_MAP_GET_NEXT_KEY``: the key after ``key`` (None: the first key).

    :returns: False at the end of the map (``ENOENT``).
    :raises BpfError: any other error.
    """
    ret = _elem(Cmd.MAP_GET_NEXT_KEY, map_fd, _Buf(key), _Buf(next_key_out), 0)
    if ret >= 0:
        return True
    if ret == -_errno.ENOENT:
        return False
    raise _error("map get-next-key", -ret)


def map_freeze(map_fd: Fd | int) -> None:
    """``BPF_MAP_FREEZE``: no more writes from user space.

    :raises BpfError: ``EBUSY`` (writable mmap exists), ``ENOTSUPP``.
    """
    bpf(Cmd.MAP_FREEZE, MapElemAttr(map_fd=_fdnum(map_fd)), "freezing a map")


@dataclass(frozen=True, slots=True)
class BatchResult:
    """Outcome of one batch call: elements processed and whether the map is done."""

    count: int
    done: bool


def _batch(cmd: Cmd, map_fd: Fd | int, in_batch: Any, out_batch: Any, keys: Any, values: Any, count: int,
           elem_flags: int, flags: int, what: str) -> BatchResult:
    a = MapBatchAttr(
        in_batch=_Buf(in_batch).addr if in_batch is not None else 0,
        out_batch=0,
        keys=0,
        values=0,
        count=count,
        map_fd=_fdnum(map_fd),
        elem_flags=elem_flags,
        flags=flags,
    )
    bufs = [_Buf(in_batch), _Buf(out_batch), _Buf(keys), _Buf(values)]
    a.in_batch, a.out_batch, a.keys, a.values = (b.addr for b in bufs)
    ret = _raw_bpf(int(cmd), ctypes.addressof(a), ctypes.sizeof(a))
    while ret == -_errno.EINTR:
        ret = _raw_bpf(int(cmd), ctypes.addressof(a), ctypes.sizeof(a))
    if ret >= 0:
        return BatchResult(a.count, False)
    if ret == -_errno.ENOENT:
        return BatchResult(a.count, True)
    raise _error(what, -ret, "this map type has no batch operations" if -ret in (_errno.EINVAL, ENOTSUPP, _errno.EOPNOTSUPP) else "")


def map_lookup_batch(map_fd: Fd | int, in_batch: Any, out_batch: Any, keys: Any, values: Any, count: int,
                     elem_flags: int = 0, delete: bool = False) -> BatchResult:
    """``BPF_MAP_LOOKUP_BATCH`` (or ``LOOKUP_AND_DELETE_BATCH`` with ``delete``).

    ``in_batch`` None starts at the beginning; ``out_batch`` receives the
    position token to pass as ``in_batch`` next time.

    :returns: how many were returned, and ``done`` once the map is exhausted.
    :raises BpfError: ``EINVAL``/``ENOTSUPP`` when the map type has no batch ops,
        ``ENOSPC`` when a hash bucket holds more than ``count`` elements.
    """
    cmd = Cmd.MAP_LOOKUP_AND_DELETE_BATCH if delete else Cmd.MAP_LOOKUP_BATCH
    return _batch(cmd, map_fd, in_batch, out_batch, keys, values, count, elem_flags, 0, "map batch lookup")


def map_update_batch(map_fd: Fd | int, keys: Any, values: Any, count: int, elem_flags: int = 0) -> int:
    """``BPF_MAP_UPDATE_BATCH``.

    :returns: number of elements updated.
    :raises BpfError: as for :func:`map_update_elem`.
    """
    return _batch(Cmd.MAP_UPDATE_BATCH, map_fd, None, None, keys, values, count, elem_flags, 0, "map batch update").count


def map_delete_batch(map_fd: Fd | int, keys: Any, count: int, elem_flags: int = 0) -> int:
    """``BPF_MAP_DELETE_BATCH``.

    :returns: number of elements deleted (stops at the first absent key).
    :raises BpfError: as for :func:`map_delete_elem`.
    """
    res = _batch(Cmd.MAP_DELETE_BATCH, map_fd, None, None, keys, None, count, elem_flags, 0, "map batch delete")
    return res.count


# ---------------------------------------------------------------------------
# programs
# ---------------------------------------------------------------------------


def prog_load(
    prog_type: int,
    insns: bytes,
    license: str = "GPL",
    *,
    name: str = "",
    expected_attach_type: int = 0,
    prog_flags: int = 0,
    kern_version: int = 0,
    prog_btf_fd: Fd | int | None = None,
    func_info: bytes = b"",
    func_info_rec_size: int = 8,
    line_info: bytes = b"",
    line_info_rec_size: int = 16,
    attach_btf_id: int = 0,
    attach_btf_obj_fd: Fd | int | None = None,
    attach_prog_fd: Fd | int | None = None,
    fd_array: Sequence[int] | None = None,
    prog_ifindex: int = 0,
    log_level: int = 0,
    log_size: int = 0,
    retry_with_log: bool = True,
    log_out: list[str] | None = None,
) -> Fd:
    """``BPF_PROG_LOAD``.

    Loads once with ``log_level``; when that fails and ``retry_with_log`` is set
    (and no log was asked for), loads again with log level 1 and a buffer that
    grows until the whole log fits, so the :class:`VerifierError` carries it.
    With ``log_out`` given, the final log (if any) is appended to it.

    :returns: the program's fd.
    :raises VerifierError: the verifier rejected the program (with ``.log``).
    :raises BpfError: any other failure (``EPERM``, ``E2BIG``, …).
    """
    code = _Buf(insns)
    if len(insns) % 8:
        raise BpfError(_errno.EINVAL, f"program {name!r}: instruction bytes ({len(insns)}) not a multiple of 8")
    lic = _cstr(license)
    finfo, linfo = _Buf(func_info or None), _Buf(line_info or None)
    fdarr = _u32_array(list(fd_array)) if fd_array else None
    fdarr_buf = _Buf(fdarr)

    def attempt(level: int, size: int) -> tuple[int, str, int]:
        logbuf = ctypes.create_string_buffer(size) if level and size else None
        a = ProgLoadAttr(
            prog_type=prog_type,
            insn_cnt=len(insns) // 8,
            insns=code.addr,
            license=lic.addr,
            log_level=level if logbuf is not None else 0,
            log_size=size if logbuf is not None else 0,
            log_buf=ctypes.addressof(logbuf) if logbuf is not None else 0,
            kern_version=kern_version,
            prog_flags=prog_flags,
            prog_name=_name16(name),
            prog_ifindex=prog_ifindex,
            expected_attach_type=expected_attach_type,
            prog_btf_fd=_fdnum(prog_btf_fd),
            func_info_rec_size=func_info_rec_size if func_info else 0,
            func_info=finfo.addr,
            func_info_cnt=len(func_info) // func_info_rec_size if func_info else 0,
            line_info_rec_size=line_info_rec_size if line_info else 0,
            line_info=linfo.addr,
            line_info_cnt=len(line_info) // line_info_rec_size if line_info else 0,
            attach_btf_id=attach_btf_id,
            attach_prog_fd=_fdnum(attach_prog_fd) or _fdnum(attach_btf_obj_fd),
            fd_array=fdarr_buf.addr,
        )
        ret = -_errno.EINTR
        tries = 0
        while ret in (-_errno.EINTR, -_errno.EAGAIN) and tries < 5:
            ret = _raw_bpf(Cmd.PROG_LOAD, ctypes.addressof(a), ctypes.sizeof(a))
            tries += 1
        log = logbuf.value.decode(errors="replace") if logbuf is not None else ""
        return ret, log, a.log_true_size

    size = log_size or (1 << 16 if log_level else 0)
    ret, log, true_size = attempt(log_level, size)
    if ret < 0 and log_level and -ret == _errno.ENOSPC:
        # the log did not fit: grow (to the size the kernel says it needs)
        while ret < 0 and -ret == _errno.ENOSPC and size < LOG_SIZE_MAX:
            size = min(LOG_SIZE_MAX, max(size * 4, true_size + 1))
            ret, log, true_size = attempt(log_level, size)
    if ret < 0 and not log_level and retry_with_log and -ret not in (_errno.EPERM, _errno.E2BIG, _errno.EBADF):
        size = 1 << 18
        ret2, log, true_size = attempt(1, size)
        while ret2 < 0 and -ret2 == _errno.ENOSPC and size < LOG_SIZE_MAX:
            size = min(LOG_SIZE_MAX, max(size * 4, true_size + 1))
            ret2, log, true_size = attempt(1, size)
        if ret2 >= 0:  # loads with a log but not without: keep that fd
            ret = ret2
    if log_out is not None and log:
        log_out.append(log)
    if ret >= 0:
        return Fd(ret, "prog")
    err = -ret
    label = f"loading program {name!r}" if name else "loading a program"
    if log.strip():
        msg = f"{label}: the verifier rejected it; see the log for the failing instruction and source line"
        raise VerifierError(err, msg, log=log, program=name)
    hints = {
        _errno.EINVAL: "the kernel rejected its type, attach type, flags or BTF info",
        _errno.E2BIG: "too many instructions, or a field this kernel does not know",
        _errno.EPERM: _HINTS[_errno.EPERM],
        _errno.EACCES: "rejected: privileged helpers or pointer leaks need root",
    }
    raise _error(label, err, hints.get(err, ""))


@dataclass(frozen=True, slots=True)
class TestRunResult:
    """Outcome of ``BPF_PROG_TEST_RUN``."""

    __test__ = False

    retval: int
    duration_ns: int
    data_out: bytes
    ctx_out: bytes


def prog_test_run(
    prog_fd: Fd | int,
    *,
    data_in: bytes | None = None,
    data_size_out: int = 0,
    ctx_in: bytes | None = None,
    ctx_size_out: int = 0,
    repeat: int = 0,
    flags: int = 0,
    cpu: int = 0,
    batch_size: int = 0,
) -> TestRunResult:
    """``BPF_PROG_TEST_RUN``: run the program on ``data_in``/``ctx_in``.

    :raises BpfError: ``ENOTSUPP``/``EINVAL`` the program type cannot be test
        run (or not with these inputs), ``ENOSPC`` output buffer too small.
    """
    din, cin = _Buf(data_in), _Buf(ctx_in)
    dout = ctypes.create_string_buffer(data_size_out) if data_size_out else None
    cout = ctypes.create_string_buffer(ctx_size_out) if ctx_size_out else None
    a = TestRunAttr(
        prog_fd=_fdnum(prog_fd),
        data_size_in=din.size,
        data_size_out=data_size_out,
        data_in=din.addr,
        data_out=ctypes.addressof(dout) if dout is not None else 0,
        repeat=repeat,
        ctx_size_in=cin.size,
        ctx_size_out=ctx_size_out,
        ctx_in=cin.addr,
        ctx_out=ctypes.addressof(cout) if cout is not None else 0,
        flags=flags,
        cpu=cpu,
        batch_size=batch_size,
    )
    _bpf_or(Cmd.PROG_TEST_RUN, a, "test-running a program", {
        _errno.EINVAL: "this program type cannot be test-run with these inputs (check ctx/data sizes)",
        ENOTSUPP: "this program type has no BPF_PROG_TEST_RUN support",
        _errno.EOPNOTSUPP: "this program type has no BPF_PROG_TEST_RUN support",
        _errno.ENOSPC: "the output buffer is too small",
    })
    return TestRunResult(
        retval=a.retval,
        duration_ns=a.duration,
        data_out=dout.raw[: a.data_size_out] if dout is not None else b"",
        ctx_out=cout.raw[: a.ctx_size_out] if cout is not None else b"",
    )


def prog_bind_map(prog_fd: Fd | int, map_fd: Fd | int) -> None:
    """``BPF_PROG_BIND_MAP``: keep a map alive as long as the program.

    :raises BpfError: the kernel's error.
    """
    bpf(Cmd.PROG_BIND_MAP, ProgBindMapAttr(prog_fd=_fdnum(prog_fd), map_fd=_fdnum(map_fd)), "binding a map to a program")


@dataclass(frozen=True, slots=True)
class QueryResult:
    """Outcome of ``BPF_PROG_QUERY``."""

    prog_ids: list[int]
    attach_flags: int
    revision: int


def prog_query(target_fd: Fd | int, attach_type: int, query_flags: int = 0) -> QueryResult:
    """``BPF_PROG_QUERY``: programs attached to a cgroup/netns/device hook.

    :raises BpfError: ``EINVAL`` this attach type cannot be queried on that fd.
    """
    a = QueryAttr(target_fd=_fdnum(target_fd), attach_type=attach_type, query_flags=query_flags)
    bpf(Cmd.PROG_QUERY, a, "querying attached programs")
    cnt = a.prog_cnt
    ids = _u32_array([0] * max(cnt, 1))
    for _ in range(4):
        a = QueryAttr(target_fd=_fdnum(target_fd), attach_type=attach_type, query_flags=query_flags,
                      prog_ids=ctypes.addressof(ids), prog_cnt=len(ids))
        try:
            bpf(Cmd.PROG_QUERY, a, "querying attached programs")
            break
        except BpfError as err:
            if err.errno != _errno.ENOSPC:
                raise
            ids = _u32_array([0] * (a.prog_cnt * 2 + 1))
    return QueryResult(list(ids[: a.prog_cnt]), a.attach_flags, a.revision)


# ---------------------------------------------------------------------------
# BTF
# ---------------------------------------------------------------------------


def btf_load(data: bytes, *, log_level: int = 0, retry_with_log: bool = True) -> Fd:
    """``BPF_BTF_LOAD``: load raw BTF (header, types, strings).

    :returns: the BTF object's fd.
    :raises BpfError: the kernel rejected it; when a log was taken it is in
        the message and in ``err.log``.
    """
    blob = _Buf(data)

    def attempt(level: int) -> tuple[int, str]:
        size = (1 << 20) if level else 0
        logbuf = ctypes.create_string_buffer(size) if size else None
        a = BtfLoadAttr(
            btf=blob.addr,
            btf_size=len(data),
            btf_log_buf=ctypes.addressof(logbuf) if logbuf is not None else 0,
            btf_log_size=size,
            btf_log_level=level,
        )
        ret = _raw_bpf(Cmd.BTF_LOAD, ctypes.addressof(a), ctypes.sizeof(a))
        return ret, (logbuf.value.decode(errors="replace") if logbuf is not None else "")

    ret, log = attempt(log_level)
    if ret < 0 and not log_level and retry_with_log and -ret not in (_errno.EPERM, _errno.E2BIG):
        ret2, log = attempt(1)
        if ret2 >= 0:
            ret = ret2
    if ret >= 0:
        return Fd(ret, "btf")
    tail = "\n".join(log.strip().splitlines()[-8:])
    err = _error("loading BTF", -ret, "the kernel rejected the BTF" + (f":\n{tail}" if tail else ""))
    err.log = log  # type: ignore[attr-defined]
    raise err


# ---------------------------------------------------------------------------
# objects by fd / id
# ---------------------------------------------------------------------------


def obj_get_info_by_fd(fd: Fd | int, info: ctypes.Structure) -> ctypes.Structure:
    """``BPF_OBJ_GET_INFO_BY_FD`` into ``info`` (a :class:`ProgInfo`,
    :class:`MapInfo`, :class:`BtfInfo` or :class:`LinkInfo`, whose pointer
    fields may point at output arrays).

    :returns: ``info``, filled.
    :raises BpfError: ``EINVAL`` wrong info kind for this fd, ``EBADF``.
    """
    a = InfoAttr(bpf_fd=_fdnum(fd), info_len=ctypes.sizeof(info), info=ctypes.addressof(info))
    bpf(Cmd.OBJ_GET_INFO_BY_FD, a, "reading object info")
    return info


def prog_info(fd: Fd | int) -> ProgInfo:
    """Program info (type, id, tag, name, run statistics, …).

    :raises BpfError: ``fd`` is not a program.
    """
    return obj_get_info_by_fd(fd, ProgInfo())  # type: ignore[return-value]


def map_info(fd: Fd | int) -> MapInfo:
    """Map info (type, id, sizes, flags, name, BTF ids).

    :raises BpfError: ``fd`` is not a map.
    """
    return obj_get_info_by_fd(fd, MapInfo())  # type: ignore[return-value]


def link_info(fd: Fd | int) -> LinkInfo:
    """Link info (type, id, program id, per-kind data).

    :raises BpfError: ``fd`` is not a link.
    """
    return obj_get_info_by_fd(fd, LinkInfo())  # type: ignore[return-value]


def btf_info(fd: Fd | int) -> BtfInfo:
    """BTF object info (id, size, name, kernel or not).

    :raises BpfError: ``fd`` is not a BTF object.
    """
    return obj_get_info_by_fd(fd, BtfInfo())  # type: ignore[return-value]


def get_next_id(kind: ObjKind, start_id: int = 0) -> int | None:
    """``BPF_{PROG,MAP,BTF,LINK}_GET_NEXT_ID``.

    :returns: the next id after ``start_id``, or None at the end.
    :raises BpfError: ``EPERM`` (needs CAP_SYS_ADMIN).
    """
    a = GetIdAttr(start_id=start_id)
    ret = _raw_bpf(kind.value[0], ctypes.addressof(a), ctypes.sizeof(a))
    if ret == -_errno.ENOENT:
        return None
    if ret < 0:
        raise _error(f"listing {kind.name.lower()} ids", -ret)
    return a.next_id


def iter_ids(kind: ObjKind) -> list[int]:
    """Every id of ``kind`` the kernel holds right now.

    :raises BpfError: ``EPERM`` (needs CAP_SYS_ADMIN).
    """
    out, cur = [], 0
    while (nxt := get_next_id(kind, cur)) is not None:
        out.append(nxt)
        cur = nxt
    return out


def get_fd_by_id(kind: ObjKind, obj_id: int, open_flags: int = 0) -> Fd:
    """``BPF_{PROG,MAP,BTF,LINK}_GET_FD_BY_ID``.

    :raises BpfError: ``ENOENT`` no such id (it may just have been freed).
    """
    a = GetIdAttr(start_id=obj_id, open_flags=open_flags)
    return Fd(bpf(kind.value[1], a, f"opening {kind.name.lower()} id {obj_id}"), kind.name.lower())


def obj_pin(fd: Fd | int, path: str) -> None:
    """``BPF_OBJ_PIN`` at ``path`` in bpffs.

    :raises BpfError: ``EEXIST`` path taken, ``EPERM``/``EINVAL`` not on bpffs
        (mount one: ``mount -t bpf bpf /sys/fs/bpf``).
    """
    p = _cstr(path)
    bpf(Cmd.OBJ_PIN, ObjAttr(pathname=p.addr, bpf_fd=_fdnum(fd)), f"pinning at {path}")


def obj_get(path: str, file_flags: int = 0, kind: str = "obj") -> Fd:
    """``BPF_OBJ_GET``: open a pinned object.

    :raises BpfError: ``ENOENT`` nothing pinned there.
    """
    p = _cstr(path)
    return Fd(bpf(Cmd.OBJ_GET, ObjAttr(pathname=p.addr, file_flags=file_flags), f"opening pinned {path}"), kind)


# ---------------------------------------------------------------------------
# attaching: raw tracepoints and links
# ---------------------------------------------------------------------------


def raw_tracepoint_open(name: str | None, prog_fd: Fd | int, cookie: int = 0) -> Fd:
    """``BPF_RAW_TRACEPOINT_OPEN``: attach a raw_tp (``name``) or a BTF-typed
    tracing program (``name`` None; the program's attach BTF id decides).

    :returns: the link fd.
    :raises BpfError: ``ENOENT`` no such tracepoint, ``EINVAL``.
    """
    n = _cstr(name)
    a = RawTracepointAttr(name=n.addr, prog_fd=_fdnum(prog_fd), cookie=cookie & 0xFFFFFFFFFFFFFFFF)
    what = f"attaching to raw tracepoint {name!r}" if name else "attaching a tracing program"
    return Fd(_bpf_or(Cmd.RAW_TRACEPOINT_OPEN, a, what, {_errno.ENOENT: "no such tracepoint on this kernel"}), "link")


def link_create(prog_fd: Fd | int, target_fd: Fd | int | None, attach_type: int, flags: int = 0,
                what: str = "", **kind: Any) -> Fd:
    """``BPF_LINK_CREATE`` with a raw per-kind member: ``kind`` is one keyword
    naming a member of ``link_create`` (``target_btf_id=``, ``perf_event=``,
    ``tracing=``, ``kprobe_multi=``, ``uprobe_multi=``, ``tracing_multi=``,
    ``iter=``, ``netfilter=``, ``tcx=``, …) whose value is a dict of fields.
    Prefer the typed helpers below.

    :returns: the link fd.
    :raises BpfError: the kernel's error.
    """
    a = LinkCreateAttr(prog_fd=_fdnum(prog_fd), target_fd=_fdnum(target_fd), attach_type=attach_type, flags=flags)
    for member, fields in kind.items():
        if member == "target_btf_id":
            a.u.target_btf_id = fields
            continue
        sub = getattr(a.u, member)
        for k, v in fields.items():
            setattr(sub, k, v)
    return Fd(bpf(Cmd.LINK_CREATE, a, what or f"creating a {_attach_name(attach_type)} link"), "link")


def _attach_name(t: int) -> str:
    try:
        return AttachType(t).name.lower()
    except ValueError:
        return f"attach type {t}"


def link_create_perf_event(prog_fd: Fd | int, perf_fd: Fd | int, cookie: int = 0) -> Fd:
    """A ``BPF_PERF_EVENT`` link: the program on a perf event (tracepoint,
    kprobe, uprobe or perf counter), with a BPF cookie.

    :raises BpfError: ``EEXIST`` the perf event already has a program,
        ``EINVAL`` program type does not fit the event.
    """
    a = LinkCreateAttr(prog_fd=_fdnum(prog_fd), target_fd=_fdnum(perf_fd), attach_type=AttachType.PERF_EVENT)
    a.u.perf_event.bpf_cookie = cookie & 0xFFFFFFFFFFFFFFFF
    return Fd(_bpf_or(Cmd.LINK_CREATE, a, "attaching through a perf-event link", {
        _errno.EEXIST: "this perf event already has a program; open another perf event for it",
        _errno.EINVAL: "the program type does not match the perf event (kprobe/uprobe/tracepoint/perf_event)",
    }), "link")


def link_create_tracing(prog_fd: Fd | int, attach_type: int, target_btf_id: int = 0, cookie: int = 0,
                        target_fd: Fd | int | None = None) -> Fd:
    """A tracing link (fentry/fexit/fmod_ret/fsession/lsm/tp_btf/freplace)
    with an optional BPF cookie (``link_create.tracing``).

    :raises BpfError: ``EINVAL``, ``EPERM`` (fentry is unavailable on some
        kernels), ``ENOTSUPP``.
    """
    a = LinkCreateAttr(prog_fd=_fdnum(prog_fd), target_fd=_fdnum(target_fd), attach_type=attach_type)
    a.u.tracing.target_btf_id = target_btf_id
    a.u.tracing.cookie = cookie & 0xFFFFFFFFFFFFFFFF
    return Fd(bpf(Cmd.LINK_CREATE, a, f"creating a {_attach_name(attach_type)} link"), "link")


def link_create_kprobe_multi(prog_fd: Fd | int, *, syms: Sequence[str] | None = None,
                             addrs: Sequence[int] | None = None, cookies: Sequence[int] | None = None,
                             retprobe: bool = False, session: bool = False) -> Fd:
    """A ``kprobe_multi`` link: one program on many kernel functions, by
    symbol name or address, with per-function cookies.

    :raises BpfError: ``EINVAL`` bad counts, ``ENOENT``/``ESRCH`` unknown
        symbol, ``EOPNOTSUPP`` no fprobe on this kernel.
    """
    if bool(syms) == bool(addrs):
        raise BpfError(_errno.EINVAL, "kprobe_multi: give either syms or addrs (not both, not neither)")
    cnt = len(syms) if syms else len(addrs)  # type: ignore[arg-type]
    if cookies is not None and len(cookies) != cnt:
        raise BpfError(_errno.EINVAL, f"kprobe_multi: {len(cookies)} cookies for {cnt} targets")
    keep: list[Any] = []
    a = LinkCreateAttr(prog_fd=_fdnum(prog_fd), attach_type=(AttachType.TRACE_KPROBE_SESSION if session
                                                               else AttachType.TRACE_KPROBE_MULTI))
    a.u.kprobe_multi.cnt = cnt
    a.u.kprobe_multi.flags = 1 if retprobe else 0
    if syms:
        strs = [ctypes.create_string_buffer(s.encode()) for s in syms]
        ptrs = (ctypes.c_void_p * cnt)(*(ctypes.addressof(s) for s in strs))
        keep += [strs, ptrs]
        a.u.kprobe_multi.syms = ctypes.addressof(ptrs)
    else:
        arr = _u64_array(addrs)  # type: ignore[arg-type]
        keep.append(arr)
        a.u.kprobe_multi.addrs = ctypes.addressof(arr)
    if cookies:
        c = _u64_array(cookies)
        keep.append(c)
        a.u.kprobe_multi.cookies = ctypes.addressof(c)
    return Fd(_bpf_or(Cmd.LINK_CREATE, a, f"attaching kprobe_multi to {cnt} functions", {
        _errno.EOPNOTSUPP: "this kernel has no kprobe_multi (fprobe) support",
        _errno.ESRCH: "a function name was not found in kallsyms",
        _errno.ENOENT: "a function name was not found or cannot be probed",
    }), "link")


def link_create_uprobe_multi(prog_fd: Fd | int, path: str, offsets: Sequence[int], *,
                             ref_ctr_offsets: Sequence[int] | None = None, cookies: Sequence[int] | None = None,
                             pid: int = 0, retprobe: bool = False, session: bool = False) -> Fd:
    """An ``uprobe_multi`` link: one program on many offsets of one binary.

    :raises BpfError: ``ENOENT`` no such file, ``EINVAL`` bad offsets/counts,
        ``ESRCH`` no such pid.
    """
    cnt = len(offsets)
    for label, arr in (("ref_ctr_offsets", ref_ctr_offsets), ("cookies", cookies)):
        if arr is not None and len(arr) != cnt:
            raise BpfError(_errno.EINVAL, f"uprobe_multi: {len(arr)} {label} for {cnt} offsets")
    p = _cstr(path)
    offs = _u64_array(offsets)
    refs = _u64_array(ref_ctr_offsets) if ref_ctr_offsets else None
    cks = _u64_array(cookies) if cookies else None
    a = LinkCreateAttr(prog_fd=_fdnum(prog_fd), attach_type=(AttachType.TRACE_UPROBE_SESSION if session
                                                               else AttachType.TRACE_UPROBE_MULTI))
    um = a.u.uprobe_multi
    um.path, um.offsets, um.cnt, um.pid = p.addr, ctypes.addressof(offs), cnt, pid
    um.ref_ctr_offsets = ctypes.addressof(refs) if refs is not None else 0
    um.cookies = ctypes.addressof(cks) if cks is not None else 0
    um.flags = 1 if retprobe else 0
    return Fd(_bpf_or(Cmd.LINK_CREATE, a, f"attaching uprobe_multi to {cnt} offsets in {path}", {
        _errno.ENOENT: f"{path} does not exist",
        _errno.ESRCH: f"no process with pid {pid}",
        _errno.EINVAL: "bad offsets, counts, flags, or the program is not an uprobe.multi program",
    }), "link")


def link_create_tracing_multi(prog_fd: Fd | int, attach_type: int, btf_ids: Sequence[int],
                              cookies: Sequence[int] | None = None) -> Fd:
    """A ``tracing_multi`` link (2026 mainline uapi ``link_create.tracing_multi
    {ids, cookies, cnt}``): one fentry.multi/fexit.multi/fsession.multi program
    on many kernel functions, by BTF id, with optional per-function cookies.

    :raises NotSupportedError: the kernel does not know tracing_multi links.
    :raises BpfError: ``EINVAL`` (empty or duplicate ids, unsuitable function),
        ``E2BIG`` (more than 1<<20 ids).
    """
    cnt = len(btf_ids)
    if cookies is not None and len(cookies) != cnt:
        raise BpfError(_errno.EINVAL, f"tracing_multi: {len(cookies)} cookies for {cnt} functions")
    ids = _u32_array(btf_ids)
    cks = _u64_array(cookies) if cookies else None
    a = LinkCreateAttr(prog_fd=_fdnum(prog_fd), attach_type=attach_type)
    a.u.tracing_multi.ids = ctypes.addressof(ids) if cnt else 0
    a.u.tracing_multi.cookies = ctypes.addressof(cks) if cks is not None else 0
    a.u.tracing_multi.cnt = cnt
    return Fd(bpf(Cmd.LINK_CREATE, a, f"attaching tracing_multi to {cnt} functions"), "link")


def link_update(link_fd: Fd | int, new_prog_fd: Fd | int, old_prog_fd: Fd | int | None = None) -> None:
    """``BPF_LINK_UPDATE``: swap the link's program atomically (with
    ``BPF_F_REPLACE`` when ``old_prog_fd`` is given).

    :raises BpfError: ``EINVAL`` incompatible program or link kind cannot be
        updated, ``EPERM`` ``old_prog_fd`` is not the current program.
    """
    a = LinkUpdateAttr(link_fd=_fdnum(link_fd), new_prog_fd=_fdnum(new_prog_fd),
                       flags=F_REPLACE if old_prog_fd is not None else 0, old_prog_fd=_fdnum(old_prog_fd))
    _bpf_or(Cmd.LINK_UPDATE, a, "updating a link", {
        _errno.EPERM: "the link's current program is not the expected old program",
        _errno.EINVAL: "the new program is incompatible (type/attach type/flags) or this link kind cannot be updated",
        _errno.EOPNOTSUPP: "this link kind cannot be updated",
    })


def link_detach(link_fd: Fd | int) -> None:
    """``BPF_LINK_DETACH``: detach while the fd stays open (link becomes defunct).

    :raises BpfError: ``EOPNOTSUPP`` this link kind cannot be force-detached.
    """
    _bpf_or(Cmd.LINK_DETACH, LinkDetachAttr(link_fd=_fdnum(link_fd)), "detaching a link",
            {_errno.EOPNOTSUPP: "this link kind cannot be force-detached; close its fd instead"})


def iter_create(link_fd: Fd | int) -> Fd:
    """``BPF_ITER_CREATE``: a readable fd from an iterator link.

    :raises BpfError: the kernel's error.
    """
    return Fd(bpf(Cmd.ITER_CREATE, IterCreateAttr(link_fd=_fdnum(link_fd)), "creating an iterator"), "iter")


@dataclass(frozen=True, slots=True)
class TaskFdInfo:
    """Outcome of ``BPF_TASK_FD_QUERY``."""

    prog_id: int
    fd_type: TaskFdType
    name: str
    probe_offset: int
    probe_addr: int


def task_fd_query(pid: int, fd: int, buf_len: int = 256) -> TaskFdInfo:
    """``BPF_TASK_FD_QUERY``: what program a perf-event/raw_tp fd of process
    ``pid`` runs, and on what.

    :raises BpfError: ``ENOTSUPP``/``EBADF`` the fd is not such an fd,
        ``ENOENT`` no such process.
    """
    buf = ctypes.create_string_buffer(buf_len)
    a = TaskFdQueryAttr(pid=pid, fd=fd, buf_len=buf_len, buf=ctypes.addressof(buf))
    bpf(Cmd.TASK_FD_QUERY, a, f"querying fd {fd} of pid {pid}")
    try:
        kind = TaskFdType(a.fd_type)
    except ValueError:
        kind = a.fd_type  # type: ignore[assignment]
    return TaskFdInfo(a.prog_id, kind, buf.value.decode(errors="replace"), a.probe_offset, a.probe_addr)


def enable_stats(stats_type: StatsType = StatsType.RUN_TIME) -> Fd:
    """``BPF_ENABLE_STATS``: run-time statistics stay on while the fd is open.

    :raises BpfError: ``EPERM`` (needs CAP_SYS_ADMIN), ``EBUSY``.
    """
    return Fd(bpf(Cmd.ENABLE_STATS, EnableStatsAttr(type=stats_type), "enabling BPF run-time statistics"), "stats")


# ---------------------------------------------------------------------------
# perf_event_open(2) and the perf ioctls
# ---------------------------------------------------------------------------


class PerfEventAttr(_S):
    """``struct perf_event_attr`` (``PERF_ATTR_SIZE_VER8``, 136 bytes).

    The bit-field word is ``flags`` (see :class:`PerfFlag`); ``precise_ip``
    lives in bits 15-16.
    """

    _fields_ = [
        ("type", u32),
        ("size", u32),
        ("config", u64),
        ("sample_period", u64),  # union with sample_freq
        ("sample_type", u64),
        ("read_format", u64),
        ("flags", u64),
        ("wakeup_events", u32),  # union with wakeup_watermark
        ("bp_type", u32),
        ("config1", u64),  # bp_addr / kprobe_func / uprobe_path
        ("config2", u64),  # bp_len / kprobe_addr / probe_offset
        ("branch_sample_type", u64),
        ("sample_regs_user", u64),
        ("sample_stack_user", u32),
        ("clockid", s32),
        ("sample_regs_intr", u64),
        ("aux_watermark", u32),
        ("sample_max_stack", u16),
        ("_reserved_2", u16),
        ("aux_sample_size", u32),
        ("aux_action", u32),
        ("sig_data", u64),
        ("config3", u64),
    ]


class PerfFlag(enum.IntFlag):
    """Bits of ``perf_event_attr``'s bit-field word."""

    DISABLED = 1 << 0
    INHERIT = 1 << 1
    PINNED = 1 << 2
    EXCLUSIVE = 1 << 3
    EXCLUDE_USER = 1 << 4
    EXCLUDE_KERNEL = 1 << 5
    EXCLUDE_HV = 1 << 6
    EXCLUDE_IDLE = 1 << 7
    MMAP = 1 << 8
    COMM = 1 << 9
    FREQ = 1 << 10
    INHERIT_STAT = 1 << 11
    ENABLE_ON_EXEC = 1 << 12
    TASK = 1 << 13
    WATERMARK = 1 << 14
    MMAP_DATA = 1 << 17
    SAMPLE_ID_ALL = 1 << 18
    EXCLUDE_HOST = 1 << 19
    EXCLUDE_GUEST = 1 << 20
    EXCLUDE_CALLCHAIN_KERNEL = 1 << 21
    EXCLUDE_CALLCHAIN_USER = 1 << 22
    MMAP2 = 1 << 23
    COMM_EXEC = 1 << 24
    USE_CLOCKID = 1 << 25
    CONTEXT_SWITCH = 1 << 26
    WRITE_BACKWARD = 1 << 27
    NAMESPACES = 1 << 28
    KSYMBOL = 1 << 29
    BPF_EVENT = 1 << 30
    AUX_OUTPUT = 1 << 31
    CGROUP = 1 << 32
    TEXT_POKE = 1 << 33
    BUILD_ID = 1 << 34
    INHERIT_THREAD = 1 << 35
    REMOVE_ON_EXEC = 1 << 36
    SIGTRAP = 1 << 37


class PerfSample(enum.IntFlag):
    """``enum perf_event_sample_format`` (``sample_type`` bits)."""

    IP = 1 << 0
    TID = 1 << 1
    TIME = 1 << 2
    ADDR = 1 << 3
    READ = 1 << 4
    CALLCHAIN = 1 << 5
    ID = 1 << 6
    CPU = 1 << 7
    PERIOD = 1 << 8
    STREAM_ID = 1 << 9
    RAW = 1 << 10


#: ``perf_event_open`` flags.
PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3


def _ioc(direction: int, nr: int, size: int) -> int:
    return (direction << 30) | (size << 16) | (ord("$") << 8) | nr


PERF_EVENT_IOC_ENABLE = _ioc(0, 0, 0)
PERF_EVENT_IOC_DISABLE = _ioc(0, 1, 0)
PERF_EVENT_IOC_REFRESH = _ioc(0, 2, 0)
PERF_EVENT_IOC_RESET = _ioc(0, 3, 0)
PERF_EVENT_IOC_PERIOD = _ioc(1, 4, 8)
PERF_EVENT_IOC_SET_OUTPUT = _ioc(0, 5, 0)
PERF_EVENT_IOC_SET_FILTER = _ioc(1, 6, 8)
PERF_EVENT_IOC_ID = _ioc(2, 7, 8)
PERF_EVENT_IOC_SET_BPF = _ioc(1, 8, 4)
PERF_EVENT_IOC_PAUSE_OUTPUT = _ioc(1, 9, 4)
PERF_EVENT_IOC_QUERY_BPF = _ioc(3, 10, 8)


def perf_event_open(attr: PerfEventAttr, pid: int = -1, cpu: int = 0, group_fd: int = -1,
                    flags: int = PERF_FLAG_FD_CLOEXEC) -> Fd:
    """``perf_event_open(2)``; ``attr.size`` is filled in when 0.

    :returns: the perf event's fd.
    :raises BpfError: ``ENOENT``/``EINVAL`` unknown event or bad config,
        ``EACCES``/``EPERM`` check ``kernel.perf_event_paranoid`` or run as
        root, ``ENODEV``/``EOPNOTSUPP`` hardware event unavailable.
    """
    if not attr.size:
        attr.size = ctypes.sizeof(PerfEventAttr)
    ret = _raw_perf_event_open(ctypes.addressof(attr), pid, cpu, group_fd, flags)
    while ret == -_errno.EINTR:
        ret = _raw_perf_event_open(ctypes.addressof(attr), pid, cpu, group_fd, flags)
    if ret < 0:
        hints = {
            _errno.ENOENT: "no such event (check the PMU type and config)",
            _errno.EINVAL: "invalid event configuration",
            _errno.EACCES: "not allowed: run as root or lower kernel.perf_event_paranoid",
            _errno.EPERM: "not allowed: run as root or lower kernel.perf_event_paranoid",
            _errno.ENODEV: "this event is not available on this machine (no such PMU)",
            _errno.EOPNOTSUPP: "this event is not supported on this machine",
        }
        raise _error(f"perf_event_open(type={attr.type}, config={attr.config:#x})", -ret, hints.get(-ret, ""))
    return Fd(ret, "perf_event")


def perf_ioctl(fd: Fd | int, request: int, arg: int = 0, what: str = "perf ioctl") -> int:
    """An ioctl on a perf event fd with an integer (or pointer) argument.

    :raises BpfError: the errno of the ioctl.
    """
    ret = _raw_ioctl(_fdnum(fd), request, arg)
    while ret == -_errno.EINTR:
        ret = _raw_ioctl(_fdnum(fd), request, arg)
    if ret < 0:
        raise _error(what, -ret)
    return ret


def perf_event_enable(fd: Fd | int) -> None:
    """``PERF_EVENT_IOC_ENABLE``.

    :raises BpfError: the ioctl's errno.
    """
    perf_ioctl(fd, PERF_EVENT_IOC_ENABLE, 0, "enabling a perf event")


def perf_event_disable(fd: Fd | int) -> None:
    """``PERF_EVENT_IOC_DISABLE``.

    :raises BpfError: the ioctl's errno.
    """
    perf_ioctl(fd, PERF_EVENT_IOC_DISABLE, 0, "disabling a perf event")


def perf_event_set_bpf(fd: Fd | int, prog_fd: Fd | int) -> None:
    """``PERF_EVENT_IOC_SET_BPF``: attach a program to the perf event (the
    legacy way; the perf event owns it until closed).

    :raises BpfError: ``EEXIST`` the event already has a program, ``EINVAL``
        program type does not fit, ``E2BIG`` the hook's program array is full.
    """
    ret = _raw_ioctl(_fdnum(fd), PERF_EVENT_IOC_SET_BPF, _fdnum(prog_fd))
    if ret < 0:
        hints = {
            _errno.EEXIST: "this perf event already has a program; open another perf event",
            _errno.E2BIG: "the hook already runs the maximum number of programs (64)",
            _errno.EINVAL: "the program type does not match the perf event",
        }
        raise _error("attaching a program to a perf event", -ret, hints.get(-ret, ""))


def perf_event_query_bpf(fd: Fd | int, capacity: int = 64) -> list[int]:
    """``PERF_EVENT_IOC_QUERY_BPF``: ids of the programs on the perf event's
    hook, in run order.

    :raises BpfError: ``ENOSPC`` more programs than ``capacity`` (the message
        says how many), ``EINVAL`` not a tracing perf event.
    """
    class Query(ctypes.Structure):
        _fields_ = [("ids_len", u32), ("prog_cnt", u32), ("ids", u32 * max(capacity, 1))]

    q = Query(ids_len=capacity)
    ret = _raw_ioctl(_fdnum(fd), PERF_EVENT_IOC_QUERY_BPF, ctypes.addressof(q))
    if ret < 0:
        if -ret == _errno.ENOSPC:
            raise _error("querying a perf event's programs", _errno.ENOSPC,
                         f"{q.prog_cnt} programs attached, more than the capacity {capacity}; pass a larger capacity")
        raise _error("querying a perf event's programs", -ret)
    return list(q.ids[: q.prog_cnt])


def perf_event_id(fd: Fd | int) -> int:
    """``PERF_EVENT_IOC_ID``: the event's unique id.

    :raises BpfError: the ioctl's errno.
    """
    v = ctypes.c_uint64()
    perf_ioctl(fd, PERF_EVENT_IOC_ID, ctypes.addressof(v), "reading a perf event id")
    return v.value


__all__ = [
    name
    for name in dir()
    if not name.startswith("_") and name not in {"annotations", "ctypes", "enum", "os", "platform", "warnings",
                                                  "dataclass", "Sequence", "Any"}
]
