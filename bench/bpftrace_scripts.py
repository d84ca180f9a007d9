"""bpftrace scripts under ``bpfmux bpftrace`` vs bpftrace 0.17, end to end.

Jobs: every corpus tool bpftrace 0.17 runs on this kernel
(``../shared/corpus/bpftrace-tools/tools``), each with a small workload of its
own, and four scripts whose probes are wildcards (the one-liners of the
tutorial and of bpfmux's README that bpftrace users write:
``syscalls:sys_enter_*``, ``sched:sched*``, libc's ``str*``), plus the corpus
tools whose attach points are globs (execsnoop, syncsnoop, and vfscount, whose
``kprobe:vfs_*`` matches nothing on a kernel without kprobes: both tracers run
its ``BEGIN`` only).

One run: start the tracer, wait until its ``BEGIN`` output appears (both
tracers print it only once every probe is attached), run the workload, send
SIGINT, wait for the exit (maps printed). **wall** is start to exit: compile,
attach, the workload, detach, results. Each job runs bpfmux once untimed
(fills its bytecode cache, as an installed package has one; this machine sets
``PYTHONDONTWRITEBYTECODE``), then alternates both tracers ``REPEAT`` times;
the minimum wall of each counts. Sequential runs: the tracers never share the
machine's CPUs with each other.

Note: on this machine every Python start pays ~0.3 s for a ``.pth`` file the
sandbox installs (it imports certifi); bpfmux's figures include it (it is
recorded in the JSON as ``python_start_s``).

Usage: ``python3 bench/bpftrace_scripts.py [JOB...]`` (default all; only a
full run writes ``bench/results/bpftrace_scripts.json``). Last line:
``bpftrace_scripts: ours=<geomean s> peer=<geomean s> ratio=<r>`` (r > 1:
bpfmux faster), with the wildcard scripts' geomean ratio after it.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _common import missing_root_or_bpftrace, write_result

# the one SIGINT-and-wait routine for bpftrace 0.17, shared with the tests' oracle harness
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "live"))
from bpftrace_oracle import interrupt

ROOT = Path(__file__).resolve().parent.parent
BPFMUX = [sys.executable, "-m", "bpfmux.cli.main", "bpftrace"]
REPEAT = int(os.environ.get("BPFMUX_BENCH_REPEAT", "2"))
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


def corpus_tools() -> Path | None:
    """``../shared/corpus/bpftrace-tools/tools`` (next to the checkout, or to the main checkout of a worktree)."""
    cands = [Path(os.environ["BPFMUX_CORPUS"]) if os.environ.get("BPFMUX_CORPUS") else None,
             ROOT.parent / "shared" / "corpus"]  # fmt: skip
    git = ROOT / ".git"
    if git.is_file() and git.read_text().startswith("gitdir:"):
        gitdir = Path(git.read_text().split(":", 1)[1].strip())
        cands += [p.parent.parent / "shared" / "corpus" for p in gitdir.parents if p.name == ".git"][:1]
    for c in cands:
        if c is not None and (c / "bpftrace-tools" / "tools").is_dir():
            return c / "bpftrace-tools" / "tools"
    return None


def sh(*argv: str) -> None:
    subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def py(code: str) -> Callable[[], None]:
    return lambda: sh(sys.executable, "-S", "-c", code)


def _bash() -> None:
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - child
        os.execv("/bin/bash", ["bash", "--norc", "--noprofile", "-i"])
    for c in ("echo hi", "exit"):
        time.sleep(0.3)
        os.write(fd, (c + "\n").encode())
    os.waitpid(pid, 0)
    os.close(fd)


def _tls() -> None:
    d = tempfile.mkdtemp()
    sh("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=x", "-keyout", f"{d}/k", "-out",
       f"{d}/c", "-days", "1")  # fmt: skip
    code = ("import socket,ssl,sys,threading\ns=ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER);s.load_cert_chain(sys.argv[1],"
            "sys.argv[2])\nc=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT);c.check_hostname=False;c.verify_mode=ssl.CERT_NONE"
            "\nl=socket.socket();l.bind(('127.0.0.1',0));l.listen(1)\ndef srv():\n a,_=l.accept()\n with s.wrap_socket("
            "a,server_side=True) as x: x.sendall(x.recv(9))\nt=threading.Thread(target=srv);t.start()\nwith c.wrap_socket("
            "socket.create_connection(l.getsockname()),server_hostname='x') as x: x.sendall(b'hi');x.recv(9)\nt.join()")
    sh(sys.executable, "-c", code, f"{d}/c", f"{d}/k")
    shutil.rmtree(d, ignore_errors=True)


def _io() -> None:
    p = Path(tempfile.gettempdir()) / f"bpfmux-bench-{os.getpid()}"
    sh("dd", "if=/dev/zero", f"of={p}", "bs=4k", "count=8", "oflag=direct")
    sh("sync")
    p.unlink(missing_ok=True)


#: job → (script file in the corpus or program text, workload, wildcard probes?)
JOBS: dict[str, tuple[str, Callable[[], None], bool]] = {
    "bashreadline": ("bashreadline.bt", _bash, False),
    "bitesize": ("bitesize.bt", _io, False),
    "cpuwalk": ("cpuwalk.bt", py("import time\nt=time.time()\nwhile time.time()-t<0.5: pass"), False),
    "execsnoop": ("execsnoop.bt", lambda: sh("/bin/true"), True),
    "gethostlatency": ("gethostlatency.bt", lambda: sh("getent", "ahosts", "localhost"), False),
    "killsnoop": ("killsnoop.bt", py("import os\nos.kill(os.getpid(), 0)"), False),
    "naptime": ("naptime.bt", py("import ctypes\nctypes.CDLL(None).syscall(35,(ctypes.c_long*2)(0,1000000),None)"),
                False),  # fmt: skip
    "opensnoop": ("opensnoop.bt", lambda: sh("cat", "/etc/hostname"), False),
    "pidpersec": ("pidpersec.bt", lambda: sh("/bin/true"), False),
    "setuids": ("setuids.bt", py("import os\nos.setuid(0)"), False),
    "ssllatency": ("ssllatency.bt", _tls, False),
    "sslsnoop": ("sslsnoop.bt", _tls, False),
    "statsnoop": ("statsnoop.bt", lambda: sh("stat", "/etc/hostname"), False),
    "syncsnoop": ("syncsnoop.bt", lambda: sh("sync"), True),
    "syscount": ("syscount.bt", lambda: sh("/bin/true"), False),
    "threadsnoop": ("threadsnoop.bt", lambda: sh("/bin/true"), False),
    "vfscount": ("vfscount.bt", lambda: sh("/bin/true"), True),  # kprobe:vfs_* (no kprobes here: nothing matches)
    "writeback": ("writeback.bt", _io, False),
    "syscalls_wildcard": ('tracepoint:syscalls:sys_enter_* { @[probe] = count(); } BEGIN { printf("READY\\n"); }',
                          lambda: sh("/bin/true"), True),  # fmt: skip
    "sched_wildcard": ('tracepoint:sched:sched* { @[probe] = count(); } BEGIN { printf("READY\\n"); }',
                       lambda: sh("/bin/true"), True),  # fmt: skip
    "libc_str_wildcard": (f'uprobe:{LIBC}:str* {{ @[probe] = count(); }} BEGIN {{ printf("READY\\n"); }}',
                          lambda: sh("/bin/true"), True),  # fmt: skip
}


class Run:
    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.t0 = time.perf_counter()
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=ROOT)
        self.out = b""
        self.err = b""
        self.threads = [threading.Thread(target=self._pump, args=(self.p.stdout, True), daemon=True),
                        threading.Thread(target=self._pump, args=(self.p.stderr, False), daemon=True)]  # fmt: skip
        for t in self.threads:
            t.start()

    def _pump(self, stream: object, out: bool) -> None:
        fd = stream.fileno()  # type: ignore[attr-defined]
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            if out:
                self.out += chunk
            else:
                self.err += chunk

    def ready(self, timeout: float = 300.0) -> float:
        """Seconds from start until the first line of BEGIN output (the line after "Attaching …")."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if re.search(rb"^Attaching \d+ probes?\.\.\.\n.+\n", self.out, re.M):
                return time.perf_counter() - self.t0
            if self.p.poll() is not None:
                time.sleep(0.1)
                raise RuntimeError(f"tracer exited early: {self.err.decode(errors='replace')[-2000:]}")
            time.sleep(0.005)
        raise RuntimeError("tracer did not get ready")

    def stop(self) -> float:
        interrupt(self.p, 600.0)
        for t in self.threads:
            t.join(timeout=10)
        if self.p.returncode != 0:
            raise RuntimeError(f"tracer failed ({self.p.returncode}): {self.err.decode(errors='replace')[-2000:]}")
        return time.perf_counter() - self.t0


