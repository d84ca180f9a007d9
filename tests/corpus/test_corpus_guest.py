"""The corpus tools built on kprobes and fentry, in the VM tier's guest (Debian's
6.12 kernel has both; this machine's kernel has neither): each object loaded
and attached as its tool does on that kernel, and the emulated verifier's
verdicts on the programs only a kernel with fentry judges.

Runs only inside the guest (``tests/vm/vmtest.py`` lists this file in
``GUEST_SELECTION``); elsewhere every test skips, saying so.
"""

from __future__ import annotations

import os

import pytest
from corpus_harness import started, tool_names
from corpus_probes import LiveProbe
from corpus_tools import TOOLS
from corpus_verdicts import ACCEPT, NONE, disagreements, verdicts

IN_GUEST = os.environ.get("BPFMUX_VMTEST_GUEST") == "1"
pytestmark = [
    pytest.mark.skipif(not IN_GUEST, reason="runs only inside the VM tier's guest (tests/vm): the kprobe and "
                                            "fentry tools need a kernel with kprobes and fentry"),
    pytest.mark.usefixtures("corpus"),
]

#: what the guest kernel lacks that a tool's settings may still name (its functions exist on other kernels)
ABSENT = ("no kernel func", "no kernel function", "no such function", "does not exist", "No such file",
          "ENOENT", "not found")

GUEST_TOOLS = [t for t in tool_names() if not TOOLS[t].runs_here]

#: tool → program → why the guest's verifier and the emulated one disagree on a program both judge (an
#: accept against a reject, or rejections with different errnos); the test fails when a record goes stale
KNOWN_GUEST: dict[str, dict[str, str]] = {}


def _absent(why: str) -> bool:
    return any(text in why for text in ABSENT)


@pytest.mark.parametrize("tool", GUEST_TOOLS)
def test_kprobe_and_fentry_tools_start_in_the_guest(tool: str) -> None:
    """Everything the tool loads loads and everything it attaches attaches, but for functions this kernel does
    not have (a driver not loaded, a function renamed since)."""
    probe = LiveProbe()
    t = TOOLS[tool]
    with started(probe.kernel, t, t.settings(probe)) as st:
        unexplained = {n: w for n, w in {**st.failed, **st.attach_failed}.items() if not _absent(w)}
        assert not unexplained, unexplained
        assert st.links or t.needs or st.failed or st.attach_failed, f"{tool} attached nothing"


@pytest.mark.parametrize("tool", GUEST_TOOLS)
def test_fentry_verdicts_match_the_guest_kernel(tool: str) -> None:
    """The emulated verifier on the guest's BTF gives a verdict on every program the guest's verifier judges,
    the same (accept, or reject with the same errno), each program loaded on its own with the settings the tool chooses on the guest; the
    disagreements are exactly the recorded ones."""
    from bpfmux.btf import Btf
    from bpfmux.emu import Emulator

    probe = LiveProbe()
    t = TOOLS[tool]
    settings = t.settings(probe)
    kernel_v = verdicts(probe.kernel, t, settings)
    with Emulator(btf=Btf.vmlinux()) as emu:
        emu_v = verdicts(emu, t, settings)
    got = disagreements(kernel_v, emu_v)
    got.update({n: f"kernel {v}; emulator gives no verdict: {emu_v.get(n, (NONE, 'not loaded'))[1]}"
                for n, (v, _) in kernel_v.items() if v != NONE and emu_v.get(n, (NONE, ""))[0] == NONE})
    assert set(got) == set(KNOWN_GUEST.get(tool, {})), got
    judged = [n for n, (v, _) in kernel_v.items() if v != NONE]
    assert judged and any(kernel_v[n][0] == ACCEPT for n in judged), kernel_v


#: reads the funclatency workload makes
READS = 5


def _funclatency_maps(coll: object) -> dict[str, object]:
    """funclatency's maps the workload determines: the histogram's total (its slots are latencies, each run's
    own) and the entries left in ``starts`` (every entry is deleted at return)."""
    from bpfmux.show.maps import read_map

    maps = coll.maps  # type: ignore[attr-defined]
    hist = dict(read_map(".bss", maps[".bss"], sum_cpus=True).entries)["hist"]
    return {"total": sum(hist), "starts": len(read_map("starts", maps["starts"], sum_cpus=True).entries)}


