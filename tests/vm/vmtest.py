"""Real-kernel VM test tier: boot a Debian kernel under qemu and run a command in it.

This machine's own kernel lacks kprobes and refuses fentry/fexit, so the live
backend's link kinds for those hooks are tested inside a guest instead:

1. :func:`prepare_kernel` fetches Debian's 6.12 kernel package with
   ``apt-get download`` (a pinned version, falling back to the newest 6.12),
   and caches the kernel image and the few modules the guest needs (9p,
   overlayfs), decompressed so busybox ``insmod`` can load them.
2. :func:`build_initramfs` writes a busybox-static initramfs (a newc cpio
   archive, gzip'd) whose ``/init`` loads those modules, mounts the host's
   root read-only over virtio-9p with a tmpfs overlay on top, mounts proc,
   sysfs, devtmpfs, tracefs, debugfs, bpffs and cgroup2, runs one command with stdin
   from ``/dev/null``, prints its exit status on the serial console and
   powers off.
3. :func:`run_in_vm` boots it under ``qemu-system-x86_64`` with software
   emulation (TCG: ``/dev/kvm`` guests hang on this machine) and returns the
   command's exit status and output. A second, writable 9p share
   (``/run/bpfmux-vmtest`` in the guest) carries the command script in and
   result files (e.g. a JUnit XML report) out.

The guest runs the host's own Python (its real path, not a shim) with this
checkout's ``src`` first on ``PYTHONPATH``, so ``bpfmux`` imports from the
checkout the harness belongs to, wherever it was cloned.

Command line: ``python3 -m tests.vm.vmtest`` (from the repository root) runs
the in-guest test selection (:data:`GUEST_SELECTION`); ``--prepare`` only fetches and
builds; ``-- CMD...`` runs another command. See ``--help``.

Everything is cached under ``$BPFMUX_VMTEST_CACHE`` or
``$XDG_CACHE_HOME/bpfmux-vmtest`` (default ``~/.cache/bpfmux-vmtest``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import gzip
import hashlib
import io
import lzma
import os
import platform
import re
import selectors
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: The kernel package the tier is pinned to (Debian bookworm security archive).
PINNED_PACKAGE = "linux-image-6.12.117+deb12-amd64-unsigned"
PINNED_VERSION = "6.12.117-1~deb12u1"
#: Fallback when the pinned version is gone from the archive: newest package of this shape.
FALLBACK_PATTERN = re.compile(r"^linux-image-(6\.12\.\d+)\+deb12-amd64-unsigned$")

#: Modules the initramfs loads, in load order (dependencies are added automatically).
GUEST_MODULES = ("9p", "overlay")
#: Busybox binary put into the initramfs; it must be statically linked.
BUSYBOX = Path("/bin/busybox")

#: Guest path of the writable share that carries the command in and results out.
GUEST_SHARE = "/run/bpfmux-vmtest"
#: Environment variable set for the guest command; tests/guest/conftest.py checks it.
GUEST_ENV_FLAG = "BPFMUX_VMTEST_GUEST"

EXIT_MARKER = "BPFMUX-VMTEST-EXIT:"
STAGE_MARKER = "BPFMUX-VMTEST-STAGE:"

DEFAULT_TIMEOUT = 3600.0
DEFAULT_MEMORY_MB = 2048
DEFAULT_CPUS = 2


class VmTestError(Exception):
    """The VM tier could not prepare or boot its guest (message says what to do)."""


class VmUnavailable(VmTestError):
    """This host cannot run the VM tier at all (no qemu, wrong architecture, no kernel package)."""


# --------------------------------------------------------------------------- cache


def cache_dir() -> Path:
    """Return the cache directory (created), from ``$BPFMUX_VMTEST_CACHE`` or the XDG cache home."""
    env = os.environ.get("BPFMUX_VMTEST_CACHE")
    if env:
        path = Path(env)
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        path = Path(base) / "bpfmux-vmtest"
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on *path* so concurrent runs don't build the same cache entry twice."""
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- kernel


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A cached guest kernel: image, its release string and the decompressed modules in load order."""

    package: str
    version: str
    release: str
    vmlinuz: Path
    config: Path
    modules: tuple[Path, ...]

    @property
    def directory(self) -> Path:
        """The cache directory that holds this kernel."""
        return self.vmlinuz.parent


def _apt_download(spec: str, dest: Path) -> Path | None:
    """``apt-get download SPEC`` into *dest*; return the .deb, or None when apt cannot get it."""
    before = set(dest.glob("*.deb"))
    proc = subprocess.run(["apt-get", "download", "-q", spec], cwd=dest, capture_output=True, text=True)
    after = set(dest.glob("*.deb")) - before
    if proc.returncode != 0 or not after:
        return None
    return after.pop()


def _newest_612() -> tuple[str, str] | None:
    """Find the newest ``linux-image-6.12.N+deb12-amd64-unsigned`` apt knows: (package, version)."""
    proc = subprocess.run(
        ["apt-cache", "search", "--names-only", r"^linux-image-6\.12\.[0-9]+\+deb12-amd64-unsigned$"],
        capture_output=True,
        text=True,
    )
    best: tuple[tuple[int, ...], str] | None = None
    for line in proc.stdout.splitlines():
        name = line.split(" ", 1)[0]
        m = FALLBACK_PATTERN.match(name)
        if m:
            key = tuple(int(x) for x in m.group(1).split("."))
            if best is None or key > best[0]:
                best = (key, name)
    if best is None:
        return None
    show = subprocess.run(["apt-cache", "show", best[1]], capture_output=True, text=True).stdout
    versions = re.findall(r"^Version: (\S+)$", show, re.M)
    return (best[1], versions[0]) if versions else None


def _fetch_deb(dest: Path, log) -> tuple[Path, str, str]:
    """Download the pinned kernel package, else the newest 6.12 one; return (deb, package, version).

    :raises VmUnavailable: when apt can get neither.
    """
    if not shutil.which("apt-get"):
        raise VmUnavailable("apt-get not found: the VM tier fetches Debian's kernel package with apt")
    spec = f"{PINNED_PACKAGE}={PINNED_VERSION}"
    deb = _apt_download(spec, dest)
    if deb is None and os.geteuid() == 0:
        log(f"vmtest: {spec} not downloadable; refreshing apt lists")
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True)
        deb = _apt_download(spec, dest)
    if deb is not None:
        return deb, PINNED_PACKAGE, PINNED_VERSION
    newest = _newest_612()
    if newest is not None:
        log(f"vmtest: pinned {spec} is gone; falling back to {newest[0]}={newest[1]}")
        deb = _apt_download(f"{newest[0]}={newest[1]}", dest)
        if deb is not None:
            return deb, newest[0], newest[1]
    raise VmUnavailable(
        f"cannot download the guest kernel {spec} (nor any linux-image-6.12.*+deb12-amd64-unsigned): "
        "run 'apt-get update' with Debian's bookworm-security archive in the apt sources"
    )


def _modinfo(ko: bytes) -> dict[str, str]:
    """Read a module's ``.modinfo`` key=value strings (enough for ``depends=`` and ``vermagic=``)."""
    info: dict[str, str] = {}
    for key in ("depends", "vermagic", "name"):
        m = re.search(rb"(?:^|\x00)" + key.encode() + rb"=([^\x00]*)\x00", ko)
        if m:
            info[key] = m.group(1).decode(errors="replace")
    return info


