"""One wrapper per ``bpf(2)`` command bpfmux issues: maps, programs, BTF,
objects by fd/id/path, raw tracepoints and links.

Each fills its attribute structure from :mod:`bpfmux.live.sys.types`, issues
the command through :func:`bpf` (or the raw call, where an errno is an answer
rather than a failure, as ``ENOENT`` is for a lookup) and returns an owned
:class:`~bpfmux.live.sys.fds.Fd`, a result object or nothing.
"""

from __future__ import annotations

import ctypes
import enum
import errno as _errno
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ...errors import ENOTSUPP, BpfError, VerifierError
from ...record import Frozen
from ...record import set_field as _set
from ...uapi import AttachType, Cmd
from . import raw as _raw
from .buffers import Buf, cstr, name16, u32_array, u64_array
from .errors import HINTS, error
from .fds import Fd, fdnum
from .types import (
    BtfInfo,
    BtfLoadAttr,
    EnableStatsAttr,
    GetIdAttr,
    InfoAttr,
    IterCreateAttr,
    LinkCreateAttr,
    LinkDetachAttr,
    LinkInfo,
    LinkUpdateAttr,
    MapBatchAttr,
    MapCreateAttr,
    MapElemAttr,
    MapInfo,
    ObjAttr,
    ProgBindMapAttr,
    ProgInfo,
    ProgLoadAttr,
    QueryAttr,
    RawTracepointAttr,
    TaskFdQueryAttr,
    TestRunAttr,
)

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
# bpf(2)
# ---------------------------------------------------------------------------


#: How many times :func:`issue` tries a command that keeps failing with
#: ``EINTR`` (or ``EAGAIN`` for ``BPF_PROG_LOAD``) by default.
BPF_ATTEMPTS = 5


def issue(cmd: Cmd | int, attr: ctypes.Structure, attempts: int | None = BPF_ATTEMPTS) -> int:
    """Issue one ``bpf(2)`` command with ``attr`` (size = ``sizeof(attr)``),
    again after ``EINTR`` (and ``EAGAIN`` for ``BPF_PROG_LOAD``, as the kernel
    asks), at most ``attempts`` times in all (``None``: no limit).

    :returns: the result, or ``-errno`` (this does not raise for a kernel error).
    :raises NotSupportedError: bpfmux does not know this architecture's syscall number.
    """
    addr, size = ctypes.addressof(attr), ctypes.sizeof(attr)
    again = (_errno.EINTR, _errno.EAGAIN) if int(cmd) == Cmd.PROG_LOAD else (_errno.EINTR,)
    return _raw.retry(lambda: _raw.raw_bpf(int(cmd), addr, size), again, attempts)


def bpf(cmd: Cmd | int, attr: ctypes.Structure, what: str = "", hint: str = "") -> int:
    """Issue one ``bpf(2)`` command with ``attr`` (size = ``sizeof(attr)``).

    Retries on ``EINTR`` (and ``EAGAIN`` for ``BPF_PROG_LOAD``, as the kernel
    asks), :data:`BPF_ATTEMPTS` times at most (see :func:`issue`).

    :returns: the command's non-negative result (an fd for creating commands).
    :raises BpfError: the kernel's errno, with ``what``/``hint`` in the message.
    """
    ret = issue(cmd, attr)
    if ret >= 0:
        return ret
    name = what or f"bpf({_cmd_name(cmd)})"
    raise error(name, -ret, hint)


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
        inner_map_fd=fdnum(inner_map_fd),
        numa_node=numa_node,
        map_name=name16(name),
        map_ifindex=map_ifindex,
        btf_fd=fdnum(btf_fd),
        btf_key_type_id=btf_key_type_id,
        btf_value_type_id=btf_value_type_id,
        btf_vmlinux_value_type_id=btf_vmlinux_value_type_id,
        map_extra=map_extra,
    )
    label = f"creating map {name!r}" if name else "creating a map"
    hints = {_errno.EINVAL: "the kernel rejected its type, sizes or flags; check the map definition",
             ENOTSUPP: "the kernel does not support this map type with these flags"
                       + (" or BTF key/value types" if btf_key_type_id or btf_value_type_id else "")}
    return Fd(_bpf_or(Cmd.MAP_CREATE, a, label, hints), "map")


