"""Workloads of the kprobe/fentry corpus tools whose maps (and events) are
compared between the VM tier's guest kernel and the emulated kernel.

One :class:`GuestWorkload` per tool (:data:`GUEST_WORKLOADS`): what a forked
child does on the guest's kernel (:attr:`~GuestWorkload.act`), the same work
as the emulated kernel's probes see it (:attr:`~GuestWorkload.drive`: calls of
the probed kernel functions with the arguments the kernel passes, in kernel
structs holding what the real calls' structs hold), what is compared
(:attr:`~GuestWorkload.pick`) and what the workload determines it to be
(:attr:`~GuestWorkload.want`). :func:`run_real` and :func:`run_emulated`
run one side each; ``test_corpus_guest.py`` compares the two in the guest,
``test_corpus_emulated_maps.py`` checks the emulated side alone on any machine.

Every run happens on a tmpfs the test mounts (:func:`tmpfs`), so that the
kernel functions a system call reaches are the VFS's own, not an overlay's
second call of them on its upper file system.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import json
import os
import signal
import socket
import stat
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_harness import object_path, started
from corpus_probes import LiveProbe
from corpus_tools import TOOLS

from bpfmux.obj import load_object

#: the emulated workload's process (pid = tgid)
EMU_PID = 4242
#: ``FMODE_CREATED``: ``file->f_mode`` of a file its open created
FMODE_CREATED = 0x100000
#: bytes the TCP workload's client sends, and the server's reply
SENT, REPLY = 100, 60
#: TCP states (``include/net/tcp_states.h``): a connected socket's, a connecting one's until the SYN-ACK is
#: processed, one whose peer has closed, a listener's
TCP_ESTABLISHED, TCP_SYN_SENT, TCP_CLOSE_WAIT, TCP_LISTEN = 1, 2, 8, 10
#: tcptracer's event types (``enum tcp_event_type``)
TRACER_CONNECT, TRACER_ACCEPT, TRACER_CLOSE = 0, 1, 2
#: the workload's comm, on both sides
COMM = "bpfmux-guestwl"
#: reads and writes (of one and two bytes) the file workloads make
READS, WRITES = 5, 3
#: the address and port the socket workloads bind (the guest runs nothing else that could hold them)
ADDR, PORT = "127.0.0.1", 47123
#: :data:`ADDR` as the kernel stores it (network order), read as a little-endian u32
ADDR_U32 = int.from_bytes(socket.inet_aton(ADDR), "little")
#: ``listen(2)``'s backlog in the socket workloads
BACKLOG = 5
#: ``CAP_SYS_NICE``: what lowering one's nice value needs
CAP_SYS_NICE = 23
#: the page size (x86-64's, the guest's)
PAGE_SIZE = 4096
#: a regular file's mode (``S_IFREG | 0644``)
REG_MODE = stat.S_IFREG | 0o644


def _order(value: Any) -> str:
    """A sort key for JSON values (dicts by content, whatever their keys' order)."""
    return json.dumps(value, sort_keys=True)


@dataclass
class Side:
    """One side's result: the tool's maps (name → map), its decoded events (map name → records), the
    workload's pid."""

    maps: dict[str, Any]
    events: dict[str, list[Any]]
    pid: int


@dataclass(frozen=True)
class GuestWorkload:
    """One tool's workload on both kernels and what is compared.

    :ivar act: the child's work on the real kernel (``act(dir)``; ``dir`` is the tmpfs, holding a 64-byte
        file ``f``), after the tool is attached; the child's comm is :data:`COMM`.
    :ivar drive: the same work in the emulated kernel (``drive(emu)``); the current task is the workload's
        (pid :data:`EMU_PID`, comm :data:`COMM`).
    :ivar pick: the values compared, from one side (pids as "the workload's": each run's own).
    :ivar want: what the workload determines :attr:`pick` to be (the real side must show exactly this), or a
        function of the kernel's BTF giving it (:meth:`expected`: a tool whose CO-RE choices differ by kernel).
    :ivar compared: what :attr:`pick` keeps, in words.
    :ivar pid_var: the tool's process filter, set to the workload's pid; ``None``: the tool has none and
        counts the whole machine (the guest runs nothing but the test).
    :ivar reset: global variables zeroed after attach (counters of a tool without a process filter: the
        attaching itself is not the workload).
    :ivar setup: what the test process sets up on the real kernel before the tool is attached (a context
        manager: undone after the run).
    :ivar status: the child's wait status (``os.waitpid``) after the workload.
    :ivar overrides: the tool's global variables set as its command-line options would, on both sides.
    :ivar attach: programs attached by hand to kernel functions (program → functions), as the tool's user
        space does for the functions named on its command line.
    :ivar configure: what the tool's user space writes into its maps after attach: ``configure(maps,
        address_of, pid)`` (``address_of(function)``: the kernel function's address on that side).
    :ivar event_type: the type of its event records, where their size does not tell (``bpfmux run
        --event-type``).
    """

    act: Callable[[Path], None]
    drive: Callable[[Any], None]
    pick: Callable[[Side], Any]
    want: Any
    compared: str
    pid_var: str | None = None
    reset: dict[str, tuple[str, ...]] = field(default_factory=dict)
    setup: Callable[[], AbstractContextManager[Any]] | None = None
    status: int = 0
    overrides: dict[str, Any] = field(default_factory=dict)
    attach: dict[str, tuple[str, ...]] = field(default_factory=dict)
    configure: Callable[[dict[str, Any], Callable[[str], int], int], None] | None = None
    event_type: str | None = None

    def expected(self, btf: Any) -> Any:
        """:attr:`want` on the kernel whose BTF is ``btf``."""
        return self.want(btf) if callable(self.want) else self.want


# --- kernel structs for the emulated calls ---------------------------------------------------------------

def kstruct(emu: Any, name: str, values: dict[str, int]) -> int:
    """A ``struct name`` of the emulated kernel's BTF in its memory, zeroed but for ``values`` (dotted field
    paths → integers, pointers included); its address."""
    from bpfmux.btf.layout import member, sizeof

    t = emu.btf.find(name, "struct")
    buf = bytearray(sizeof(emu.btf, t))
    for path, value in values.items():
        f = member(emu.btf, t, path)
        assert not f.is_bitfield, path
        buf[f.offset:f.offset + f.size] = (value & ((1 << (8 * f.size)) - 1)).to_bytes(f.size, "little")
    return emu.alloc(bytes(buf), f"struct {name}")


def regular_file(emu: Any, name: str) -> int:
    """A ``struct file`` of a regular file ``name`` (on a device 42, inode 7); its address."""
    sb = kstruct(emu, "super_block", {"s_dev": 42})
    inode = kstruct(emu, "inode", {"i_mode": REG_MODE, "i_ino": 7, "i_sb": sb})
    dentry = kstruct(emu, "dentry", {"d_name.name": emu.alloc(name.encode() + b"\0")})
    return kstruct(emu, "file", {"f_inode": inode, "f_path.dentry": dentry})


def bound_socket(emu: Any) -> int:
    """A ``struct socket`` of a TCP/IPv4 socket bound to ``ADDR:PORT``, as ``inet_create`` and ``inet_bind``
    leave it (family, type, protocol, bound and source address, source port in network order, ``uc_ttl``
    -1); its address."""
    sk = kstruct(emu, "inet_sock", {"sk.__sk_common.skc_family": socket.AF_INET, "sk.sk_type": socket.SOCK_STREAM,
                                    "sk.sk_protocol": socket.IPPROTO_TCP, "sk.__sk_common.skc_rcv_saddr": ADDR_U32,
                                    "inet_saddr": ADDR_U32, "inet_sport": socket.htons(PORT), "uc_ttl": -1})
    return kstruct(emu, "socket", {"type": socket.SOCK_STREAM, "sk": sk})


def tcp_sock(emu: Any, lport: int, dport: int, srtt_us: int = 0, **more: int) -> int:
    """A TCP/IPv4 socket's ``struct tcp_sock`` (its ``struct inet_sock`` and ``struct sock`` first) of a
    connection from ``ADDR:lport`` to ``ADDR:dport``: addresses and ports in network order, the local port also
    in host order (``skc_num``), as the kernel holds them; a smoothed round-trip time ``srtt_us`` (the
    kernel's unit: 1/8 us); with ``more`` fields (paths in ``struct sock``); its address."""
    inet = "inet_conn.icsk_inet."
    return kstruct(emu, "tcp_sock", {f"{inet}sk.__sk_common.skc_family": socket.AF_INET,
                                     f"{inet}sk.__sk_common.skc_rcv_saddr": ADDR_U32 if lport else 0,
                                     f"{inet}sk.__sk_common.skc_daddr": ADDR_U32 if dport else 0,
                                     f"{inet}sk.__sk_common.skc_num": lport,
                                     f"{inet}inet_sport": socket.htons(lport),
                                     f"{inet}sk.__sk_common.skc_dport": socket.htons(dport),
                                     "srtt_us": srtt_us, **{f"{inet}sk.{k}": v for k, v in more.items()}})


def _args(emu: Any, name: str, *first: int) -> list[int]:
    """``first`` and zeros for the rest of function ``name``'s arguments."""
    return [*first, *([0] * (emu.function(name).nargs - len(first)))]


def current_task(emu: Any) -> int:
    """The emulated workload's ``struct task_struct`` (pid, tgid, a ``fs_struct`` whose working directory's
    mount is a ``vfsmount``), what ``bpf_get_current_task_btf`` returns; its address."""
    mnt = kstruct(emu, "vfsmount", {})
    fs = kstruct(emu, "fs_struct", {"pwd.mnt": mnt})
    return kstruct(emu, "task_struct", {"pid": EMU_PID, "tgid": EMU_PID, "fs": fs})


# --- the workloads ----------------------------------------------------------------------------------------

def _read_write(d: Path) -> None:
    """READS reads of one byte and WRITES writes of two bytes on the file ``f``."""
    fd = os.open(d / "f", os.O_RDWR)
    for _ in range(READS):
        os.read(fd, 1)
    for _ in range(WRITES):
        os.write(fd, b"ab")


def _drive_read_write(emu: Any) -> None:
    """``_read_write``'s calls: ``vfs_read(file, buf, 1, pos)`` READS times, ``vfs_write(file, buf, 2, pos)``
    WRITES times, on a regular file ``f``."""
    file = regular_file(emu, "f")
    for _ in range(READS):
        emu.call("vfs_read", file, 0, 1, 0)
    for _ in range(WRITES):
        emu.call("vfs_write", file, 0, 2, 0)


def _pick_funclatency(s: Side) -> Any:
    """The histogram's total (its slots are latencies, each run's own) and the entries left in ``starts``."""
    from bpfmux.show.maps import read_map

    hist = dict(read_map(".bss", s.maps[".bss"]).entries)["hist"]
    return {"total": sum(hist), "starts": len(read_map("starts", s.maps["starts"]).entries)}


def _pick_filetop(s: Side) -> Any:
    """The workload's entries: every value field but pid and tid (the workload's, its only thread)."""
    from bpfmux.show.maps import read_map
    from bpfmux.show.values import plain

    out = []
    for _, v in read_map("entries", s.maps["entries"]).entries:
        v = plain(v)
        if v["pid"] == s.pid:
            out.append({**{k: x for k, x in v.items() if k not in ("pid", "tid")}, "tid": v["tid"] == s.pid})
    return out


def _vfs_all(d: Path) -> None:
    """Calls of the functions vfsstat counts: open (of ``f``), READS reads, WRITES writes, mknod of a regular
    file (``vfs_create``), its unlink, mkdir and rmdir. Not fsync(2): the guest's kernel does not count it
    (measured 0: its ``do_fsync`` has the one-line ``vfs_fsync`` inlined), so its counter stays 0."""
    _read_write(d)
    os.mknod(d / "n", REG_MODE)
    os.unlink(d / "n")
    os.mkdir(d / "d")
    os.rmdir(d / "d")


#: vfsstat's counters in the order of its ``stats`` array (``enum stat_types``)
VFS_FUNCTIONS = ("vfs_read", "vfs_write", "vfs_fsync", "vfs_open", "vfs_create", "vfs_unlink", "vfs_mkdir",
                 "vfs_rmdir")
#: what ``_vfs_all`` makes each function count, the parent's one-byte "go" write to the child included
VFS_COUNTS = (READS, WRITES + 1, 0, 1, 1, 1, 1, 1)


def _drive_vfs_all(emu: Any) -> None:
    """``VFS_COUNTS`` calls of each function (vfsstat reads no argument: they are zeros)."""
    for name, n in zip(VFS_FUNCTIONS, VFS_COUNTS, strict=True):
        f = emu.function(name)
        for _ in range(n):
            emu.call(f, *([0] * f.nargs))


def _pick_vfsstat(s: Side) -> Any:
    from bpfmux.show.maps import read_map

    return list(dict(read_map(".bss", s.maps[".bss"]).entries)["stats"])


def _nice(d: Path) -> None:
    """Lower the nice value by one (``setpriority``: ``can_nice`` asks ``capable(CAP_SYS_NICE)``)."""
    os.nice(-1)


def _drive_nice(emu: Any) -> None:
    """``_nice``'s capability check: ``cap_capable(cred, ns, CAP_SYS_NICE, CAP_OPT_NONE)`` returning 0."""
    emu.call("cap_capable", 0, 0, CAP_SYS_NICE, 0)


def _pick_events(name: str, drop: tuple[str, ...] = (), pids: tuple[str, ...] = ("pid",),
                 cut: dict[str, int] | None = None) -> Callable[[Side], Any]:
    """Events of map ``name``: every field but ``drop``, ``pids`` as "the workload's", ``cut`` fields (byte
    arrays, shown in hex) to their first characters."""
    def pick(s: Side) -> Any:
        out = []
        for e in s.events.get(name, []):
            e = {k: v for k, v in e.items() if k not in drop}
            for k in pids:
                e[k] = e[k] == s.pid
            for k, n in (cut or {}).items():
                e[k] = e[k][:n]
            out.append(e)
        return out

    return pick


@contextlib.contextmanager
def loopback_up() -> Iterator[None]:
    """The guest's ``lo`` starts down; up, the kernel gives it 127.0.0.1 (left up)."""
    import fcntl
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, 0x8913, struct.pack("16sH22x", b"lo", 0)))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
    yield