def _decompress_module(data: bytes, name: str) -> bytes:
    if name.endswith(".xz"):
        return lzma.decompress(data)
    if name.endswith(".gz"):
        return gzip.decompress(data)
    if name.endswith(".zst"):
        proc = subprocess.run(["zstd", "-dc"], input=data, capture_output=True, check=True)
        return proc.stdout
    return data


def _extract_kernel(deb: Path, out: Path) -> tuple[str, list[str]]:
    """Extract vmlinuz, config and the guest modules (with dependencies) from *deb* into *out*.

    :returns: the kernel release and the module names in load order.
    :raises VmTestError: when the package lacks what the guest needs.
    """
    raw: dict[str, tuple[str, bytes]] = {}  # module name -> (file name, compressed .ko)
    release = None
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
            for member in tar:
                name = member.name.lstrip("./")
                if not member.isfile():
                    continue
                if re.fullmatch(r"boot/vmlinuz-.+", name):
                    release = name.split("vmlinuz-", 1)[1]
                    (out / "vmlinuz").write_bytes(tar.extractfile(member).read())
                elif re.fullmatch(r"boot/config-.+", name):
                    (out / "config").write_bytes(tar.extractfile(member).read())
                elif re.fullmatch(r"lib/modules/[^/]+/kernel/(fs|net|lib|crypto)/.+\.ko(\.xz|\.gz|\.zst)?", name):
                    base = name.rsplit("/", 1)[1]
                    raw[re.sub(r"\.ko(\.xz|\.gz|\.zst)?$", "", base)] = (base, tar.extractfile(member).read())
    except tarfile.TarError as err:
        raise VmTestError(f"cannot read the files of {deb}: {err}") from err
    finally:
        proc.stdout.close()
        stderr = proc.stderr.read().decode(errors="replace").strip()
        proc.stderr.close()
        if proc.wait() != 0:
            raise VmTestError(f"dpkg-deb cannot read {deb}: {stderr}")
    modules: dict[str, bytes] = {}

    def load(mod: str) -> bytes:
        if mod not in modules:
            modules[mod] = _decompress_module(raw[mod][1], raw[mod][0])
        return modules[mod]

    if release is None:
        raise VmTestError(f"{deb.name} holds no boot/vmlinuz-*: not a kernel image package")
    # 9p over virtio needs the transport module too; it is not a symbol dependency of 9p.
    wanted = [*GUEST_MODULES[:1], "9pnet_virtio", *GUEST_MODULES[1:]]
    order: list[str] = []

    def visit(mod: str, chain: tuple[str, ...]) -> None:
        if mod in order:
            return
        if mod not in raw:
            raise VmTestError(f"{deb.name} lacks module {mod} (needed by {' <- '.join(chain) or 'the guest'})")
        for dep in filter(None, _modinfo(load(mod)).get("depends", "").split(",")):
            visit(dep if dep in raw else dep.replace("_", "-"), (mod, *chain))
        order.append(mod)

    for mod in wanted:
        visit(mod, ())
    moddir = out / "modules"
    moddir.mkdir()
    for mod in order:
        (moddir / f"{mod}.ko").write_bytes(modules[mod])
    return release, order