def one_run(argv: list[str], env: dict[str, str], workload: Callable[[], None]) -> dict[str, float]:
    r = Run(argv, env)
    attach = r.ready()
    w0 = time.perf_counter()
    workload()
    work = time.perf_counter() - w0
    wall = r.stop()
    return {"wall_s": wall, "attach_s": attach, "work_s": work, "output_lines": r.out.count(b"\n")}


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def main() -> int:
    why = missing_root_or_bpftrace()
    if why:
        print(f"bpftrace_scripts {why}", file=sys.stderr)
        return 1
    tools = corpus_tools()
    if tools is None:
        print("bpftrace_scripts needs ../shared/corpus/bpftrace-tools (or $BPFMUX_CORPUS)", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="bpfmux-bench-")
    env_ours = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env_ours["PYTHONPYCACHEPREFIX"] = str(Path(tmp, "pycache"))
    env_ours["PYTHONPATH"] = str(ROOT / "src")
    env_peer = dict(os.environ, BPFTRACE_MAX_PROBES="100000")
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    python_start = time.perf_counter() - t
    jobs = [j for j in sys.argv[1:] if j in JOBS] or list(JOBS)
    results: dict = {"unit": "seconds (wall: tracer start to exit with results)", "repeat": REPEAT,
                     "python_start_s": python_start, "jobs": {}}  # fmt: skip
    try:
        for job in jobs:
            script, workload, wildcard = JOBS[job]
            src = [str(tools / script)] if script.endswith(".bt") else ["-e", script]
            ours_argv, peer_argv = [*BPFMUX, *src], ["bpftrace", *src]
            one_run(ours_argv, env_ours, workload)  # warm-up: the bytecode cache (not timed)
            ours, peer = [], []
            for _ in range(REPEAT):
                ours.append(one_run(ours_argv, env_ours, workload))
                peer.append(one_run(peer_argv, env_peer, workload))
            o, p = min(ours, key=lambda r: r["wall_s"]), min(peer, key=lambda r: r["wall_s"])
            ratio = p["wall_s"] / o["wall_s"]
            results["jobs"][job] = {"wildcard": wildcard, "ours": o, "bpftrace": p, "ratio": ratio,
                                    "ours_runs": ours, "bpftrace_runs": peer}  # fmt: skip
            print(f"{job:18} ours {o['wall_s']:6.2f}s (attached after {o['attach_s']:5.2f}s) | bpftrace "
                  f"{p['wall_s']:6.2f}s (attached after {p['attach_s']:5.2f}s) | ratio {ratio:5.2f}"
                  f"{'  [wildcard]' if wildcard else ''}", flush=True)  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    rows = results["jobs"].values()
    ours_g = geomean([r["ours"]["wall_s"] for r in rows])
    peer_g = geomean([r["bpftrace"]["wall_s"] for r in rows])
    wild = [r["ratio"] for r in rows if r["wildcard"]]
    results["geomean"] = {"ours_s": ours_g, "bpftrace_s": peer_g, "ratio": peer_g / ours_g,
                          "wildcard_ratio": geomean(wild), "tools_ratio": geomean([r["ratio"] for r in rows
                                                                                  if not r["wildcard"]])}  # fmt: skip
    if jobs == list(JOBS):
        write_result("bpftrace_scripts", results)
    print(f"bpftrace_scripts: ours={ours_g:.2f} peer={peer_g:.2f} ratio={peer_g / ours_g:.2f} "
          f"(geomean wall seconds over {len(jobs)} scripts; wildcard scripts ratio {geomean(wild):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