def _bpf_or(cmd: Cmd, attr: ctypes.Structure, what: str, hints: dict[int, str]) -> int:
    try:
        return bpf(cmd, attr, what)
    except BpfError as err:
        if err.errno in hints:
            raise error(what, err.errno, hints[err.errno]) from None
        raise


def _elem(cmd: Cmd, map_fd: Fd | int, key: Buf, value: Buf, flags: int) -> int:
    a = MapElemAttr(map_fd=fdnum(map_fd), key=key.addr, value=value.addr, flags=flags)
    return issue(cmd, a, attempts=None)


def map_lookup_elem(map_fd: Fd | int, key: Any, value_out: Any, flags: int = 0) -> bool:
    """``BPF_MAP_LOOKUP_ELEM`` into ``value_out`` (a writable buffer).

    :returns: False when the key is absent (``ENOENT``), else True.
    :raises BpfError: any other error.
    """
    ret = _elem(Cmd.MAP_LOOKUP_ELEM, map_fd, Buf(key), Buf(value_out), flags)
    if ret >= 0:
        return True
    if ret == -_errno.ENOENT:
        return False
    raise error("map lookup", -ret)


def map_lookup_and_delete_elem(map_fd: Fd | int, key: Any, value_out: Any, flags: int = 0) -> bool:
    """``BPF_MAP_LOOKUP_AND_DELETE_ELEM`` (``key`` is None for queue/stack).

    :returns: False when absent/empty (``ENOENT``), else True.
    :raises BpfError: any other error (``ENOTSUPP`` for map types without it).
    """
    ret = _elem(Cmd.MAP_LOOKUP_AND_DELETE_ELEM, map_fd, Buf(key), Buf(value_out), flags)
    if ret >= 0:
        return True
    if ret == -_errno.ENOENT:
        return False
    raise error("map lookup-and-delete", -ret)


def map_update_elem(map_fd: Fd | int, key: Any, value: Any, flags: int = 0) -> None:
    """``BPF_MAP_UPDATE_ELEM`` with ``UpdateFlags``.

    :raises BpfError: ``EEXIST`` (NOEXIST given and present), ``ENOENT`` (EXIST
        given and absent), ``E2BIG`` (map full), ``EINVAL``.
    """
    ret = _elem(Cmd.MAP_UPDATE_ELEM, map_fd, Buf(key), Buf(value), flags)
    if ret < 0:
        hints = {
            _errno.E2BIG: "the map is full (max_entries reached)",
            _errno.EEXIST: "the key exists and BPF_NOEXIST was given",
            _errno.ENOENT: "the key is absent and BPF_EXIST was given",
            _errno.EINVAL: "bad key/value/flags for this map type (array index out of range?)",
        }
        raise error("map update", -ret, hints.get(-ret, ""))


def map_delete_elem(map_fd: Fd | int, key: Any) -> bool:
    """``BPF_MAP_DELETE_ELEM``.

    :returns: False when the key was absent (``ENOENT``).
    :raises BpfError: any other error (``EINVAL`` for arrays, which cannot
        delete).
    """
    ret = _elem(Cmd.MAP_DELETE_ELEM, map_fd, Buf(key), Buf(None), 0)
    if ret >= 0:
        return True
    if ret == -_errno.ENOENT:
        return False
    raise error("map delete", -ret, "array maps cannot delete elements" if ret == -_errno.EINVAL else "")


def map_get_next_key(map_fd: Fd | int, key: Any, next_key_out: Any) -> bool:
    """``BPF_MAP_GET_NEXT_KEY``: the key after ``key`` (None: the first key).

    :returns: False at the end of the map (``ENOENT``).
    :raises BpfError: any other error.
    """
    ret = _elem(Cmd.MAP_GET_NEXT_KEY, map_fd, Buf(key), Buf(next_key_out), 0)
    if ret >= 0:
        return True
    if ret == -_errno.ENOENT:
        return False
    raise error("map get-next-key", -ret)