def prepare_kernel(log=None) -> Kernel:
    """Fetch (once) and return the cached guest kernel.

    :raises VmUnavailable: when no kernel package can be downloaded.
    :raises VmTestError: when the package lacks what the guest needs.
    """
    log = log or (lambda msg: None)
    root = cache_dir()
    with _locked(root / ".lock"):
        for candidate in sorted(root.glob("kernel-*")):
            if (candidate / "COMPLETE").exists() and candidate.name == f"kernel-{PINNED_VERSION}":
                return _load_kernel(candidate)
        tmp = Path(tempfile.mkdtemp(prefix="download-", dir=root))
        try:
            t0 = time.monotonic()
            deb, package, version = _fetch_deb(tmp, log)
            target = root / f"kernel-{version}"
            if (target / "COMPLETE").exists():
                return _load_kernel(target)
            shutil.rmtree(target, ignore_errors=True)
            target.mkdir()
            release, order = _extract_kernel(deb, target)
            (target / "package").write_text(f"{package}\n{version}\n{release}\n{' '.join(order)}\n")
            (target / "COMPLETE").write_text("")
            log(f"vmtest: cached {package}={version} ({release}) in {time.monotonic() - t0:.1f}s")
            return _load_kernel(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _load_kernel(directory: Path) -> Kernel:
    package, version, release, order = directory.joinpath("package").read_text().splitlines()[:4]
    mods = tuple(directory / "modules" / f"{m}.ko" for m in order.split())
    return Kernel(package, version, release, directory / "vmlinuz", directory / "config", mods)


# --------------------------------------------------------------------------- initramfs

INIT_SCRIPT = r"""#!/bin/busybox sh
# bpfmux VM tier guest init (generated by tests/vm/vmtest.py).
/bin/busybox mkdir -p /proc /sys /dev /tmp /lower /rw /newroot /usr/bin /usr/sbin /sbin
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
stage() { echo "@STAGE@ $*"; }
die() { echo "bpfmux-vmtest: init: $*"; echo "@EXIT@ init-failed"; sync; poweroff -f; sleep 5; reboot -f; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /lib/modules/order); do
    insmod /lib/modules/$m.ko || die "insmod $m failed"
done
msize=512000
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=$msize hostroot /lower || die "mount of the host root over 9p failed"
mount -t tmpfs -o mode=0755 tmpfs /rw || die "tmpfs"
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work overlay /newroot || die "overlay mount failed"
R=/newroot
mount -t proc proc $R/proc || die "proc"
mount -t sysfs sysfs $R/sys || die "sysfs"
mount -t devtmpfs devtmpfs $R/dev || die "devtmpfs"
mkdir -p $R/dev/shm $R/dev/pts
mount -t tmpfs tmpfs $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tracefs tracefs $R/sys/kernel/tracing || die "tracefs"
mount -t debugfs debugfs $R/sys/kernel/debug || die "debugfs"
mount -t bpf bpf $R/sys/fs/bpf || die "bpffs"
mount -t cgroup2 cgroup2 $R/sys/fs/cgroup || echo "bpfmux-vmtest: init: no cgroup2 (cgroup tests will say so)"
# /tmp stays the overlay's (writable, in tmpfs): a tmpfs over it would hide a checkout cloned under /tmp.
mount -t tmpfs tmpfs $R/run || die "tmpfs /run"
mkdir -p $R@SHARE@
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=$msize vmtestout $R@SHARE@ || die "mount of the result share failed"
[ -f $R@SHARE@/cmd.sh ] || die "no command script in the share"
stage command
chroot $R /bin/sh @SHARE@/cmd.sh </dev/null
rc=$?
echo $rc > $R@SHARE@/exit-status
sync
echo "@EXIT@ $rc"
poweroff -f
sleep 5
reboot -f
"""


def _init_script() -> bytes:
    text = INIT_SCRIPT.replace("@STAGE@", STAGE_MARKER).replace("@EXIT@", EXIT_MARKER).replace("@SHARE@", GUEST_SHARE)
    return text.encode()


class _Cpio:
    """Minimal writer of the kernel's initramfs format (cpio "newc", see the kernel's early-userspace docs)."""

    def __init__(self) -> None:
        self._buf = io.BytesIO()
        self._ino = 1

    def _entry(self, name: str, mode: int, data: bytes = b"", nlink: int = 1) -> None:
        namez = name.encode() + b"\0"
        fields = [self._ino, mode, 0, 0, nlink, 0, len(data), 0, 0, 0, 0, len(namez), 0]
        self._ino += 1
        hdr = b"070701" + b"".join(b"%08X" % f for f in fields)
        self._buf.write(hdr + namez)
        self._buf.write(b"\0" * (-(len(hdr) + len(namez)) % 4))
        self._buf.write(data)
        self._buf.write(b"\0" * (-len(data) % 4))

    def dir(self, name: str) -> None:
        self._entry(name, 0o040755, nlink=2)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._entry(name, 0o100000 | mode, data)

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        return self._buf.getvalue()


def build_initramfs(kernel: Kernel, log=None) -> Path:
    """Build (once per kernel, busybox and init script) and return the gzip'd initramfs.

    :raises VmUnavailable: when busybox is missing or not statically linked.
    """
    log = log or (lambda msg: None)
    if not BUSYBOX.is_file():
        raise VmUnavailable(f"{BUSYBOX} not found: install the busybox-static package")
    busybox = BUSYBOX.read_bytes()
    if b"ld-linux" in busybox[:4096] or b"/lib64/ld-" in busybox[:8192]:
        raise VmUnavailable(f"{BUSYBOX} is dynamically linked: install busybox-static instead of busybox")
    init = _init_script()
    h = hashlib.sha256()
    for part in (kernel.version.encode(), busybox, init, *(m.read_bytes() for m in kernel.modules)):
        h.update(hashlib.sha256(part).digest())
    path = cache_dir() / f"initramfs-{kernel.version}-{h.hexdigest()[:16]}.cpio.gz"
    if path.exists():
        return path
    cpio = _Cpio()
    for d in ("bin", "dev", "lib", "lib/modules", "proc", "sys", "tmp"):
        cpio.dir(d)
    cpio.file("bin/busybox", busybox, 0o755)
    cpio.file("init", init, 0o755)
    for mod in kernel.modules:
        cpio.file(f"lib/modules/{mod.name}", mod.read_bytes())
    cpio.file("lib/modules/order", "".join(m.stem + "\n" for m in kernel.modules).encode())
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(cpio.finish(), compresslevel=6, mtime=0))
    tmp.replace(path)
    for stale in cache_dir().glob("initramfs-*.cpio.gz"):  # older builds (another init script or busybox)
        if stale != path:
            stale.unlink(missing_ok=True)
    log(f"vmtest: built {path.name}")
    return path


