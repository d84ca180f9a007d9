"""Differential testing of the emulator's VM against the real kernel.

1. Random verifier-valid programs (:mod:`bpfmux.emu.vm.progen`: ALU, JMP/JMP32,
   stack and context memory, atomics, loops, bpf-to-bpf calls) run as
   ``BPF_PROG_TYPE_SYSCALL`` programs through ``BPF_PROG_TEST_RUN`` and on
   every emulator tier (checked, fast, native). The kernel writes the context back; each program
   ends by storing r0-r8 and its stack into the context, so comparing
   ``retval`` and the whole context compares every register and all memory.
   **test_random_programs_10000** is the long one (10,000 programs, marked
   ``slow``; about half a minute: one fd at a time, closed at once, one VM).
2. Random map programs (:func:`~bpfmux.emu.vm.progen.random_map_program`):
   updates with every flag, lookups writing through the value pointer and
   deletes on a hash and an array map; return codes, context and the maps'
   contents after the run must agree.
3. Every test object (``tests/bpf/*.bpf.o``) program the kernel can test-run
   with a plain context (``syscall``, ``raw_tp``) runs in the kernel (through
   :class:`bpfmux.live.LiveKernel`) and in the VM (loaded here from the
   :class:`~bpfmux.obj.ObjectSpec`); return value, context and the contents
   of every (non per-CPU) map must agree.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

import pytest

from bpfmux.emu import VM, Task
from bpfmux.emu.vm import TIERS
from bpfmux.emu.vm.progen import random_program
from bpfmux.host.kconfig import kernel_config
from bpfmux.isa.insn import encode
from bpfmux.live import sys as lsys
from bpfmux.uapi import HelperId, MapType, ProgFlags, ProgType

pytestmark = pytest.mark.live

ROOT = Path(__file__).resolve().parents[2]
OBJECTS = sorted((ROOT / "tests" / "bpf").glob("*.bpf.o"))
M32 = 0xFFFFFFFF


def run_kernel(insns, ctx: bytes) -> tuple[int, bytes]:
    fd = lsys.prog_load(ProgType.SYSCALL, encode(insns), "GPL", name="vmdiff", prog_flags=ProgFlags.SLEEPABLE)
    try:
        buf = bytearray(ctx)  # syscall programs: the kernel copies the context back into ctx_in
        res = lsys.prog_test_run(fd, ctx_in=buf)
        return res.retval, bytes(buf)
    finally:
        fd.close()


def check_range(seeds: range) -> list[str]:
    mismatches = []
    with VM() as vm:
        for seed in seeds:
            g = random_program(seed, 40)
            kret, kctx = run_kernel(g.insns, g.ctx)
            prog = vm.load(g.insns, name=f"p{seed}")
            for tier in TIERS:
                res = prog.run(g.ctx, tier=tier)
                if res.r0 & M32 != kret or res.ctx != kctx:
                    mismatches.append(f"seed {seed} {tier}: r0 {res.r0:#x} vs kernel {kret:#x}, "
                                      f"ctx {'equal' if res.ctx == kctx else 'differs'}")
            prog.close()
    return mismatches


def test_random_programs_quick(root_required):
    assert check_range(range(200)) == []


@pytest.mark.slow
def test_random_programs_10000(root_required):
    """The acceptance run: 10,000 random programs, zero mismatches."""
    assert check_range(range(10_000, 20_000)) == []


def test_random_map_programs(root_required):
    from bpfmux.emu.vm.progen import random_map_program

    mismatches = []
    for seed in range(1000):
        g = random_map_program(seed)
        kmaps = [lsys.map_create(t, k, v, n) for t, k, v, n in g.maps]
        try:
            fd = lsys.prog_load(ProgType.SYSCALL, encode(g.with_fds([m.fd for m in kmaps])), "GPL",
                                name="vmdiffmap", prog_flags=ProgFlags.SLEEPABLE)
            kbuf = bytearray(g.ctx)
            try:
                kret = lsys.prog_test_run(fd, ctx_in=kbuf).retval
            finally:
                fd.close()
            kdump = [_raw_dump(m, k, v) for m, (_, k, v, _) in zip(kmaps, g.maps, strict=True)]
        finally:
            for m in kmaps:
                m.close()
        for tier in TIERS:
            with VM() as vm:
                ms = [vm.create_map(t, k, v, n) for t, k, v, n in g.maps]
                res = vm.load(g.with_fds([m.fd for m in ms])).run(g.ctx, tier=tier)
                edump = [_emu_dump(m) for m in ms]
            if res.r0 & M32 != kret or res.ctx != bytes(kbuf) or edump != kdump:
                mismatches.append(f"seed {seed} {tier}")
    assert mismatches == []


# -- test objects ---------------------------------------------------------------

def _candidates():
    from bpfmux.errors import BpfmuxError
    from bpfmux.obj import load_object

    out = []
    for path in OBJECTS:
        try:
            spec = load_object(path)
        except BpfmuxError:
            continue  # objects the loader refuses are covered by its own tests
        for ps in spec.programs.values():
            if ps.autoload and ps.prog_type in (ProgType.SYSCALL, ProgType.RAW_TRACEPOINT):
                out.append((path, ps.name))
    return out


CANDIDATES = _candidates()


def _raw_dump(fd, key_size: int, value_size: int) -> dict[bytes, bytes]:
    out = {}
    key = None
    while True:
        nxt = ctypes.create_string_buffer(key_size)
        if not lsys.map_get_next_key(fd, key, nxt):
            return out
        val = ctypes.create_string_buffer(value_size)
        if lsys.map_lookup_elem(fd, nxt.raw, val):
            out[nxt.raw] = val.raw
        key = nxt.raw


def _emu_dump(m) -> dict[bytes, bytes]:
    return {k: m.sys_lookup(k) for k in m.sys_keys()}


def _load_into_vm(vm: VM, spec, btf):
    maps = {}
    for ms in spec.maps.values():
        maps[ms.name] = vm.map_from_spec(ms)
        if ms.section == ".kconfig" or ms.name == ".kconfig":
            value = spec.kconfig_data(kernel_config())
            maps[ms.name].storage[0][: len(value)] = value
    progs = {}
    for ps in spec.programs.values():
        if not ps.autoload:
            continue
        insns = ps.instructions(lambda name: maps[name].fd, btf)
        progs[ps.name] = vm.load(insns, name=ps.name, prog_type=ps.prog_type)
    for ms in spec.maps.values():
        for slot, name in (ms.init_slots or {}).items():
            target = progs.get(name) or maps.get(name)
            if target is not None:
                maps[ms.name][slot] = target
    return progs, maps


_COMPARED = (MapType.ARRAY, MapType.HASH, MapType.LRU_HASH)


@pytest.mark.parametrize("path,name", CANDIDATES, ids=[f"{p.stem}:{n}" for p, n in CANDIDATES])
def test_object_program_matches_kernel(pin_root, path, name):
    from bpfmux.btf import Btf
    from bpfmux.errors import BpfError, NotSupportedError, VerifierError
    from bpfmux.live import LiveKernel
    from bpfmux.obj import load_object

    spec = load_object(path)
    ps = spec.program(name)
    if any(i.opcode == 0x85 and i.src == 0 and i.imm == HelperId.get_current_task for i in ps.insns):
        pytest.skip(f"{name} reads the real kernel's task_struct (bpf_get_current_task): the emulated "
                    "kernel has no copy of the host kernel's memory to compare with")
    ctx = bytes((i * 37 + 11) & 0xFF for i in range(256 if ps.prog_type == ProgType.SYSCALL else 64))
    try:
        coll = LiveKernel(pin_root=pin_root).load(path, programs=[name])
    except (VerifierError, NotSupportedError) as e:
        pytest.skip(f"the kernel does not load {path.name}:{name} here: {str(e).splitlines()[0]}")
    with coll:
        kbuf = bytearray(ctx)
        try:
            kres = lsys.prog_test_run(coll.programs[name].fd, ctx_in=kbuf)
        except BpfError as e:
            pytest.skip(f"the kernel cannot test-run {name}: {e}")
        kmaps = {n: _raw_dump(m.fd, m.key_size, m.value_size) for n, m in coll.maps.items()
                 if MapType(m.type) in _COMPARED}
    tid = ctypes.CDLL(None).gettid() if hasattr(ctypes.CDLL(None), "gettid") else os.getpid()
    for tier in TIERS:
        with VM(task=Task(pid=tid, tgid=os.getpid(), comm=Path(os.sys.argv[0]).name)) as vm:
            progs, maps = _load_into_vm(vm, load_object(path), Btf.vmlinux())
            res = progs[name].run(ctx, tier=tier)
            assert res.r0 & M32 == kres.retval, f"{tier}: r0 {res.r0:#x} vs kernel {kres.retval:#x}"
            if ps.prog_type == ProgType.SYSCALL:
                assert res.ctx == bytes(kbuf), f"{tier}: context differs"
            for n, kdump in kmaps.items():
                assert _emu_dump(maps[n]) == kdump, f"{tier}: map {n} differs"