def map_freeze(map_fd: Fd | int) -> None:
    """``BPF_MAP_FREEZE``: no more writes from user space.

    :raises BpfError: ``EBUSY`` (writable mmap exists), ``ENOTSUPP``.
    """
    bpf(Cmd.MAP_FREEZE, MapElemAttr(map_fd=fdnum(map_fd)), "freezing a map")


class BatchResult(Frozen):
    """Outcome of one batch call: elements processed and whether the map is done."""

    __slots__ = ("count", "done")

    count: int
    done: bool

    def __init__(self, count: int, done: bool) -> None:
        _set(self, "count", count)
        _set(self, "done", done)


def _batch(cmd: Cmd, map_fd: Fd | int, in_batch: Any, out_batch: Any, keys: Any, values: Any, count: int,
           elem_flags: int, flags: int, what: str) -> BatchResult:
    a = MapBatchAttr(
        in_batch=Buf(in_batch).addr if in_batch is not None else 0,
        out_batch=0,
        keys=0,
        values=0,
        count=count,
        map_fd=fdnum(map_fd),
        elem_flags=elem_flags,
        flags=flags,
    )
    bufs = [Buf(in_batch), Buf(out_batch), Buf(keys), Buf(values)]
    a.in_batch, a.out_batch, a.keys, a.values = (b.addr for b in bufs)
    ret = issue(cmd, a, attempts=None)
    if ret >= 0:
        return BatchResult(a.count, False)
    if ret == -_errno.ENOENT:
        return BatchResult(a.count, True)
    raise error(what, -ret, "this map type has no batch operations" if -ret in (_errno.EINVAL, ENOTSUPP, _errno.EOPNOTSUPP) else "")


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


def _grow_log(attempt: Callable[[int, int], tuple[int, str, int]], level: int, size: int) -> tuple[int, str]:
    """Load once through ``attempt(level, size)`` (which returns the raw
    result, the log and the kernel's ``log_true_size``); while a log was asked
    for (``level``) and the kernel says ``ENOSPC`` (it did not fit), load again
    with a bigger buffer: four times bigger, or the size the kernel says it
    needs, up to :data:`LOG_SIZE_MAX`.

    :returns: the last raw result (an fd or ``-errno``) and its log.
    :raises Exception: whatever ``attempt`` raises.
    """
    ret, log, true_size = attempt(level, size)
    while level and ret == -_errno.ENOSPC and size < LOG_SIZE_MAX:
        size = min(LOG_SIZE_MAX, max(size * 4, true_size + 1))
        ret, log, true_size = attempt(level, size)
    return ret, log


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
    code = Buf(insns)
    if len(insns) % 8:
        raise BpfError(_errno.EINVAL, f"program {name!r}: instruction bytes ({len(insns)}) not a multiple of 8")
    lic = cstr(license)
    finfo, linfo = Buf(func_info or None), Buf(line_info or None)
    fdarr = u32_array(list(fd_array)) if fd_array else None
    fdarr_buf = Buf(fdarr)

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
            prog_name=name16(name),
            prog_ifindex=prog_ifindex,
            expected_attach_type=expected_attach_type,
            prog_btf_fd=fdnum(prog_btf_fd),
            func_info_rec_size=func_info_rec_size if func_info else 0,
            func_info=finfo.addr,
            func_info_cnt=len(func_info) // func_info_rec_size if func_info else 0,
            line_info_rec_size=line_info_rec_size if line_info else 0,
            line_info=linfo.addr,
            line_info_cnt=len(line_info) // line_info_rec_size if line_info else 0,
            attach_btf_id=attach_btf_id,
            attach_prog_fd=fdnum(attach_prog_fd) or fdnum(attach_btf_obj_fd),
            fd_array=fdarr_buf.addr,
        )
        ret = issue(Cmd.PROG_LOAD, a)
        log = logbuf.value.decode(errors="replace") if logbuf is not None else ""
        return ret, log, a.log_true_size

    ret, log = _grow_log(attempt, log_level, log_size or (1 << 16 if log_level else 0))
    if ret < 0 and not log_level and retry_with_log and -ret not in (_errno.EPERM, _errno.E2BIG, _errno.EBADF):
        ret2, log = _grow_log(attempt, 1, 1 << 18)
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
        _errno.EPERM: HINTS[_errno.EPERM],
        _errno.EACCES: "rejected: privileged helpers or pointer leaks need root",
    }
    raise error(label, err, hints.get(err, ""))