# --------------------------------------------------------------------------- qemu


def unavailable_reason() -> str | None:
    """Why this host cannot run the VM tier, or None when it can (qemu present, x86-64 host)."""
    if platform.machine() not in ("x86_64", "amd64"):
        return f"the VM tier boots an x86-64 Debian kernel; this host is {platform.machine()}"
    if not shutil.which("qemu-system-x86_64"):
        return "qemu-system-x86_64 not found: install the qemu-system-x86 package (.ci/install does)"
    if not BUSYBOX.is_file():
        return f"{BUSYBOX} not found: install the busybox-static package (.ci/install does)"
    if not shutil.which("dpkg-deb") or not shutil.which("apt-get"):
        return "the VM tier fetches Debian's kernel package and needs apt-get and dpkg-deb"
    return None


@dataclasses.dataclass
class VmResult:
    """Outcome of one guest run."""

    exit_status: int | None  #: the command's exit status; None when the guest never reported one
    output: str  #: everything the guest printed on its serial console after boot (the command's output)
    console: str  #: the whole serial console, boot included
    share: Path  #: host directory of the guest's result share (kept when ``keep_share``)
    wall_time: float  #: seconds from qemu start to its exit
    boot_time: float | None  #: seconds from qemu start to the command starting
    kernel: Kernel
    qemu_status: int | None
    timed_out: bool = False
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)  #: result files the command left in the share

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


