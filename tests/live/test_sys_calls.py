"""``live.sys`` against the running kernel: every command bpfmux issues."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from _live_insns import count_into, ret

from bpfmux.errors import ENOTSUPP, BpfError, VerifierError
from bpfmux.live import sys as s
from bpfmux.uapi import AttachType, LinkType, MapFlags, MapType, ProgType

pytestmark = pytest.mark.usefixtures("root_required")

TRACEFS = Path("/sys/kernel/tracing")
U32, U64 = ctypes.c_uint32, ctypes.c_uint64


def _u32(v: int) -> bytes:
    return v.to_bytes(4, "little")


def _u64(v: int) -> bytes:
    return v.to_bytes(8, "little")


def _counter(map_fd: s.Fd, slot: int) -> int:
    out = bytearray(8)
    assert s.map_lookup_elem(map_fd, _u32(slot), out)
    return int.from_bytes(out, "little")


def test_hash_map_element_commands() -> None:
    with s.map_create(MapType.HASH, 4, 8, 8, name="sys_hash") as m:
        assert not s.map_lookup_elem(m, _u32(1), bytearray(8))
        s.map_update_elem(m, _u32(1), _u64(10))
        s.map_update_elem(m, _u32(2), _u64(20))
        with pytest.raises(FileExistsError):
            s.map_update_elem(m, _u32(1), _u64(11), 1)  # BPF_NOEXIST
        with pytest.raises(FileNotFoundError):
            s.map_update_elem(m, _u32(3), _u64(30), 2)  # BPF_EXIST
        keys, cur, nk = [], None, bytearray(4)
        while s.map_get_next_key(m, cur, nk):
            keys.append(int.from_bytes(nk, "little"))
            cur = bytes(nk)
        assert sorted(keys) == [1, 2]
        out = bytearray(8)
        assert s.map_lookup_and_delete_elem(m, _u32(2), out) and int.from_bytes(out, "little") == 20
        assert s.map_delete_elem(m, _u32(1)) and not s.map_delete_elem(m, _u32(1))
        for i in range(8):
            s.map_update_elem(m, _u32(i), _u64(i))
        with pytest.raises(BpfError) as exc:
            s.map_update_elem(m, _u32(100), _u64(0))
        assert exc.value.errno == errno.E2BIG


def test_batch_commands() -> None:
    n = 100
    with s.map_create(MapType.HASH, 4, 8, n, name="sys_batch") as m:
        keys = (U32 * n)(*range(n))
        vals = (U64 * n)(*(i * 3 for i in range(n)))
        assert s.map_update_batch(m, keys, vals, n) == n
        got: dict[int, int] = {}
        token, first = bytearray(4), True
        k_out, v_out = (U32 * 16)(), (U64 * 16)()
        while True:
            res = s.map_lookup_batch(m, None if first else bytes(token), token, k_out, v_out, 16)
            first = False
            got.update(zip(k_out[: res.count], v_out[: res.count], strict=True))
            if res.done:
                break
        assert got == {i: i * 3 for i in range(n)}
        assert s.map_delete_batch(m, (U32 * 10)(*range(10)), 10) == 10
        assert not s.map_lookup_elem(m, _u32(5), bytearray(8)) and s.map_lookup_elem(m, _u32(50), bytearray(8))


def test_freeze_blocks_user_writes() -> None:
    with s.map_create(MapType.ARRAY, 4, 8, 1, name="sys_frozen", flags=MapFlags.RDONLY_PROG) as m:
        s.map_update_elem(m, _u32(0), _u64(5))
        s.map_freeze(m)
        with pytest.raises(PermissionError):
            s.map_update_elem(m, _u32(0), _u64(6))
        assert _counter(m, 0) == 5


def test_prog_load_test_run_info_and_ids() -> None:
    with s.prog_load(ProgType.SOCKET_FILTER, ret(7), name="sys_seven") as p:
        r = s.prog_test_run(p, data_in=b"\0" * 64, repeat=3)
        assert r.retval == 7
        info = s.prog_info(p)
        assert info.name == b"sys_seven" and info.type == ProgType.SOCKET_FILTER and info.id > 0
        assert info.id in s.iter_ids(s.ObjKind.PROG)
        with s.get_fd_by_id(s.ObjKind.PROG, info.id) as again:
            assert s.prog_info(again).id == info.id


def test_enable_stats_counts_runs() -> None:
    with s.enable_stats() as _stats, s.prog_load(ProgType.SOCKET_FILTER, ret(1), name="sys_stats") as p:
        s.prog_test_run(p, data_in=b"\0" * 64, repeat=5)
        assert s.prog_info(p).run_cnt == 5


def test_rejected_program_carries_the_verifier_log() -> None:
    bad = bytes([0x95, 0, 0, 0, 0, 0, 0, 0])  # exit without setting r0
    with pytest.raises(VerifierError) as exc:
        s.prog_load(ProgType.SOCKET_FILTER, bad, name="sys_bad")
    assert exc.value.errno == errno.EACCES
    assert "R0 !read_ok" in exc.value.log and exc.value.program == "sys_bad"


def test_btf_load_and_info() -> None:
    # smallest valid BTF: header + one INT type "int" (4 bytes, signed)
    import struct

    strings = b"\0int\0"
    types = struct.pack("<III", 1, (1 << 24), 4) + struct.pack("<I", (1 << 24) | 32)
    hdr = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strings))
    with s.btf_load(hdr + types + strings) as b:
        info = s.btf_info(b)
        assert info.id > 0 and info.btf_size == len(hdr + types + strings)
    with pytest.raises(BpfError) as exc:
        s.btf_load(hdr[:-4] + b"\xff\xff\xff\x7f" + types + strings)
    assert exc.value.errno == errno.EINVAL


def test_raw_tracepoint_link_info_task_query_and_detach() -> None:
    with s.map_create(MapType.ARRAY, 4, 8, 1, name="sys_rawtp") as m, \
         s.prog_load(ProgType.RAW_TRACEPOINT, count_into(m.fd, 0), name="sys_rawtp") as p, \
         s.raw_tracepoint_open("sys_enter", p) as link:
        os.getpid()
        os.getppid()
        assert _counter(m, 0) >= 2
        info = s.link_info(link)
        assert info.type == LinkType.RAW_TRACEPOINT and info.prog_id == s.prog_info(p).id
        q = s.task_fd_query(os.getpid(), link.fd)
        assert q.fd_type == s.TaskFdType.RAW_TRACEPOINT and q.name == "sys_enter" and q.prog_id == info.prog_id
        with pytest.raises(BpfError, match="close its fd") as exc:
            s.link_detach(link)  # raw_tp links cannot be force-detached
        assert exc.value.errno == errno.EOPNOTSUPP
        link.close()
        before = _counter(m, 0)
        os.getpid()
        assert _counter(m, 0) == before


def _tp_id(category: str, name: str) -> int:
    return int((TRACEFS / "events" / category / name / "id").read_text())


def test_two_programs_on_one_tracepoint_close_one() -> None:
    """The seed's acceptance case on the live kernel: A through perf event 1
    (SET_BPF), B through perf event 2 (a perf-event link); close event 1:
    B still runs on every hit, A never again; query shows run order."""
    tp = _tp_id("syscalls", "sys_enter_getppid")
    with s.map_create(MapType.ARRAY, 4, 8, 2, name="sys_two") as m, \
         s.prog_load(ProgType.TRACEPOINT, count_into(m.fd, 0), name="sys_a") as a, \
         s.prog_load(ProgType.TRACEPOINT, count_into(m.fd, 1), name="sys_b") as b:
        ev1 = s.perf_event_open(s.PerfEventAttr(type=2, config=tp), pid=-1, cpu=0)
        ev2 = s.perf_event_open(s.PerfEventAttr(type=2, config=tp), pid=-1, cpu=0)
        with contextlib.ExitStack() as stack:
            stack.enter_context(ev2)
            s.perf_event_set_bpf(ev1, a)
            s.perf_event_enable(ev1)
            link = stack.enter_context(s.link_create_perf_event(b, ev2, cookie=0x1234))
            with pytest.raises(FileExistsError):
                s.perf_event_set_bpf(ev1, b)  # one program per perf event
            ids = s.perf_event_query_bpf(ev2)
            assert ids == [s.prog_info(a).id, s.prog_info(b).id]
            with pytest.raises(BpfError) as exc:
                s.perf_event_query_bpf(ev2, capacity=1)
            assert exc.value.errno == errno.ENOSPC
            _run_on_cpu0(5)
            a1, b1 = _counter(m, 0), _counter(m, 1)
            assert a1 >= 5 and b1 >= 5
            ev1.close()
            assert s.perf_event_query_bpf(ev2) == [s.prog_info(b).id]
            _run_on_cpu0(5)
            assert _counter(m, 0) == a1 and _counter(m, 1) >= b1 + 5
            assert s.link_info(link).type == LinkType.PERF_EVENT


def _run_on_cpu0(n: int) -> None:
    """Run ``n`` getppid() calls on CPU 0 (the perf events are per-CPU)."""
    code = f"import os\nos.sched_setaffinity(0, {{0}})\nfor _ in range({n}): os.getppid()\n"
    subprocess.run(["python3", "-c", code], check=True)


def _cgroup2_root(stack: contextlib.ExitStack) -> Path:
    for line in Path("/proc/self/mounts").read_text().splitlines():
        dev, mnt, fstype, *_ = line.split()
        if fstype == "cgroup2":
            return Path(mnt)
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
    subprocess.run(["mount", "-t", "cgroup2", "none", str(tmp)], check=True)
    stack.callback(subprocess.run, ["umount", str(tmp)], check=False)
    return tmp


def test_cgroup_link_update_and_prog_query() -> None:
    with contextlib.ExitStack() as stack:
        root = _cgroup2_root(stack)
        cg = root / f"bpfmux_sys_{os.getpid()}"
        cg.mkdir()
        stack.callback(cg.rmdir)
        cgfd = os.open(cg, os.O_RDONLY | os.O_DIRECTORY)
        stack.callback(os.close, cgfd)
        p1 = stack.enter_context(s.prog_load(ProgType.CGROUP_SKB, ret(1), name="sys_cg1",
                                             expected_attach_type=AttachType.CGROUP_INET_INGRESS))
        p2 = stack.enter_context(s.prog_load(ProgType.CGROUP_SKB, ret(1), name="sys_cg2",
                                             expected_attach_type=AttachType.CGROUP_INET_INGRESS))
        link = s.link_create(p1, cgfd, AttachType.CGROUP_INET_INGRESS)
        stack.callback(link.close)
        assert s.prog_query(cgfd, AttachType.CGROUP_INET_INGRESS).prog_ids == [s.prog_info(p1).id]
        with pytest.raises(PermissionError):
            s.link_update(link, p2, old_prog_fd=p2)  # old is not the current program
        s.link_update(link, p2, old_prog_fd=p1)
        assert s.prog_query(cgfd, AttachType.CGROUP_INET_INGRESS).prog_ids == [s.prog_info(p2).id]
        assert s.link_info(link).prog_id == s.prog_info(p2).id
        s.link_detach(link)  # cgroup links can be detached while the fd stays open
        assert s.prog_query(cgfd, AttachType.CGROUP_INET_INGRESS).prog_ids == []
        assert not link.closed


def test_pin_and_get(tmp_path: Path) -> None:
    bpffs = Path("/sys/fs/bpf")
    assert os.path.ismount(bpffs), "tests/conftest.py mounts bpffs at /sys/fs/bpf"
    path = bpffs / f"bpfmux_sys_pin_{os.getpid()}"
    with s.map_create(MapType.ARRAY, 4, 8, 1, name="sys_pin") as m:
        s.obj_pin(m, str(path))
        try:
            with s.obj_get(str(path), kind="map") as again:
                assert s.map_info(again).id == s.map_info(m).id
            with pytest.raises(FileExistsError):
                s.obj_pin(m, str(path))
        finally:
            path.unlink()
    with pytest.raises(FileNotFoundError):
        s.obj_get(str(path))


def test_prog_bind_map_keeps_the_map_alive() -> None:
    with s.prog_load(ProgType.SOCKET_FILTER, ret(0), name="sys_bind") as p:
        m = s.map_create(MapType.ARRAY, 4, 4, 1, name="sys_bound")
        map_id = s.map_info(m).id
        s.prog_bind_map(p, m)
        m.close()
        with s.get_fd_by_id(s.ObjKind.MAP, map_id) as again:
            assert s.map_info(again).id == map_id


def test_software_perf_event_ioctls() -> None:
    attr = s.PerfEventAttr(type=1, config=9, flags=s.PerfFlag.DISABLED)  # PERF_COUNT_SW_DUMMY
    with s.perf_event_open(attr, pid=0, cpu=-1) as ev:
        s.perf_event_enable(ev)
        s.perf_event_disable(ev)
        assert s.perf_event_id(ev) > 0
    with pytest.raises(BpfError):
        s.perf_event_open(s.PerfEventAttr(type=2, config=0xFFFFFFFF), pid=-1, cpu=0)


def test_tracing_multi_link_is_refused_on_this_kernel() -> None:
    """6.18 predates tracing_multi links: the kernel must refuse the attach type
    (the typed helper still builds the 2026 attr, checked in the unit tests)."""
    with s.prog_load(ProgType.RAW_TRACEPOINT, ret(0), name="sys_notm") as p:
        with pytest.raises(BpfError) as exc:
            s.link_create_tracing_multi(p, AttachType.TRACE_FENTRY_MULTI, [1])
        assert exc.value.errno in (errno.EINVAL, ENOTSUPP)