def test_funclatency_maps_equal_the_emulated_kernel(tmp_path) -> None:
    """funclatency vfs_read on the guest's kernel (fentry/fexit, targ_tgid a forked child that makes READS
    read(2) calls on a file and exits) and in the emulated kernel (the same settings, READS calls of
    vfs_read by the filtered process): the same histogram total (latencies themselves differ, so the slots
    are not compared) and no start left behind."""
    from bpfmux.btf import Btf
    from bpfmux.emu import Emulator
    from bpfmux.emu.vm.runtime import Task

    probe = LiveProbe()
    t = TOOLS["funclatency"]
    path = tmp_path / "f"
    path.write_bytes(b"x" * 64)
    go_r, go_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child: wait, read READS times, leave without cleanup
        try:
            os.close(go_w)
            os.read(go_r, 1)  # entered before the probes are attached: its return is not counted
            fd = os.open(path, os.O_RDONLY)
            for _ in range(READS):
                os.read(fd, 1)
        finally:
            os._exit(0)
    os.close(go_r)
    try:
        settings = t.settings(probe)
        settings.globals["targ_tgid"] = child
        with started(probe.kernel, t, settings) as st:
            assert st.started and st.links, (st.failed, st.attach_failed)
            os.write(go_w, b"g")
            os.waitpid(child, 0)
            child = 0
            real = _funclatency_maps(st.coll)
    finally:
        os.close(go_w)
        if child:
            os.kill(child, 9)
            os.waitpid(child, 0)
    assert real == {"total": READS, "starts": 0}, real
    settings = t.settings(probe)
    settings.globals["targ_tgid"] = 4242
    with Emulator(btf=Btf.vmlinux()) as emu, started(emu, t, settings) as st:
        assert st.started and st.links, (st.failed, st.attach_failed)
        emu.vm.task = Task(pid=4242, tgid=4242, comm="python3")
        for _ in range(READS):
            emu.call("vfs_read", 0, 0, 1, 0)
        assert _funclatency_maps(st.coll) == real


#: writes of two bytes the filetop workload makes (besides its READS reads of one byte)
WRITES = 3
#: the filetop workload's comm
FILETOP_COMM = "bpfmux-filetop"


def _filetop_values(coll: object, pid: int) -> list[dict[str, object]]:
    """filetop's entries of process ``pid``: every value field but the pid and tid (each run's own), which
    must be ``pid``'s only thread; the keys' device and inode numbers are the file's and not compared."""
    from bpfmux.show.maps import read_map
    from bpfmux.show.values import plain

    out = []
    for _, v in read_map("entries", coll.maps["entries"], sum_cpus=True).entries:  # type: ignore[attr-defined]
        v = plain(v)
        if v["pid"] == pid:
            assert v["tid"] == pid, v
            out.append({k: x for k, x in v.items() if k not in ("pid", "tid")})
    return out


def test_filetop_maps_equal_the_emulated_kernel(tmp_path) -> None:
    """filetop on the guest's kernel (kprobes on vfs_read and vfs_write, target_pid a forked child that opens
    a regular file, reads one byte READS times and writes two bytes WRITES times) and in the emulated kernel
    (the same settings, the same calls of vfs_read/vfs_write on a ``struct file`` of a regular file named
    ``f``): the same counts, byte counts, comm, file name and type."""
    from test_corpus_emulated_maps import kstruct

    from bpfmux.btf import Btf
    from bpfmux.emu import Emulator
    from bpfmux.emu.vm.runtime import Task

    probe = LiveProbe()
    t = TOOLS["filetop"]
    path = tmp_path / "f"
    path.write_bytes(b"x" * 64)
    go_r, go_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        try:
            os.close(go_w)
            with open("/proc/self/comm", "w") as f:
                f.write(FILETOP_COMM)
            os.read(go_r, 1)  # its kprobe fired before the probes were attached
            fd = os.open(path, os.O_RDWR)
            for _ in range(READS):
                os.read(fd, 1)
            for _ in range(WRITES):
                os.write(fd, b"ab")
        finally:
            os._exit(0)
    os.close(go_r)
    try:
        settings = t.settings(probe)
        settings.globals["target_pid"] = child
        with started(probe.kernel, t, settings) as st:
            assert st.started and st.links, (st.failed, st.attach_failed)
            os.write(go_w, b"g")
            os.waitpid(child, 0)
            pid, child = child, 0
            real = _filetop_values(st.coll, pid)
    finally:
        os.close(go_w)
        if child:
            os.kill(child, 9)
            os.waitpid(child, 0)
    assert len(real) == 1 and real[0]["reads"] == READS and real[0]["writes"] == WRITES, real
    assert real[0]["comm"] == FILETOP_COMM and real[0]["filename"] == "f", real
    settings = t.settings(probe)
    settings.globals["target_pid"] = 4242
    with Emulator(btf=Btf.vmlinux()) as emu, started(emu, t, settings) as st:
        assert st.started and st.links, (st.failed, st.attach_failed)
        emu.vm.task = Task(pid=4242, tgid=4242, comm=FILETOP_COMM)
        sb = kstruct(emu, "super_block", {"s_dev": 42})
        inode = kstruct(emu, "inode", {"i_mode": 0o100644, "i_ino": 7, "i_sb": sb})
        dentry = kstruct(emu, "dentry", {"d_name.name": emu.alloc(b"f\0")})
        file = kstruct(emu, "file", {"f_inode": inode, "f_path.dentry": dentry})
        for _ in range(READS):
            emu.call("vfs_read", file, 0, 1, 0)
        for _ in range(WRITES):
            emu.call("vfs_write", file, 0, 2, 0)
        assert _filetop_values(st.coll, 4242) == real