def python_real_path() -> str:
    """The running interpreter's real path (a pyenv shim would be a shell script that is slow in the guest)."""
    return os.path.realpath(sys.executable)


def guest_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for the guest command: a clean PATH, this checkout's src on PYTHONPATH, the guest flag."""
    py_bin = str(Path(python_real_path()).parent)
    env = {
        "PATH": f"{py_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root" if os.geteuid() == 0 else str(Path.home()),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        # This checkout's bpfmux first; tests/vm holds the in-guest pytest plugin (vmtest_report).
        "PYTHONPATH": f"{REPO / 'src'}:{REPO / 'tests' / 'vm'}",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        GUEST_ENV_FLAG: "1",
        "BPFMUX_VMTEST_SHARE": GUEST_SHARE,
    }
    if extra:
        env.update(extra)
    return env


def _command_script(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> str:
    lines = ["# bpfmux VM tier guest command (generated)", "set -u"]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    lines.append(f"cd {shlex.quote(str(cwd))} || exit 126")
    lines.append("exec " + " ".join(shlex.quote(a) for a in argv) + " 2>&1")
    return "\n".join(lines) + "\n"


def qemu_command(kernel: Kernel, initramfs: Path, share: Path, *, memory_mb: int, cpus: int) -> list[str]:
    """The qemu command line for one guest run."""
    append = " ".join(
        [
            "console=ttyS0,115200",
            "rdinit=/init",
            "panic=-1",
            "oops=panic",
            "quiet",
            "loglevel=4",
            "mitigations=off",
            "tsc=reliable",
            "no_timer_check",
        ]
    )
    return [
        "qemu-system-x86_64",
        "-accel",
        # one TCG thread for all vCPUs: with a thread per vCPU, a vCPU can run a stale translation of
        # code another vCPU is patching through int3 (text_poke_bp: attaching fentry/kprobes, static
        # keys) and the guest dies with "Oops: int3" (seen at ksys_read+0x5 and sched_clock_cpu+0x9)
        "tcg,thread=single",
        "-cpu",
        "max",
        "-m",
        str(memory_mb),
        "-smp",
        str(cpus),
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-serial",
        "stdio",
        "-no-reboot",
        "-kernel",
        str(kernel.vmlinuz),
        "-initrd",
        str(initramfs),
        "-append",
        append,
        "-virtfs",
        "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
        "-virtfs",
        f"local,path={share},mount_tag=vmtestout,security_model=none,multidevs=remap",
    ]


def run_in_vm(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
    cpus: int = DEFAULT_CPUS,
    stream=None,
    log=None,
    keep_share: bool = False,
) -> VmResult:
    """Boot the guest, run *argv* in it (stdin from /dev/null) and return its status and output.

    :param argv: command and arguments, run inside the guest from *cwd* (default: the repository root).
    :param env: extra environment for the command (on top of :func:`guest_env`).
    :param timeout: seconds before qemu is killed and the run reported as timed out.
    :param stream: a callable given each line of the command's output as it arrives.
    :param keep_share: keep the host side of the result share (its path is in the result).
    :raises VmUnavailable: when qemu, busybox or the kernel package is not available.
    :raises VmTestError: when the guest cannot be prepared.
    """
    reason = unavailable_reason()
    if reason:
        raise VmUnavailable(reason)
    kernel = prepare_kernel(log)
    initramfs = build_initramfs(kernel, log)
    share = Path(tempfile.mkdtemp(prefix="bpfmux-vmtest-"))
    cmdenv = guest_env({"BPFMUX_VMTEST_KERNEL": kernel.release, **(env or {})})
    (share / "cmd.sh").write_text(_command_script(argv, cwd or REPO, cmdenv))
    cmd = qemu_command(kernel, initramfs, share, memory_mb=memory_mb, cpus=cpus)
    t0 = time.monotonic()
    boot_time = None
    console: list[str] = []
    output: list[str] = []
    exit_status: int | None = None
    timed_out = False
    in_command = False
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    interrupted = True  # until the read loop ends normally: then qemu gets time to power off by itself
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            pending = b""
            while True:
                remaining = timeout - (time.monotonic() - t0)
                if remaining <= 0:
                    timed_out = True
                    break
                if not sel.select(min(remaining, 1.0)):
                    if proc.poll() is not None:
                        break
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    break
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    line = raw.decode(errors="replace").rstrip("\r")
                    console.append(line)
                    if not in_command:
                        if line.startswith(STAGE_MARKER) and line.split()[-1] == "command":
                            in_command = True
                            boot_time = time.monotonic() - t0
                        elif EXIT_MARKER in line and boot_time is None:
                            output.append("bpfmux-vmtest: the guest init failed before running the command")
                        continue
                    at = line.find(EXIT_MARKER)
                    if at >= 0:
                        # The command's last line may lack its newline: keep what precedes the marker.
                        word = line[at + len(EXIT_MARKER) :].strip()
                        exit_status = int(word) if word.isdigit() else None
                        in_command = False
                        line = line[:at]
                        if not line:
                            continue
                    output.append(line)
                    if stream:
                        stream(line)
            if pending:
                console.append(pending.decode(errors="replace"))
        interrupted = timed_out
    finally:
        if proc.poll() is None and not interrupted:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=15)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        wall = time.monotonic() - t0
        files = {p.name: p.read_bytes() for p in share.iterdir() if p.is_file() and p.name != "cmd.sh"}
        if not keep_share:
            shutil.rmtree(share, ignore_errors=True)
    if exit_status is None and "exit-status" in files:
        text = files["exit-status"].decode().strip()
        exit_status = int(text) if text.isdigit() else None
    return VmResult(
        exit_status=exit_status,
        output="\n".join(output),
        console="\n".join(console),
        share=share,
        wall_time=wall,
        boot_time=boot_time,
        kernel=kernel,
        qemu_status=proc.returncode,
        timed_out=timed_out,
        files=files,
    )


