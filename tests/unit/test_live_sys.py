"""``live.sys`` without a kernel: fd ownership, errno mapping, the verifier-log
retry, and what the typed link helpers put into ``union bpf_attr``.

The raw system call is replaced by a fake that records each command and its
attribute block (the aya approach), so these run anywhere, unprivileged.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import os
import warnings

import pytest

from bpfmux.errors import BpfError, VerifierError
from bpfmux.live import sys as s
from bpfmux.uapi import AttachType, Cmd, MapType, ProgType

EXIT = bytes([0x95, 0, 0, 0, 0, 0, 0, 0])


class FakeBpf:
    """Records ``(cmd, attr bytes)`` and answers with a scripted function."""

    def __init__(self, answer):
        self.calls: list[tuple[int, bytes, int]] = []
        self.answer = answer

    def __call__(self, cmd: int, addr: int, size: int) -> int:
        self.calls.append((cmd, ctypes.string_at(addr, size), addr))
        return self.answer(cmd, addr, size)


@pytest.fixture
def fake(monkeypatch):
    def install(answer):
        f = FakeBpf(answer)
        monkeypatch.setattr(s.raw, "raw_bpf", f)
        return f

    return install


# --- Fd ---------------------------------------------------------------------


def test_fd_close_is_idempotent_and_releases_the_descriptor() -> None:
    r, w = os.pipe()
    os.close(w)
    fd = s.Fd(r, "pipe")
    assert int(fd) == r and fd.fileno() == r and not fd.closed
    fd.close()
    fd.close()
    assert fd.closed
    with pytest.raises(OSError):
        os.fstat(r)
    with pytest.raises(BpfError) as exc:
        fd.fileno()
    assert exc.value.errno == errno.EBADF


def test_fd_context_manager_and_detach() -> None:
    r, w = os.pipe()
    with s.Fd(w, "pipe") as fd:
        assert fd.fileno() == w
    assert fd.closed
    with pytest.raises(OSError):
        os.fstat(w)
    fd2 = s.Fd(r, "pipe")
    n = fd2.detach()
    assert n == r and fd2.closed
    del fd2
    gc.collect()
    os.fstat(r)  # still open: detach handed ownership over
    os.close(r)


def test_fd_close_on_error_closes_only_when_the_body_raises() -> None:
    r, w = os.pipe()
    os.close(w)
    with s.Fd(r, "pipe") as kept:
        with kept.close_on_error() as got:
            assert got is kept
        assert not kept.closed
        os.fstat(r)  # still open: the body succeeded
    for exc in (ValueError("bad"), KeyboardInterrupt()):
        r, w = os.pipe()
        os.close(r)
        fd = s.Fd(w, "pipe")
        with pytest.raises(type(exc)), fd.close_on_error():
            raise exc
        assert fd.closed
        with pytest.raises(OSError):
            os.fstat(w)


def test_fd_dropped_unclosed_is_closed_with_a_warning() -> None:
    r, w = os.pipe()
    os.close(w)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fd = s.Fd(r, "pipe")
        del fd
        gc.collect()
    assert any(issubclass(c.category, ResourceWarning) for c in caught)
    with pytest.raises(OSError):
        os.fstat(r)


def test_fd_dup_is_independent() -> None:
    r, w = os.pipe()
    os.close(w)
    with s.Fd(r, "pipe") as a:
        b = a.dup()
        assert b.fileno() != a.fileno()
    os.fstat(b.fileno())
    b.close()


def test_negative_fd_is_rejected() -> None:
    with pytest.raises(BpfError):
        s.Fd(-1)


# --- errno mapping ----------------------------------------------------------


def test_eperm_becomes_permission_error_with_a_hint(fake) -> None:
    fake(lambda cmd, addr, size: -errno.EPERM)
    with pytest.raises(PermissionError) as exc:
        s.map_create(MapType.HASH, 4, 4, 1, name="m")
    err = exc.value
    assert isinstance(err, BpfError) and err.errno == errno.EPERM
    assert "root" in str(err) and "'m'" in str(err)


def test_lookup_enoent_is_a_miss_not_an_error(fake) -> None:
    fake(lambda cmd, addr, size: -errno.ENOENT)
    assert s.map_lookup_elem(3, b"\0" * 4, bytearray(4)) is False
    assert s.map_delete_elem(3, b"\0" * 4) is False
    assert s.map_get_next_key(3, None, bytearray(4)) is False


def test_update_e2big_says_the_map_is_full(fake) -> None:
    fake(lambda cmd, addr, size: -errno.E2BIG)
    with pytest.raises(BpfError, match="full"):
        s.map_update_elem(3, b"\0" * 4, b"\0" * 4)


def test_eintr_is_retried(fake) -> None:
    answers = iter([-errno.EINTR, -errno.EINTR, 7])
    f = fake(lambda cmd, addr, size: next(answers))
    fd = s.map_create(MapType.ARRAY, 4, 4, 1)
    assert fd.detach() == 7 and len(f.calls) == 3


def test_retry_helper_stops_at_success_other_errors_or_the_attempt_limit() -> None:
    answers = iter([-errno.EINTR, -errno.EAGAIN, -errno.EINTR, 3])
    assert s.raw.retry(lambda: next(answers), (errno.EINTR, errno.EAGAIN)) == 3
    answers = iter([-errno.EINTR, -errno.EAGAIN, 3])
    assert s.raw.retry(lambda: next(answers)) == -errno.EAGAIN  # EAGAIN is not retried unless asked
    calls = []
    assert s.raw.retry(lambda: calls.append(1) or -errno.EINTR, attempts=5) == -errno.EINTR
    assert len(calls) == 5


def test_eagain_is_retried_for_prog_load_only(fake) -> None:
    f = fake(lambda cmd, addr, size: -errno.EAGAIN)
    with pytest.raises(BpfError) as exc:
        s.map_create(MapType.ARRAY, 4, 4, 1)
    assert exc.value.errno == errno.EAGAIN and len(f.calls) == 1
    answers = iter([-errno.EAGAIN, -errno.EINTR, 8])
    f = fake(lambda cmd, addr, size: next(answers))
    assert s.prog_load(ProgType.SOCKET_FILTER, EXIT, retry_with_log=False).detach() == 8
    assert len(f.calls) == 3


def test_bpf_gives_up_after_five_interrupted_attempts(fake) -> None:
    f = fake(lambda cmd, addr, size: -errno.EINTR)
    with pytest.raises(BpfError) as exc:
        s.map_create(MapType.ARRAY, 4, 4, 1)
    assert exc.value.errno == errno.EINTR and len(f.calls) == s.commands.BPF_ATTEMPTS == 5


def test_perf_event_open_is_retried_on_eintr(monkeypatch) -> None:
    answers = iter([-errno.EINTR, -errno.EINTR, 9])
    monkeypatch.setattr(s.raw, "raw_perf_event_open", lambda *a: next(answers))
    assert s.perf_event_open(s.PerfEventAttr(type=1)).detach() == 9


def test_map_create_fills_the_attr(fake) -> None:
    f = fake(lambda cmd, addr, size: 9)
    s.map_create(MapType.LRU_HASH, 8, 16, 1024, flags=1, name="a_very_long_map_name_here").detach()
    cmd, raw, _ = f.calls[0]
    a = s.MapCreateAttr.from_buffer_copy(raw)
    assert cmd == Cmd.MAP_CREATE and len(raw) == ctypes.sizeof(s.MapCreateAttr)
    assert (a.map_type, a.key_size, a.value_size, a.max_entries, a.map_flags) == (MapType.LRU_HASH, 8, 16, 1024, 1)
    assert a.map_name == b"a_very_long_map"  # 15 bytes + NUL


# --- program load and the verifier log ---------------------------------------


def test_rejected_program_raises_verifier_error_with_the_log(fake) -> None:
    log_text = b"0: (95) exit\nR0 !read_ok\n"

    def answer(cmd, addr, size):
        a = s.ProgLoadAttr.from_address(addr)
        if a.log_level and a.log_size:
            ctypes.memmove(a.log_buf, log_text, len(log_text))
        return -errno.EACCES

    f = fake(answer)
    with pytest.raises(VerifierError) as exc:
        s.prog_load(ProgType.SOCKET_FILTER, EXIT, name="bad")
    assert exc.value.log == log_text.decode() and exc.value.program == "bad"
    assert "R0 !read_ok" in str(exc.value)
    levels = [s.ProgLoadAttr.from_buffer_copy(raw).log_level for _, raw, _ in f.calls]
    assert levels == [0, 1]  # fast attempt without a log, then the retry with one


def test_log_buffer_grows_until_the_log_fits(fake) -> None:
    needed = 3_000_000

    def answer(cmd, addr, size):
        a = s.ProgLoadAttr.from_address(addr)
        a.log_true_size = needed
        if a.log_size < needed:
            return -errno.ENOSPC
        return 5

    f = fake(answer)
    out: list[str] = []
    fd = s.prog_load(ProgType.KPROBE, EXIT, log_level=2, log_out=out)
    assert fd.detach() == 5
    sizes = [s.ProgLoadAttr.from_buffer_copy(raw).log_size for _, raw, _ in f.calls]
    assert sizes[0] < needed <= sizes[-1] and sizes == sorted(sizes)


def test_log_buffer_grows_on_the_retry_with_a_log_too(fake) -> None:
    needed = 2_000_000
    log_text = b"R1 invalid mem access\n"

    def answer(cmd, addr, size):
        a = s.ProgLoadAttr.from_address(addr)
        if not a.log_level:
            return -errno.EACCES
        a.log_true_size = needed
        if a.log_size < needed:
            return -errno.ENOSPC
        ctypes.memmove(a.log_buf, log_text, len(log_text))
        return -errno.EACCES

    f = fake(answer)
    with pytest.raises(VerifierError) as exc:
        s.prog_load(ProgType.SOCKET_FILTER, EXIT)
    assert exc.value.log == log_text.decode() and exc.value.errno == errno.EACCES
    attrs = [s.ProgLoadAttr.from_buffer_copy(raw) for _, raw, _ in f.calls]
    assert [a.log_level for a in attrs] == [0, 1, 1]
    assert [a.log_size for a in attrs] == [0, 1 << 18, needed + 1]  # 4x would be too small: the kernel's size wins


def test_prog_load_passes_instructions_license_and_btf_info(fake) -> None:
    seen = {}

    def answer(cmd, addr, size):
        a = s.ProgLoadAttr.from_address(addr)
        seen["insns"] = ctypes.string_at(a.insns, a.insn_cnt * 8)
        seen["license"] = ctypes.string_at(a.license)
        seen["func"] = (a.func_info_cnt, a.func_info_rec_size)
        seen["line"] = (a.line_info_cnt, a.line_info_rec_size)
        seen["eat"] = a.expected_attach_type
        return 4

    fake(answer)
    s.prog_load(ProgType.TRACING, EXIT * 3, "Dual BSD/GPL", func_info=b"\0" * 16, line_info=b"\0" * 48,
                expected_attach_type=AttachType.TRACE_FENTRY).detach()
    assert seen == {"insns": EXIT * 3, "license": b"Dual BSD/GPL", "func": (2, 8), "line": (3, 16),
                    "eat": AttachType.TRACE_FENTRY}


def test_misaligned_instructions_are_refused_before_the_kernel(fake) -> None:
    f = fake(lambda *a: 3)
    with pytest.raises(BpfError):
        s.prog_load(ProgType.KPROBE, b"\x95\0\0")
    assert f.calls == []


# --- links ------------------------------------------------------------------


def test_tracing_multi_link_passes_ids_cookies_and_count(fake) -> None:
    seen = {}

    def answer(cmd, addr, size):
        a = s.LinkCreateAttr.from_address(addr)
        tm = a.tracing_multi
        seen["ids"] = list((ctypes.c_uint32 * tm.cnt).from_address(tm.ids))
        seen["cookies"] = list((ctypes.c_uint64 * tm.cnt).from_address(tm.cookies))
        seen["type"] = a.attach_type
        return 11

    fake(answer)
    s.link_create_tracing_multi(3, AttachType.TRACE_FENTRY_MULTI, [10, 20, 30], cookies=[1, 2, -1]).detach()
    assert seen == {"ids": [10, 20, 30], "cookies": [1, 2, (1 << 64) - 1], "type": AttachType.TRACE_FENTRY_MULTI}


def test_tracing_multi_cookie_count_must_match(fake) -> None:
    fake(lambda *a: 3)
    with pytest.raises(BpfError):
        s.link_create_tracing_multi(3, AttachType.TRACE_FENTRY_MULTI, [1, 2], cookies=[1])


def test_uprobe_multi_link_attr(fake) -> None:
    seen = {}

    def answer(cmd, addr, size):
        um = s.LinkCreateAttr.from_address(addr).uprobe_multi
        seen["path"] = ctypes.string_at(um.path)
        seen["offs"] = list((ctypes.c_uint64 * um.cnt).from_address(um.offsets))
        seen["flags"], seen["pid"], seen["refs"] = um.flags, um.pid, um.ref_ctr_offsets
        return 12

    fake(answer)
    s.link_create_uprobe_multi(3, "/bin/true", [0x10, 0x20], pid=42, retprobe=True).detach()
    assert seen == {"path": b"/bin/true", "offs": [0x10, 0x20], "flags": 1, "pid": 42, "refs": 0}


def test_link_update_sets_replace_only_with_old_program(fake) -> None:
    f = fake(lambda *a: 0)
    s.link_update(5, 6)
    s.link_update(5, 6, old_prog_fd=7)
    a0, a1 = (s.LinkUpdateAttr.from_buffer_copy(raw) for _, raw, _ in f.calls)
    assert (a0.flags, a0.old_prog_fd) == (0, 0)
    assert (a1.flags, a1.old_prog_fd, a1.new_prog_fd) == (s.F_REPLACE, 7, 6)


def test_batch_lookup_enoent_means_done(fake) -> None:
    def answer(cmd, addr, size):
        a = s.MapBatchAttr.from_address(addr)
        a.count = 3
        return -errno.ENOENT

    fake(answer)
    res = s.map_lookup_batch(3, None, bytearray(4), bytearray(40), bytearray(40), 10)
    assert res == s.BatchResult(3, True)


def test_perf_ioctl_numbers() -> None:
    # _IO/_IOW/_IOWR('$', n, type) as in linux/perf_event.h on x86-64
    assert s.PERF_EVENT_IOC_ENABLE == 0x2400
    assert s.PERF_EVENT_IOC_DISABLE == 0x2401
    assert s.PERF_EVENT_IOC_SET_BPF == 0x40042408
    assert s.PERF_EVENT_IOC_QUERY_BPF == 0xC008240A
    assert s.PERF_EVENT_IOC_ID == 0x80082407
    assert ctypes.sizeof(s.PerfEventAttr) == 136