class TestRunResult(Frozen):
    """Outcome of ``BPF_PROG_TEST_RUN``."""

    __test__ = False
    __slots__ = ("retval", "duration_ns", "data_out", "ctx_out")

    retval: int
    duration_ns: int
    data_out: bytes
    ctx_out: bytes

    def __init__(self, retval: int, duration_ns: int, data_out: bytes, ctx_out: bytes) -> None:
        _set(self, "retval", retval)
        _set(self, "duration_ns", duration_ns)
        _set(self, "data_out", data_out)
        _set(self, "ctx_out", ctx_out)


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
    din, cin = Buf(data_in), Buf(ctx_in)
    dout = ctypes.create_string_buffer(data_size_out) if data_size_out else None
    cout = ctypes.create_string_buffer(ctx_size_out) if ctx_size_out else None
    a = TestRunAttr(
        prog_fd=fdnum(prog_fd),
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
    bpf(Cmd.PROG_BIND_MAP, ProgBindMapAttr(prog_fd=fdnum(prog_fd), map_fd=fdnum(map_fd)), "binding a map to a program")


class QueryResult(Frozen):
    """Outcome of ``BPF_PROG_QUERY``."""

    __slots__ = ("prog_ids", "attach_flags", "revision")

    prog_ids: list[int]
    attach_flags: int
    revision: int

    def __init__(self, prog_ids: list[int], attach_flags: int, revision: int) -> None:
        _set(self, "prog_ids", prog_ids)
        _set(self, "attach_flags", attach_flags)
        _set(self, "revision", revision)


def prog_query(target_fd: Fd | int, attach_type: int, query_flags: int = 0) -> QueryResult:
    """``BPF_PROG_QUERY``: programs attached to a cgroup/netns/device hook.

    :raises BpfError: ``EINVAL`` this attach type cannot be queried on that fd.
    """
    a = QueryAttr(target_fd=fdnum(target_fd), attach_type=attach_type, query_flags=query_flags)
    bpf(Cmd.PROG_QUERY, a, "querying attached programs")
    cnt = a.prog_cnt
    ids = u32_array([0] * max(cnt, 1))
    for _ in range(4):
        a = QueryAttr(target_fd=fdnum(target_fd), attach_type=attach_type, query_flags=query_flags,
                      prog_ids=ctypes.addressof(ids), prog_cnt=len(ids))
        try:
            bpf(Cmd.PROG_QUERY, a, "querying attached programs")
            break
        except BpfError as err:
            if err.errno != _errno.ENOSPC:
                raise
            ids = u32_array([0] * (a.prog_cnt * 2 + 1))
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
    blob = Buf(data)

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
        ret = issue(Cmd.BTF_LOAD, a, attempts=1)  # not retried, as it never was
        return ret, (logbuf.value.decode(errors="replace") if logbuf is not None else "")

    ret, log = attempt(log_level)
    if ret < 0 and not log_level and retry_with_log and -ret not in (_errno.EPERM, _errno.E2BIG):
        ret2, log = attempt(1)
        if ret2 >= 0:
            ret = ret2
    if ret >= 0:
        return Fd(ret, "btf")
    tail = "\n".join(log.strip().splitlines()[-8:])
    err = error("loading BTF", -ret, "the kernel rejected the BTF" + (f":\n{tail}" if tail else ""))
    err.log = log
    raise err


# ---------------------------------------------------------------------------
# objects by fd / id
# ---------------------------------------------------------------------------


_InfoT = TypeVar("_InfoT", bound=ctypes.Structure)


def obj_get_info_by_fd(fd: Fd | int, info: _InfoT) -> _InfoT:
    """``BPF_OBJ_GET_INFO_BY_FD`` into ``info`` (a :class:`ProgInfo`,
    :class:`MapInfo`, :class:`BtfInfo` or :class:`LinkInfo`, whose pointer
    fields may point at output arrays).

    :returns: ``info``, filled.
    :raises BpfError: ``EINVAL`` wrong info kind for this fd, ``EBADF``.
    """
    a = InfoAttr(bpf_fd=fdnum(fd), info_len=ctypes.sizeof(info), info=ctypes.addressof(info))
    bpf(Cmd.OBJ_GET_INFO_BY_FD, a, "reading object info")
    return info


def prog_info(fd: Fd | int) -> ProgInfo:
    """Program info (type, id, tag, name, run statistics, …).

    :raises BpfError: ``fd`` is not a program.
    """
    return obj_get_info_by_fd(fd, ProgInfo())


def map_info(fd: Fd | int) -> MapInfo:
    """Map info (type, id, sizes, flags, name, BTF ids).

    :raises BpfError: ``fd`` is not a map.
    """
    return obj_get_info_by_fd(fd, MapInfo())


def link_info(fd: Fd | int) -> LinkInfo:
    """Link info (type, id, program id, per-kind data).

    :raises BpfError: ``fd`` is not a link.
    """
    return obj_get_info_by_fd(fd, LinkInfo())


def btf_info(fd: Fd | int) -> BtfInfo:
    """BTF object info (id, size, name, kernel or not).

    :raises BpfError: ``fd`` is not a BTF object.
    """
    return obj_get_info_by_fd(fd, BtfInfo())


def get_next_id(kind: ObjKind, start_id: int = 0) -> int | None:
    """``BPF_{PROG,MAP,BTF,LINK}_GET_NEXT_ID``.

    :returns: the next id after ``start_id``, or None at the end.
    :raises BpfError: ``EPERM`` (needs CAP_SYS_ADMIN).
    """
    a = GetIdAttr(start_id=start_id)
    ret = issue(kind.value[0], a, attempts=1)  # not retried, as it never was
    if ret == -_errno.ENOENT:
        return None
    if ret < 0:
        raise error(f"listing {kind.name.lower()} ids", -ret)
    return int(a.next_id)


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
    p = cstr(path)
    bpf(Cmd.OBJ_PIN, ObjAttr(pathname=p.addr, bpf_fd=fdnum(fd)), f"pinning at {path}")


def obj_get(path: str, file_flags: int = 0, kind: str = "obj") -> Fd:
    """``BPF_OBJ_GET``: open a pinned object.

    :raises BpfError: ``ENOENT`` nothing pinned there.
    """
    p = cstr(path)
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
    n = cstr(name)
    a = RawTracepointAttr(name=n.addr, prog_fd=fdnum(prog_fd), cookie=cookie & 0xFFFFFFFFFFFFFFFF)
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
    a = LinkCreateAttr(prog_fd=fdnum(prog_fd), target_fd=fdnum(target_fd), attach_type=attach_type, flags=flags)
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
    a = LinkCreateAttr(prog_fd=fdnum(prog_fd), target_fd=fdnum(perf_fd), attach_type=AttachType.PERF_EVENT)
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
    a = LinkCreateAttr(prog_fd=fdnum(prog_fd), target_fd=fdnum(target_fd), attach_type=attach_type)
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
    cnt = len(syms or addrs or ())  # one of them, checked above
    if cookies is not None and len(cookies) != cnt:
        raise BpfError(_errno.EINVAL, f"kprobe_multi: {len(cookies)} cookies for {cnt} targets")
    keep: list[Any] = []
    a = LinkCreateAttr(prog_fd=fdnum(prog_fd), attach_type=(AttachType.TRACE_KPROBE_SESSION if session
                                                               else AttachType.TRACE_KPROBE_MULTI))
    a.u.kprobe_multi.cnt = cnt
    a.u.kprobe_multi.flags = 1 if retprobe else 0
    if syms:
        strs = [ctypes.create_string_buffer(s.encode()) for s in syms]
        ptrs = (ctypes.c_void_p * cnt)(*(ctypes.addressof(s) for s in strs))
        keep += [strs, ptrs]
        a.u.kprobe_multi.syms = ctypes.addressof(ptrs)
    elif addrs:
        arr = u64_array(addrs)
        keep.append(arr)
        a.u.kprobe_multi.addrs = ctypes.addressof(arr)
    if cookies:
        c = u64_array(cookies)
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
    p = cstr(path)
    offs = u64_array(offsets)
    refs = u64_array(ref_ctr_offsets) if ref_ctr_offsets else None
    cks = u64_array(cookies) if cookies else None
    a = LinkCreateAttr(prog_fd=fdnum(prog_fd), attach_type=(AttachType.TRACE_UPROBE_SESSION if session
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
    ids = u32_array(btf_ids)
    cks = u64_array(cookies) if cookies else None
    a = LinkCreateAttr(prog_fd=fdnum(prog_fd), attach_type=attach_type)
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
    a = LinkUpdateAttr(link_fd=fdnum(link_fd), new_prog_fd=fdnum(new_prog_fd),
                       flags=F_REPLACE if old_prog_fd is not None else 0, old_prog_fd=fdnum(old_prog_fd))
    _bpf_or(Cmd.LINK_UPDATE, a, "updating a link", {
        _errno.EPERM: "the link's current program is not the expected old program",
        _errno.EINVAL: "the new program is incompatible (type/attach type/flags) or this link kind cannot be updated",
        _errno.EOPNOTSUPP: "this link kind cannot be updated",
    })


def link_detach(link_fd: Fd | int) -> None:
    """``BPF_LINK_DETACH``: detach while the fd stays open (link becomes defunct).

    :raises BpfError: ``EOPNOTSUPP`` this link kind cannot be force-detached.
    """
    _bpf_or(Cmd.LINK_DETACH, LinkDetachAttr(link_fd=fdnum(link_fd)), "detaching a link",
            {_errno.EOPNOTSUPP: "this link kind cannot be force-detached; close its fd instead"})


def iter_create(link_fd: Fd | int) -> Fd:
    """``BPF_ITER_CREATE``: a readable fd from an iterator link.

    :raises BpfError: the kernel's error.
    """
    return Fd(bpf(Cmd.ITER_CREATE, IterCreateAttr(link_fd=fdnum(link_fd)), "creating an iterator"), "iter")


class TaskFdInfo(Frozen):
    """Outcome of ``BPF_TASK_FD_QUERY``."""

    __slots__ = ("prog_id", "fd_type", "name", "probe_offset", "probe_addr")

    prog_id: int
    fd_type: TaskFdType
    name: str
    probe_offset: int
    probe_addr: int

    def __init__(self, prog_id: int, fd_type: TaskFdType, name: str, probe_offset: int, probe_addr: int) -> None:
        _set(self, "prog_id", prog_id)
        _set(self, "fd_type", fd_type)
        _set(self, "name", name)
        _set(self, "probe_offset", probe_offset)
        _set(self, "probe_addr", probe_addr)


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
        kind = a.fd_type
    return TaskFdInfo(a.prog_id, kind, buf.value.decode(errors="replace"), a.probe_offset, a.probe_addr)


def enable_stats(stats_type: StatsType = StatsType.RUN_TIME) -> Fd:
    """``BPF_ENABLE_STATS``: run-time statistics stay on while the fd is open.

    :raises BpfError: ``EPERM`` (needs CAP_SYS_ADMIN), ``EBUSY``.
    """
    return Fd(bpf(Cmd.ENABLE_STATS, EnableStatsAttr(type=stats_type), "enabling BPF run-time statistics"), "stats")