#: The in-guest test selection the tier runs by default: the guest-only tests, and the live link tests whose
#: kernel-function kinds (kprobe, kprobe_multi, fentry/fexit/fmod_ret) only take their "supported" branch there.
GUEST_SELECTION = ("tests/guest", "tests/api", "tests/live/test_links_kernel_kinds.py",
                   "tests/live/test_verifier_vs_kernel_objects.py", "tests/corpus/test_corpus_guest.py")


def guest_pytest_argv(selection: Sequence[str] = GUEST_SELECTION, extra: Sequence[str] = ()) -> list[str]:
    """The in-guest pytest command; its ``vmtest_report`` plugin writes ``results.json`` to the result share."""
    return [
        python_real_path(),
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-p",
        "vmtest_report",
        # hypothesis' pytest plugin costs ~6 s of imports under TCG; a guest test that wants hypothesis imports it.
        "-p",
        "no:hypothesispytest",
        "-q",
        "-rA",
        "--color=no",
        *selection,
        *extra,
    ]


def skip_reason() -> str | None:
    """Why the VM tier cannot run here (None: it runs)."""
    if os.environ.get(GUEST_ENV_FLAG) == "1":
        return "already inside the VM tier's guest"
    if os.environ.get("BPFMUX_VMTEST_SKIP") == "1":
        return "disabled by BPFMUX_VMTEST_SKIP=1"
    return unavailable_reason()