def _listen(d: Path) -> None:
    """A TCP socket bound to ``ADDR:PORT``, listening with BACKLOG."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((ADDR, PORT))
        s.listen(BACKLOG)


def _drive_bind(emu: Any) -> None:
    """``inet_bind(sock, uaddr, addrlen)`` returning 0, on the socket it leaves bound."""
    emu.call("inet_bind", bound_socket(emu), 0, 16)


def _drive_listen(emu: Any) -> None:
    """``inet_listen(sock, BACKLOG)`` returning 0, on a bound socket."""
    emu.call("inet_listen", bound_socket(emu), BACKLOG)


def _create_unlink(d: Path) -> None:
    """Create the regular file ``n`` (``open(O_CREAT)``), close and unlink it."""
    os.close(os.open(d / "n", os.O_CREAT | os.O_WRONLY, 0o644))
    os.unlink(d / "n")


def _drive_create_unlink(emu: Any) -> None:
    """``_create_unlink``'s calls as filelife sees them: ``security_inode_create(dir, dentry, mode)`` of ``n``,
    ``vfs_open(path, file)`` of the file its open created (``FMODE_CREATED``), then ``vfs_unlink(idmap, dir,
    dentry, delegated)`` returning 0."""
    dir_ = kstruct(emu, "inode", {"i_mode": stat.S_IFDIR | 0o755})
    dentry = kstruct(emu, "dentry", {"d_name.name": emu.alloc(b"n\0")})
    path = kstruct(emu, "path", {"dentry": dentry})
    file = kstruct(emu, "file", {"f_mode": FMODE_CREATED, "f_path.dentry": dentry})
    emu.call("security_inode_create", dir_, dentry, REG_MODE)
    emu.call("vfs_open", path, file)
    emu.vm.clock.advance(1_000_000)
    emu.call("vfs_unlink", *_args(emu, "vfs_unlink", 0, dir_, dentry))


def _filelife_want(btf: Any) -> Any:
    """One event, of the unlinked file ``n``, where filelife's CO-RE test finds ``vfs_unlink``'s dentry argument
    (``struct renamedata`` has ``old_mnt_userns`` or ``new_mnt_idmap``: the guest's 6.12); none where it does
    not (later kernels' ``renamedata`` has one ``mnt_idmap``: the tool then looks the file up by its
    directory, and finds nothing, on a real kernel as in the emulated one)."""
    from bpfmux.btf.layout import member
    from bpfmux.errors import NotFoundError

    t = btf.find("renamedata", "struct")
    found = False
    for name in ("old_mnt_userns", "new_mnt_idmap"):
        try:
            member(btf, t, name)
            found = True
        except NotFoundError:
            pass
    return [{"fname": {"pathes": "n", "depth": 0, "failed": 0}, "task": COMM, "tgid": True}] if found else []


#: the memory cgroup the oomkill workload runs out of memory in, and its limit
OOM_CGROUP, OOM_LIMIT = Path("/sys/fs/cgroup/bpfmux-oomkill"), 16 << 20


@contextlib.contextmanager
def oom_cgroup() -> Iterator[None]:
    """:data:`OOM_CGROUP` with the memory controller, ``memory.max`` :data:`OOM_LIMIT` and no swap; removed
    after.

    :raises OSError: cgroup2 is not mounted or has no memory controller.
    """
    root = OOM_CGROUP.parent
    if "memory" not in (root / "cgroup.subtree_control").read_text().split():
        (root / "cgroup.subtree_control").write_text("+memory")
    OOM_CGROUP.mkdir(exist_ok=True)
    try:
        (OOM_CGROUP / "memory.max").write_text(str(OOM_LIMIT))
        with contextlib.suppress(FileNotFoundError):  # no swap accounting without swap support
            (OOM_CGROUP / "memory.swap.max").write_text("0")
        yield
    finally:
        OOM_CGROUP.rmdir()


def _out_of_memory(d: Path) -> None:
    """Join :data:`OOM_CGROUP` and allocate four times its limit: the cgroup's OOM killer kills this process."""
    (OOM_CGROUP / "cgroup.procs").write_text("0")
    hog = b"x" * (4 * OOM_LIMIT)
    os.write(2, f"not killed after allocating {len(hog)} bytes\n".encode())  # not reached


def _drive_oom(emu: Any) -> None:
    """``oom_kill_process(oc, message)`` in the workload's context, its ``oom_control`` choosing the workload
    (its task_struct: tgid, comm) out of ``totalpages`` = the cgroup's limit in pages (no swap)."""
    victim = kstruct(emu, "task_struct", {"tgid": EMU_PID, "pid": EMU_PID,
                                          "comm": int.from_bytes(COMM.encode(), "little")})
    oc = kstruct(emu, "oom_control", {"chosen": victim, "totalpages": OOM_LIMIT // PAGE_SIZE})
    emu.call("oom_kill_process", oc, emu.alloc(b"Memory cgroup out of memory\0"))


#: ksnoop's value bases (``enum arg``): the third argument, the return value
KSNOOP_ARG3, KSNOOP_RETURN = 2, 5
#: ksnoop's ``data_flags`` of an entry and of a return record
KSNOOP_F_ENTRY, KSNOOP_F_RETURN = 0x4, 0x8


def _configure_ksnoop(maps: dict[str, Any], address_of: Callable[[str], int], pid: int) -> None:
    """What ``ksnoop -p PID "vfs_read(count, return)"`` writes: ``vfs_read``'s description at its address,
    tracing its third argument (``size_t count``) on entry and its return value (``ssize_t``) on return, for
    thread ``pid`` only (the type ids are the kernel BTF's ``size_t`` and ``ssize_t``)."""
    from bpfmux.btf import Btf

    btf = Btf.vmlinux()
    ip = address_of("vfs_read")
    traces = [{"name": "count", "base_arg": KSNOOP_ARG3, "size": 8, "type_id": btf.find("size_t", "typedef").id},
              {"name": "return", "base_arg": KSNOOP_RETURN, "size": 8, "type_id": btf.find("ssize_t", "typedef").id}]
    maps["ksnoop_func_map"][ip] = {"func": {"name": "vfs_read", "nr_args": 4, "ip": ip}, "nr_traces": len(traces),
                                   "filter_pid": pid, "traces": traces}


def _drive_ksnoop(emu: Any) -> None:
    """``_read_write``'s calls, each ``vfs_read`` reading the byte it asks for (returning 1)."""
    emu.function("vfs_read").body = lambda file, buf, count, pos: count
    _drive_read_write(emu)


def _pick_ksnoop(s: Side) -> Any:
    """The records: function name, the pid being the workload's, entry or return, each traced value's raw
    value, error and bytes; not the task pointer, cpu and time."""
    out = []
    for e in s.events.get("ksnoop_perf_map", []):
        data = [{k: d[k] for k in ("raw_value", "err", "buf_offset", "buf_len")} for d in e["trace_data"]]
        out.append({"func": e["func"]["name"], "pid": e["pid"] == s.pid, "data_flags": e["data_flags"],
                    "trace_data": data, "buf": e["buf"][:2 * e["buf_len"]] if isinstance(e["buf"], str) else e["buf"]})
    return sorted(out, key=_order)


def _ksnoop_records() -> list[Any]:
    """READS entry records (``count`` = 1 in the first value) and READS return records (1 byte read, in the
    second), each value's 8 bytes in the buffer."""
    zero = {"raw_value": 0, "err": 0, "buf_offset": 0, "buf_len": 0}
    one = {**zero, "raw_value": 1, "buf_len": 8}
    common = {"func": "vfs_read", "pid": True, "buf": (1).to_bytes(8, "little").hex()}
    entry = {**common, "data_flags": KSNOOP_F_ENTRY, "trace_data": [one, *[zero] * 5]}
    ret = {**common, "data_flags": KSNOOP_F_RETURN, "trace_data": [zero, one, *[zero] * 4]}
    return sorted([entry] * READS + [ret] * READS, key=_order)


def _tcp_exchange(port: int) -> Callable[[Path], None]:
    """One TCP connection over loopback, both ends the workload's: a listener on ``ADDR:port`` (backlog
    BACKLOG), a client bound to ``ADDR:port+1`` connecting to it; the client sends SENT bytes, the accepted
    socket receives them and replies REPLY bytes, which the client receives. Each tool has its own ports (a
    closed connection's ports stay in TIME_WAIT)."""
    def act(d: Path) -> None:
        with socket.socket() as srv, socket.socket() as cli:
            srv.bind((ADDR, port))
            srv.listen(BACKLOG)
            cli.bind((ADDR, port + 1))
            cli.connect((ADDR, port))
            conn, _ = srv.accept()
            with conn:
                cli.sendall(b"x" * SENT)
                got = b""
                while len(got) < SENT:
                    got += conn.recv(SENT - len(got))
                conn.sendall(b"y" * REPLY)
                got = b""
                while len(got) < REPLY:
                    got += cli.recv(REPLY - len(got))

    return act


#: each TCP tool's listening port (the client's is the next)
TCP_PORTS = {"tcpconnect": 47200, "tcpconnlat": 47210, "tcpsynbl": 47220, "tcptop": 47230, "tcptracer": 47240,
             "tcprtt": 47250}


def _drive_connect(emu: Any) -> None:
    """The client's ``tcp_v4_connect(sk, uaddr, addrlen)`` returning 0, on the socket it leaves connecting."""
    port = TCP_PORTS["tcpconnect"]
    emu.call("tcp_v4_connect", tcp_sock(emu, port + 1, port, **{"__sk_common.skc_state": TCP_SYN_SENT}), 0, 16)


def _drive_connlat(emu: Any) -> None:
    """The client's ``tcp_v4_connect``, then ``tcp_rcv_state_process(sk, skb)`` of the SYN-ACK on it (still
    SYN_SENT)."""
    port = TCP_PORTS["tcpconnlat"]
    sk = tcp_sock(emu, port + 1, port, **{"__sk_common.skc_state": TCP_SYN_SENT})
    emu.call("tcp_v4_connect", sk, 0, 16)
    emu.vm.clock.advance(50_000)
    emu.call("tcp_rcv_state_process", *_args(emu, "tcp_rcv_state_process", sk))


def _drive_synbl(emu: Any) -> None:
    """The listener's ``tcp_v4_syn_recv_sock`` for the client's final ACK: its backlog 0 of BACKLOG."""
    port = TCP_PORTS["tcpsynbl"]
    listener = tcp_sock(emu, port, 0, sk_max_ack_backlog=BACKLOG, sk_ack_backlog=0)
    emu.call("tcp_v4_syn_recv_sock", *_args(emu, "tcp_v4_syn_recv_sock", listener))


def _drive_top(emu: Any) -> None:
    """``tcp_sendmsg(sk, msg, size)`` of the client's SENT bytes, ``tcp_cleanup_rbuf(sk, copied)`` of the
    accepted socket's receipt of them; the same for the REPLY bytes the other way."""
    port = TCP_PORTS["tcptop"]
    cli, conn = tcp_sock(emu, port + 1, port), tcp_sock(emu, port, port + 1)
    emu.call("tcp_sendmsg", cli, 0, SENT)
    emu.call("tcp_cleanup_rbuf", conn, SENT)
    emu.call("tcp_sendmsg", conn, 0, REPLY)
    emu.call("tcp_cleanup_rbuf", cli, REPLY)


def _drive_rtt(emu: Any) -> None:
    """``tcp_rcv_established(sk, skb)`` for each segment the connection's established sockets receive: the
    client's data (accepted socket), its ACK (client: ACKs go out at once in a connection's quick-ACK start),
    the reply (client), its ACK (accepted socket), the accepted socket's FIN (client; the rest of the close
    reaches sockets no longer established)."""
    port = TCP_PORTS["tcprtt"]
    cli = tcp_sock(emu, port + 1, port, srtt_us=8 * 50)
    conn = tcp_sock(emu, port, port + 1, srtt_us=8 * 50)
    for sk in (conn, cli, cli, conn, cli):
        emu.call("tcp_rcv_established", *_args(emu, "tcp_rcv_established", sk))


def _pick_rtt(s: Side) -> Any:
    """hists: each key and its count of segments (``cnt``, and the slots' total: the slots are round-trip
    times)."""
    return [[k, {"cnt": v["cnt"], "total": sum(v["slots"])}] for k, v in _pick_map("hists")(s)]


def netns_inum() -> int:
    """The inode number of this process's network namespace (``net->ns.inum``)."""
    return os.stat("/proc/self/ns/net").st_ino


def _drive_tracer(emu: Any) -> None:
    """The workload's connection as tcptracer's probes see it: the client's ``tcp_v4_connect`` returning 0,
    its ``tcp_set_state(sk, TCP_ESTABLISHED)`` at the SYN-ACK, the listener's ``inet_csk_accept`` returning
    the accepted socket, then ``tcp_close`` of the accepted socket (established), the client's
    ``tcp_set_state(sk, TCP_CLOSE_WAIT)`` at its FIN, ``tcp_close`` of the client and of the listener; every
    socket in this namespace (``tcp_set_state``'s body sets the state)."""
    from bpfmux.btf.layout import member

    port = TCP_PORTS["tcptracer"]
    net = kstruct(emu, "net", {"ns.inum": netns_inum()})
    cli = tcp_sock(emu, port + 1, port, **{"__sk_common.skc_state": TCP_SYN_SENT, "__sk_common.skc_net.net": net})
    conn = tcp_sock(emu, port, port + 1, **{"__sk_common.skc_state": TCP_ESTABLISHED,
                                            "__sk_common.skc_net.net": net})
    listener = tcp_sock(emu, port, 0, **{"__sk_common.skc_state": TCP_LISTEN, "__sk_common.skc_net.net": net})
    state = member(emu.btf, emu.btf.find("sock", "struct"), "__sk_common.skc_state")
    emu.function("tcp_set_state").body = lambda sk, st: emu.write(sk + state.offset, bytes([st]))
    emu.call("tcp_v4_connect", cli, 0, 16)
    emu.call("tcp_set_state", cli, TCP_ESTABLISHED)
    accept = emu.function("inet_csk_accept")
    accept.body = lambda *_: conn
    emu.call(accept, *_args(emu, accept.name, listener))
    emu.call("tcp_close", conn, 0)
    emu.call("tcp_set_state", cli, TCP_CLOSE_WAIT)  # the accepted socket's FIN
    emu.call("tcp_close", cli, 0)
    emu.call("tcp_close", listener, 0)


def _tracer_events() -> list[Any]:
    """tcptracer's events of the workload's connection (sorted): connect, accept, the two ends' closes."""
    port = TCP_PORTS["tcptracer"]
    one = {"saddr_v4": ADDR_U32, "daddr_v4": ADDR_U32, "task": COMM, "af": socket.AF_INET, "pid": True,
           "uid": 0, "netns": netns_inum()}
    cli, srv = socket.htons(port + 1), socket.htons(port)
    return sorted(({**one, "type": t, "sport": sport, "dport": dport}
                   for t, sport, dport in ((TRACER_CONNECT, cli, srv), (TRACER_ACCEPT, srv, cli),
                                           (TRACER_CLOSE, srv, cli), (TRACER_CLOSE, cli, srv))), key=_order)


def _sorted(pick: Callable[[Side], Any]) -> Callable[[Side], Any]:
    """``pick``'s list sorted (events of several CPUs' buffers come in no defined order)."""
    return lambda s: sorted(pick(s), key=_order)


def _pick_map(name: str, pids: tuple[str, ...] = ()) -> Callable[[Side], Any]:
    """Every entry of hash map ``name`` as ``[key, value]``, sorted; key fields ``pids`` as "the
    workload's"."""
    def pick(s: Side) -> Any:
        from bpfmux.show.maps import read_map
        from bpfmux.show.values import plain

        out = []
        for k, v in read_map(name, s.maps[name]).entries:
            k, v = plain(k), plain(v)
            if isinstance(k, dict):
                k = {f: (x == s.pid if f in pids else x) for f, x in k.items()}
            out.append([k, v])
        return sorted(json.loads(json.dumps(out)), key=_order)

    return pick


#: event fields not compared for an IPv4 connection: the time, and the IPv6 views of the addresses (a union
#: with the IPv4 ones)
_V4_EVENT = ("ts_us", "saddr_v6", "daddr_v6")

#: tool → its workload on both kernels
GUEST_WORKLOADS: dict[str, GuestWorkload] = {
    "funclatency": GuestWorkload(
        _read_write, _drive_read_write, _pick_funclatency, {"total": READS, "starts": 0},
        "fentry/fexit on vfs_read: the histogram's total (slots are latencies) and no start left behind",
        pid_var="targ_tgid"),
    "filetop": GuestWorkload(
        _read_write, _drive_read_write, _pick_filetop,
        [{"reads": READS, "read_bytes": READS, "writes": WRITES, "write_bytes": 2 * WRITES, "filename": "f",
          "comm": COMM, "type": ord("R"), "tid": True}],
        "kprobes on vfs_read/vfs_write: the workload's entry: counts, bytes, comm, name, type, the tid being the "
        "workload's (not the device and inode numbers)", pid_var="target_pid"),
    "vfsstat": GuestWorkload(
        _vfs_all, _drive_vfs_all, _pick_vfsstat, list(VFS_COUNTS),
        "stats: every counter (read, write, fsync, open, create, unlink, mkdir, rmdir; fsync stays 0: the guest's "
        "kernel inlines vfs_fsync in fsync(2)); no process filter: the guest runs nothing else, the counters are "
        "zeroed after attach", reset={".bss": ("stats",)}),
    "capable": GuestWorkload(
        _nice, _drive_nice, _pick_events("events", pids=("pid", "tgid")),
        [{"pid": True, "cap": CAP_SYS_NICE, "tgid": True, "uid": 0, "audit": 1, "insetid": 0, "ret": 0,
          "task": COMM}],
        "events (kprobe and kretprobe on cap_capable): every field, pid and tgid as the workload's",
        pid_var="targ_pid"),
    "bindsnoop": GuestWorkload(
        _listen, _drive_bind, _pick_events("events", drop=("ts_us",), cut={"addr": 8}),
        [{"addr": socket.inet_aton(ADDR).hex(), "pid": True, "bound_dev_if": 0, "ret": 0, "port": PORT,
          "proto": socket.IPPROTO_TCP, "opts": 0, "ver": 4, "task": COMM}],
        "events (kprobe and kretprobe on inet_bind): every field but ts_us; addr's IPv4 bytes (the other 12 are "
        "the next fields of struct inet_sock)", pid_var="target_pid", setup=loopback_up),
    "solisten": GuestWorkload(
        _listen, _drive_listen, _pick_events("events"),
        [{"addr": [ADDR_U32, 0, 0, 0], "pid": True, "proto": (socket.AF_INET << 16) | socket.SOCK_STREAM,
          "backlog": BACKLOG, "ret": 0, "port": PORT, "task": COMM}],
        "events (fexit, or kprobe and kretprobe, on inet_listen): every field", pid_var="target_pid",
        setup=loopback_up),
    "tcpconnect": GuestWorkload(
        _tcp_exchange(TCP_PORTS["tcpconnect"]), _drive_connect, _pick_events("events", drop=_V4_EVENT),
        [{"saddr_v4": ADDR_U32, "daddr_v4": ADDR_U32, "task": COMM, "af": socket.AF_INET, "pid": True, "uid": 0,
          "sport": 0, "dport": socket.htons(TCP_PORTS["tcpconnect"])}],
        "events (kprobe and kretprobe on tcp_v4_connect): every field but ts_us (the v6 views of the addresses "
        "are the v4 ones)", pid_var="filter_pid", setup=loopback_up),
    "tcpconnlat": GuestWorkload(
        _tcp_exchange(TCP_PORTS["tcpconnlat"]), _drive_connlat,
        _pick_events("events", drop=("delta_us", *_V4_EVENT), pids=("tgid",)),
        [{"saddr_v4": ADDR_U32, "daddr_v4": ADDR_U32, "comm": COMM, "tgid": True, "af": socket.AF_INET,
          "lport": TCP_PORTS["tcpconnlat"] + 1, "dport": socket.htons(TCP_PORTS["tcpconnlat"])}],
        "events (tcp_v4_connect, tcp_rcv_state_process of the SYN-ACK): every field but ts_us and delta_us (the "
        "connection's latency)", pid_var="targ_tgid", setup=loopback_up),
    "tcpsynbl": GuestWorkload(
        _tcp_exchange(TCP_PORTS["tcpsynbl"]), _drive_synbl, _pick_map("hists"),
        [[BACKLOG, {"slots": [1] + [0] * 31}]],
        "hists: every key (listen backlog) and slot (backlog at the connection); no process filter: the guest "
        "runs nothing else", setup=loopback_up),
    "tcptop": GuestWorkload(
        _tcp_exchange(TCP_PORTS["tcptop"]), _drive_top, _pick_map("ip_map", pids=("pid",)),
        sorted(([{"saddr": ADDR_U32, "daddr": ADDR_U32, "pid": True, "name": COMM, "lport": lport, "dport": dport,
                  "family": socket.AF_INET}, {"sent": sent, "received": received}]
                for lport, dport, sent, received in ((TCP_PORTS["tcptop"], TCP_PORTS["tcptop"] + 1, REPLY, SENT),
                                                     (TCP_PORTS["tcptop"] + 1, TCP_PORTS["tcptop"], SENT, REPLY))),
               key=_order),
        "ip_map (tcp_sendmsg, tcp_cleanup_rbuf): every key (addresses, pid, comm, ports, family) and value (bytes "
        "sent and received), one per end of the connection", pid_var="target_pid", setup=loopback_up),
    "tcptracer": GuestWorkload(
        _tcp_exchange(TCP_PORTS["tcptracer"]), _drive_tracer,
        _sorted(_pick_events("events", drop=("ts_us", "saddr_v6", "daddr_v6"))), _tracer_events(),
        "events (kprobes on tcp_v4_connect, tcp_set_state, tcp_close, kretprobe on inet_csk_accept), sorted: "
        "every field but ts_us (the v6 views of the addresses are the v4 ones)", pid_var="filter_pid",
        setup=loopback_up),
    "filelife": GuestWorkload(
        _create_unlink, _drive_create_unlink, _pick_events("events", drop=("delta_ns",), pids=("tgid",)), _filelife_want,
        "events (kprobes on security_inode_create, vfs_open, vfs_unlink, kretprobe on vfs_unlink): every field "
        "but delta_ns (the file's age), the tgid being the workload's", pid_var="targ_tgid"),
    "oomkill": GuestWorkload(
        _out_of_memory, _drive_oom, _pick_events("events", pids=("fpid", "tpid")),
        [{"fpid": True, "tpid": True, "pages": OOM_LIMIT // PAGE_SIZE, "fcomm": COMM, "tcomm": COMM}],
        "events (kprobe on oom_kill_process): every field (the killing and killed process being the workload, "
        "the memory cgroup's limit in pages, both comms); no process filter: the guest runs nothing else",
        setup=oom_cgroup, status=int(signal.SIGKILL)),
    "tcprtt": GuestWorkload(
        _tcp_exchange(TCP_PORTS["tcprtt"]), _drive_rtt, _pick_rtt,
        [[{"family": socket.AF_INET, "addr": socket.inet_aton(ADDR).hex().ljust(32, "0")}, {"cnt": 5, "total": 5}]],
        "hists by remote address (targ_raddr_hist, targ_show_ext): each key (family, address) and its count of "
        "segments received by established sockets (5: data, reply, their ACKs, the first FIN), not the slots "
        "nor the latency sum (round-trip times); no process filter: the guest runs nothing else",
        overrides={"targ_raddr_hist": True, "targ_show_ext": True}, setup=loopback_up),
    "ksnoop": GuestWorkload(
        _read_write, _drive_ksnoop, _pick_ksnoop, _ksnoop_records(),
        "records (kprobe and kretprobe on vfs_read, described as ksnoop's user space does for \"vfs_read(count, "
        "return)\" with -p): function, pid, entry or return, each value's raw value, error and bytes; not the "
        "task pointer, cpu and time", attach={"kprobe_entry": ("vfs_read",), "kprobe_return": ("vfs_read",)},
        configure=_configure_ksnoop, event_type="trace"),
}


# --- running one side ----------------------------------------------------------------------------------

@contextlib.contextmanager
def tmpfs(path: Path) -> Iterator[Path]:
    """A tmpfs mounted on ``path`` (created), unmounted after.

    :raises OSError: mount(2) failed.
    """
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    path.mkdir(exist_ok=True)
    if libc.mount(b"bpfmux", bytes(path), b"tmpfs", 0, b"size=1m") != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {path}: {os.strerror(err)}")
    try:
        yield path
    finally:
        libc.umount2(bytes(path), 2)  # MNT_DETACH


class EventReaders:
    """The tool's ring buffers and perf buffers, opened before the workload; :meth:`take` decodes what they
    hold (map name → records, as plain JSON values)."""

    def __init__(self, tool: str, maps: dict[str, Any], emulated: bool, event_type: str | None = None) -> None:
        from bpfmux.show.events import EventTypes
        from bpfmux.uapi import MapType

        data = object_path(tool).read_bytes()
        self.types = EventTypes(load_object(data), data, event_type)
        self.raw: dict[str, list[tuple[bytes, bool]]] = {}
        self.readers: list[Any] = []
        self.perf: list[tuple[str, Any]] = []
        for name, m in maps.items():
            if int(m.type) == MapType.RINGBUF:
                self.readers.append(m.reader(lambda d, n=name: self.raw.setdefault(n, []).append((bytes(d), False))))
            elif int(m.type) == MapType.PERF_EVENT_ARRAY:
                if emulated:
                    self.perf += [(name, b) for b in m.open()]
                else:  # 64 pages a CPU: ksnoop's records are 4 KiB each
                    self.readers.append(r := m.reader(pages=64))
                    self.perf.append((name, r))

    def take(self) -> dict[str, list[Any]]:
        from bpfmux.show.values import plain

        for r in self.readers:
            if not self.perf or all(r is not b for _, b in self.perf):
                r.poll(0)
        for name, b in self.perf:
            got = b.drain()
            self.raw.setdefault(name, []).extend((d if isinstance(d, bytes) else d[1], True) for d in got)
            lost = b.lost if isinstance(b.lost, int) else sum(b.lost.values())
            assert not lost, f"{name}: {lost} records lost (a perf buffer too small for the workload's records)"
        return {name: json.loads(json.dumps([plain(self.types.decode(rec, perf=perf)[0]) for rec, perf in recs]))
                for name, recs in self.raw.items()}

    def close(self) -> None:
        for r in self.readers:
            close = getattr(r, "close", None)
            if close is not None:
                close()


def _reset(maps: dict[str, Any], w: GuestWorkload) -> None:
    for section, names in w.reset.items():
        for name in names:
            m = maps[section]
            value = m[name]
            m[name] = [0] * len(value) if isinstance(value, list) else 0


def _settings(tool: str, probe: LiveProbe, pid: int) -> Any:
    """The settings ``tool`` chooses on ``probe``'s kernel, with its workload's overrides, hand attaches and
    ``pid`` in its process filter."""
    w = GUEST_WORKLOADS[tool]
    settings = TOOLS[tool].settings(probe)
    settings.globals.update(w.overrides)
    if w.pid_var:
        settings.globals[w.pid_var] = pid
    for prog, functions in w.attach.items():
        settings.skip_attach.pop(prog, None)
        settings.attach[prog] = list(functions)
    return settings


def kallsyms_address(function: str) -> int:
    """``function``'s address in this kernel (``/proc/kallsyms``).

    :raises LookupError: no such text symbol (or addresses hidden: kptr_restrict).
    """
    with open("/proc/kallsyms") as f:
        for line in f:
            addr, kind, name = line.split()[:3]
            if name == function and kind in "tT" and int(addr, 16):
                return int(addr, 16)
    raise LookupError(f"{function} is not in /proc/kallsyms (or its addresses are hidden)")


def run_real(tool: str, d: Path) -> Any:
    """``tool`` on this (the guest's) kernel, a forked child doing the workload in ``d`` (a tmpfs holding
    the file ``f``); the picked values."""
    w = GUEST_WORKLOADS[tool]
    (d / "f").write_bytes(b"x" * 64)
    with w.setup() if w.setup is not None else contextlib.nullcontext():
        return _run_real(tool, d)


def _run_real(tool: str, d: Path) -> Any:
    w = GUEST_WORKLOADS[tool]
    t = TOOLS[tool]
    probe = LiveProbe()
    go_r, go_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child: wait, work, leave without cleanup (status 1: it failed)
        code = 1
        try:
            os.close(go_w)
            with open("/proc/self/comm", "w") as f:
                f.write(COMM)
            os.read(go_r, 1)  # entered before the probes are attached: its return is not counted
            w.act(d)
            code = 0
        finally:
            os._exit(code)
    os.close(go_r)
    try:
        settings = _settings(tool, probe, child)
        with started(probe.kernel, t, settings) as st:
            assert st.started and st.links, (st.failed, st.attach_failed)
            events = EventReaders(tool, st.coll.maps, emulated=False, event_type=w.event_type)
            try:
                # a first reading, before the workload: its imports would otherwise open and read files while
                # the probes count (vfsstat counts every process's opens and reads)
                w.pick(Side(st.coll.maps, events.take(), child))
                events.raw.clear()
                _reset(st.coll.maps, w)
                if w.configure is not None:
                    w.configure(st.coll.maps, kallsyms_address, child)
                os.write(go_w, b"g")
                _, status = os.waitpid(child, 0)
                pid, child = child, 0
                assert status == w.status, f"the workload's child ended with wait status {status:#x}"
                return w.pick(Side(st.coll.maps, events.take(), pid))
            finally:
                events.close()
    finally:
        os.close(go_w)
        if child:
            os.kill(child, 9)
            os.waitpid(child, 0)


def run_emulated(tool: str) -> Any:
    """``tool`` in the emulated kernel on this kernel's BTF, with the settings the tool chooses on this
    kernel, the emulated workload's pid in its filter; the picked values."""
    from bpfmux.btf import Btf
    from bpfmux.emu import Emulator
    from bpfmux.emu.vm.runtime import Task

    w = GUEST_WORKLOADS[tool]
    t = TOOLS[tool]
    settings = _settings(tool, LiveProbe(), EMU_PID)
    with Emulator(btf=Btf.vmlinux()) as emu, started(emu, t, settings) as st:
        assert st.started and st.links, (st.failed, st.attach_failed)
        events = EventReaders(tool, st.coll.maps, emulated=True, event_type=w.event_type)
        try:
            _reset(st.coll.maps, w)
            if w.configure is not None:
                w.configure(st.coll.maps, lambda f: int(emu.function(f).addr), EMU_PID)
            emu.vm.task = Task(pid=EMU_PID, tgid=EMU_PID, comm=COMM, task_struct=current_task(emu))
            w.drive(emu)
            return w.pick(Side(st.coll.maps, events.take(), EMU_PID))
        finally:
            events.close()
