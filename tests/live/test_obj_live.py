"""ObjectSpec → the real kernel: relocated instructions load, run and compute
what the C source says (global data offsets, kconfig, bpf-to-bpf linking,
func_info/line_info, map references, CO-RE against the kernel's BTF as libbpf
resolves it).

Uses only the bare ``bpf(2)`` layer (``bpfmux.live.sys``) so that it checks
:mod:`bpfmux.obj` and not a loader built on top of it.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from bpfmux.btf import writer
from bpfmux.obj import ObjectSpec, ProgramSpec, load_object

BPF = Path(__file__).resolve().parent.parent / "bpf"
pytestmark = pytest.mark.live


@pytest.fixture
def sysmod(root_required):
    from bpfmux.live import sys as bsys

    return bsys


class Loaded:
    """Maps of one object created through bpf(2), closed at the end."""

    def __init__(self, bsys, spec: ObjectSpec, kconfig: dict | None = None) -> None:
        self.bsys, self.spec, self.fds = bsys, spec, {}
        self.btf_fd = bsys.btf_load(writer.write(spec.btf)) if spec.btf is not None else None
        for name, m in spec.maps.items():
            fd = bsys.map_create(int(m.type), m.key_size, m.value_size, m.max_entries, flags=int(m.flags),
                                 name=m.kernel_name)
            self.fds[name] = fd
            value = m.value
            if name == ".kconfig":
                value = spec.kconfig_data(kconfig or {})
            if value is not None:
                bsys.map_update_elem(fd, struct.pack("<I", 0), bytes(value))
            if m.frozen:
                bsys.map_freeze(fd)

    def load(self, prog: ProgramSpec, target_btf=None):
        insns = prog.instructions(lambda n: self.fds[n].fd, target_btf)
        from bpfmux.isa.insn import encode

        fi = b"".join(struct.pack("<II", *r) for r in prog.kernel_func_info())
        li = b"".join(struct.pack("<IIII", *r) for r in prog.kernel_line_info())
        return self.bsys.prog_load(
            int(prog.prog_type), encode(insns), prog.license, name=prog.name[:15],
            expected_attach_type=int(prog.expected_attach_type or 0), prog_flags=int(prog.flags),
            prog_btf_fd=self.btf_fd, func_info=fi, line_info=li)

    def value(self, name: str) -> bytes:
        out = bytearray(self.spec.maps[name].value_size)
        assert self.bsys.map_lookup_elem(self.fds[name], struct.pack("<I", 0), out)
        return bytes(out)

    def close(self) -> None:
        for fd in self.fds.values():
            fd.close()
        if self.btf_fd is not None:
            self.btf_fd.close()


def test_globals_and_kconfig_run_in_kernel(sysmod) -> None:
    spec = load_object(BPF / "globals.bpf.o")
    env = Loaded(sysmod, spec, {"LINUX_KERNEL_VERSION": 0x061200, "CONFIG_BPF_SYSCALL": "y", "CONFIG_HZ": 250})
    try:
        with env.load(spec.programs["read_globals"]) as prog:
            res = sysmod.prog_test_run(prog)
            assert res.retval == 0
        out = struct.unpack("<8Q", env.value(".bss")[:64])
        assert out[0] == 42  # data_counter
        assert out[1] == 3  # data_array[2]
        assert out[2] == 7  # ro_config
        assert out[3] == ord("p")  # ro_name[1]
        assert out[4] == 0xF00 + 22  # foo_value + foo_pair[1] in .data.foo
        assert out[5] == 0xBA5  # bar_const in .rodata.bar
        assert out[6] == 0x061200
        assert out[7] == 1 | (250 << 8)  # CONFIG_BPF_SYSCALL, not the fake option, CONFIG_HZ
        assert struct.unpack_from("<Q", env.value(".data"))[0] == 43  # data_counter += 1
        assert struct.unpack_from("<I", env.value(".bss"), 64)[0] == 6  # bss_seen = ++static_counter
    finally:
        env.close()


def test_subprograms_link_and_verify(sysmod) -> None:
    spec = load_object(BPF / "subprogs.bpf.o")
    env = Loaded(sysmod, spec)
    try:
        with env.load(spec.programs["caller_one"]) as prog:
            assert sysmod.prog_test_run(prog).retval == 0
        with env.load(spec.programs["caller_two"]) as prog:
            assert sysmod.prog_test_run(prog, ctx_in=b"\0" * 8).retval == 0
        r = struct.unpack("<4Q", env.value(".bss"))

        def mix(a: int, b: int) -> int:
            return ((a * 31) ^ (b + 7)) & (2**64 - 1)

        assert r[0] == mix(5, 5) + mix(6, 3)
        assert r[1] == 42
        assert r[2] == sum(i * i for i in range(10))
        assert r[3] == mix(1, 2) + 2
    finally:
        env.close()


def test_maps_object_loads(sysmod) -> None:
    spec = load_object(BPF / "testrun.bpf.o")
    env = Loaded(sysmod, spec)
    try:
        with env.load(spec.programs["exercise"]) as prog:
            # syscall programs write back into the caller's ctx_in buffer
            ctx = bytearray(struct.pack("<QQq", 1000, 7, -5000) + b"\0" * 128)
            sysmod.prog_test_run(prog, ctx_in=ctx)
            out = struct.unpack_from("<16Q", ctx, 24)
            assert out[0] == ((1000 + 7) * 3 - (1000 >> 3) + (7 << 5))
            assert out[1] == 1000 // 7 + 1000 % 7
            assert out[10] == 2000 and out[11] == 0 and out[13] == 36
    finally:
        env.close()


@pytest.mark.skipif(not os.path.exists("/sys/kernel/btf/vmlinux"), reason="the kernel has no BTF (/sys/kernel/btf/vmlinux)")
def test_core_object_relocations_against_kernel(sysmod) -> None:
    """CO-RE through bpfmux.btf.core must give what the kernel's own layout says."""
    from bpfmux.btf import Btf, core

    assert hasattr(core, "resolve")

    vm = Btf.vmlinux()
    spec = load_object(BPF / "core.bpf.o")
    env = Loaded(sysmod, spec)
    try:
        prog = spec.programs["core_reads"]
        insns = prog.instructions(lambda n: env.fds[n].fd, vm)
        # every field offset relocation now holds the kernel's offset of that field
        for c in prog.core_relos:
            if c.kind.name == "FIELD_BYTE_OFFSET":
                root = prog.btf[c.type_id]
                path = [int(x) for x in c.access.split(":")][1:]
                t, off = root, 0
                for idx in path:
                    f = prog.btf.fields(t)[idx]
                    kt = vm.find(t.name, "struct")
                    off += vm.member(kt, f.name).offset
                    t = prog.btf.resolve(f.type)
                ins = insns[c.insn]
                assert off in (ins.imm, ins.off), (c, ins)
        with env.load(prog, vm) as fd:
            assert fd.fd >= 0
            assert sysmod.prog_test_run(fd, ctx_in=b"\0" * 8).retval == 0
        out = struct.unpack("<16Q", env.value(".bss"))
        assert out[4:12] == (1, 0, 16, 1, 0, vm.sizeof(vm.find("task_struct", "struct")), 1,
                             vm.enum_value("pid_type", "PIDTYPE_SID"))
        assert out[12] == vm.member(vm.find("task_struct", "struct"), "comm").offset
        assert out[13] == vm.find_ids("task_struct", "struct")[0]
        assert out[0] == threading.get_native_id() and out[1] == os.getpid()  # test_run runs in our task
    finally:
        env.close()


@pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool is not installed (apt-get install bpftool)")
def test_core_matches_libbpf(sysmod, tmp_path) -> None:
    """Oracle: libbpf (through bpftool) loads core.bpf.o; the kernel's translated
    instructions at every CO-RE site must equal what we produce."""
    from bpfmux.btf import Btf

    pin = f"/sys/fs/bpf/bpfmux_obj_core_{os.getpid()}"
    subprocess.run(["bpftool", "prog", "load", str(BPF / "core.bpf.o"), pin], check=True, capture_output=True)
    try:
        dump = subprocess.run(["bpftool", "-j", "prog", "dump", "xlated", "pinned", pin, "opcodes"], check=True,
                              capture_output=True, text=True).stdout
    finally:
        os.unlink(pin)
    xlated = json.loads(dump)
    prog = load_object(BPF / "core.bpf.o").programs["core_reads"]
    ours = prog.instructions(lambda n: 1, Btf.vmlinux())
    assert len(xlated) == len(ours)
    for c in prog.core_relos:
        op = xlated[c.insn]["opcodes"]
        code = int(op["code"], 16)
        off = int.from_bytes(bytes(int(b, 16) for b in op["off"]), "little", signed=True)
        imm = int.from_bytes(bytes(int(b, 16) for b in op["imm"]), "little")
        mine = ours[c.insn]
        assert (mine.opcode, mine.off, mine.imm & 0xFFFFFFFF) == (code, off, imm), (c, xlated[c.insn]["disasm"])
