"""Small workloads whose effect the corpus tests know exactly.

``python3 act.py ACTION ARGS…``: the process first names itself
``bpfmux-ACTION`` (its ``comm``), so events can be told apart from the
machine's, writes its pid to ``$ACT_PIDFILE`` (when set), waits
half a second (its interpreter's start-up burst of events drains from the
tools' buffers), then does exactly what ACTION says and exits 0.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import signal
import socket
import subprocess
import sys
import threading
import time

LIBC = ctypes.CDLL("libc.so.6", use_errno=True)
PR_SET_NAME = 15


def set_comm(name: str) -> None:
    LIBC.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def do_open(path: str, n: str) -> None:
    for _ in range(int(n)):
        os.close(os.open(path, os.O_RDONLY))


def do_stat(path: str, n: str) -> None:
    for _ in range(int(n)):
        os.stat(path)


def do_exec(marker: str, n: str) -> None:
    for i in range(int(n)):
        subprocess.run(["/bin/true", marker, str(i)], check=True)


def do_exit(code: str, n: str) -> None:
    for _ in range(int(n)):
        pid = os.fork()
        if pid == 0:
            os._exit(int(code))
        os.waitpid(pid, 0)


def do_sync(n: str) -> None:
    for _ in range(int(n)):
        os.sync()


def do_getpid(n: str) -> None:
    for _ in range(int(n)):
        os.getpid()


def do_kill(sig: str, n: str) -> None:
    """Send ``n`` signals ``sig`` to a child that handles them, then end the child with SIGKILL."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        signal.signal(int(sig), lambda *_: None)
        os.write(w, b"r")
        while True:
            signal.pause()
    os.close(w)
    os.read(r, 1)
    for _ in range(int(n)):
        os.kill(pid, int(sig))
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def do_mount(target: str, n: str) -> None:
    for _ in range(int(n)):
        if LIBC.mount(b"bpfmux-mnt", target.encode(), b"tmpfs", 0, b"size=1m") != 0:
            raise OSError(ctypes.get_errno(), "mount")
        if LIBC.umount2(target.encode(), 0) != 0:
            raise OSError(ctypes.get_errno(), "umount2")


def do_dio(device: str, n: str, size: str = "4096") -> None:
    """``n`` O_DIRECT reads of ``size`` bytes at consecutive offsets of a block device."""
    fd = os.open(device, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, int(size))  # page-aligned, as O_DIRECT wants
    try:
        for i in range(int(n)):
            os.preadv(fd, [buf], i * int(size))
    finally:
        os.close(fd)


def do_fsync(path: str, n: str) -> None:
    with open(path, "wb") as f:
        for _ in range(int(n)):
            f.write(b"x" * 4096)
            f.flush()
            os.fsync(f.fileno())


def do_getaddrinfo(host: str, n: str) -> None:
    for _ in range(int(n)):
        socket.getaddrinfo(host, None)


def do_sleep(ms: str, n: str) -> None:
    for _ in range(int(n)):
        time.sleep(int(ms) / 1000)


def do_spin(seconds: str) -> None:
    end = time.monotonic() + float(seconds)
    x = 0
    while time.monotonic() < end:
        x += 1


def do_tcp(port: str, send: str, reply: str) -> None:
    """One TCP connection over loopback to our own listener on ``port``: the client sends
    ``send`` bytes, the server answers ``reply`` bytes, both close."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(port)))
    srv.listen(1)

    def serve() -> None:
        conn, _ = srv.accept()
        got = 0
        while got < int(send):
            got += len(conn.recv(65536))
        conn.sendall(b"r" * int(reply))
        conn.close()

    t = threading.Thread(target=serve)
    t.start()
    cli = socket.create_connection(("127.0.0.1", int(port)))
    cli.sendall(b"s" * int(send))
    got = 0
    while got < int(reply):
        chunk = cli.recv(65536)
        if not chunk:
            break
        got += len(chunk)
    cli.close()
    t.join()
    srv.close()
    time.sleep(0.2)  # TIME_WAIT and the last state changes land before we exit


def do_futex(threads: str, rounds: str) -> None:
    """Threads contending for one lock (futex waits)."""
    lock = threading.Lock()

    def work() -> None:
        for _ in range(int(rounds)):
            with lock:
                time.sleep(0.001)

    ts = [threading.Thread(target=work) for _ in range(int(threads))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def do_wake(n: str) -> None:
    """A thread named bpfmux-wakee blocks on a pipe; this one (bpfmux-waker) wakes it ``n`` times."""
    r, w = os.pipe()

    def wakee() -> None:
        set_comm("bpfmux-wakee")
        for _ in range(int(n)):
            os.read(r, 1)

    t = threading.Thread(target=wakee)
    t.start()
    set_comm("bpfmux-waker")
    for _ in range(int(n)):
        time.sleep(0.01)
        os.write(w, b"x")
    t.join()


def do_malloc(size: str, n: str) -> None:
    """``n`` allocations of ``size`` bytes with libc's malloc, never freed."""
    LIBC.malloc.restype = ctypes.c_void_p
    kept = [LIBC.malloc(int(size)) for _ in range(int(n))]
    assert all(kept)
    time.sleep(0.1)


def do_readline(line: str) -> None:
    """An interactive bash on a pseudo-terminal reads ``line`` with readline, then ``exit``."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:
        os.execv("/bin/bash", ["bash", "--norc", "--noprofile", "-i"])
    time.sleep(0.3)
    os.write(fd, (line + "\n").encode())
    time.sleep(0.3)
    os.write(fd, b"exit\n")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if not os.read(fd, 4096):
                break
        except OSError:
            break
    os.waitpid(pid, 0)


def main() -> int:
    action, *args = sys.argv[1:]
    set_comm(f"bpfmux-{action}"[:15])
    pid = int(os.readlink("/proc/self"))  # not os.getpid(): syscount counts the workload's getpid calls
    if os.environ.get("ACT_PIDFILE"):
        with open(os.environ["ACT_PIDFILE"], "w") as f:
            f.write(str(pid))
    time.sleep(0.5)  # the interpreter's start-up burst (opens, mmaps) drains from the tool's buffers first
    globals()[f"do_{action}"](*args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