def host_collect(selection: tuple[str, ...] = GUEST_SELECTION) -> tuple[list[str], str]:
    """Node ids of the in-guest tests as pytest collects them on the host (they skip there), and pytest's output."""
    env = {k: v for k, v in os.environ.items() if k != GUEST_ENV_FLAG}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *selection],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    ids = [line.strip() for line in proc.stdout.splitlines() if "::" in line and not line.startswith(" ")]
    if proc.returncode != 0:
        return [], proc.stdout + proc.stderr
    return ids, proc.stdout


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """Command line: prepare the guest and run the in-guest tests (or a given command); exit with its status."""
    parser = argparse.ArgumentParser(
        prog="python3 -m tests.vm.vmtest",
        description="Boot Debian's 6.12 kernel under qemu (TCG) and run bpfmux's in-guest tests or a command.",
    )
    parser.add_argument("--prepare", action="store_true", help="only fetch the kernel and build the initramfs")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds before the guest is killed")
    parser.add_argument("--memory", type=int, default=DEFAULT_MEMORY_MB, help="guest memory in MiB")
    parser.add_argument("--cpus", type=int, default=DEFAULT_CPUS, help="guest CPUs")
    parser.add_argument("--console", action="store_true", help="print the whole serial console, boot included")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression for the in-guest tests")
    parser.add_argument("command", nargs="*", help="command to run in the guest instead (after --)")
    args = parser.parse_args(argv)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    reason = unavailable_reason()
    if reason:
        log(f"vmtest: cannot run: {reason}")
        return 77
    try:
        if args.prepare:
            kernel = prepare_kernel(log)
            initramfs = build_initramfs(kernel, log)
            print(f"kernel {kernel.package}={kernel.version} ({kernel.release}): {kernel.vmlinuz}")
            print(f"initramfs: {initramfs}")
            return 0
        command = args.command or guest_pytest_argv(extra=["-k", args.keyword] if args.keyword else [])
        result = run_in_vm(
            command,
            timeout=args.timeout,
            memory_mb=args.memory,
            cpus=args.cpus,
            stream=None if args.console else (lambda line: print(line, flush=True)),
            log=log,
        )
    except VmTestError as err:
        log(f"vmtest: {err}")
        return 77 if isinstance(err, VmUnavailable) else 2
    if args.console:
        print(result.console)
    boot = f"{result.boot_time:.1f}s" if result.boot_time is not None else "never"
    log(
        f"vmtest: kernel {result.kernel.release}; boot to command {boot}; wall {result.wall_time:.1f}s; "
        f"exit status {result.exit_status}{' (timed out)' if result.timed_out else ''}"
    )
    if result.exit_status is None:
        if not args.console:
            log("vmtest: the guest reported no exit status; its console follows")
            log(result.console)
        return 2
    return result.exit_status


if __name__ == "__main__":
    sys.exit(main())
