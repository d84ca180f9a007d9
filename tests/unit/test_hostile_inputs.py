"""Hostile inputs end, and end small: each case finishes with one error line
(or an ``EmulatorFault``) instead of running forever, raising
``MemoryError`` or printing gigabytes, and its peak memory is asserted from
the process that ran it (``resource.getrusage`` in a subprocess).

The peak is the subprocess's own high-water mark: ``resource.getrusage``'s
``ru_maxrss`` when the process did not inherit a larger one, else
``VmHWM`` of its memory map (Linux carries the forking parent's peak over
``exec`` into ``ru_maxrss``, and pytest's own can be hundreds of MiB).

The subprocess timeouts only stop a hang; no assertion is about speed
(``bench/vm_speed.py`` measures translation times). Cases that take more than
a few seconds are marked ``slow``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from bpfmux.btf import Btf
from bpfmux.btf.builder import BtfBuilder
from bpfmux.btf.cdump import dump_c
from bpfmux.emu import VM, Emulator
from bpfmux.errors import BpfError, EmulatorFault, ParseError
from bpfmux.isa.insn import Insn
from bpfmux.uapi import MapType

ROOT = Path(__file__).resolve().parents[2]
BPF = ROOT / "tests" / "bpf"
MiB = 1 << 20

#: Runs a module (``-m``) or a script, then writes the process's peak RSS (KiB) to $BOUNDS_RSS.
_MEASURE = textwrap.dedent("""
    import os, resource, runpy, sys
    inherited = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kind, target = sys.argv[1], sys.argv[2]
    sys.argv = [target] + sys.argv[3:]
    try:
        if kind == "module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    finally:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if peak <= inherited:  # the parent's peak, carried over exec: read this memory map's own
            with open("/proc/self/status") as status:
                peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
        with open(os.environ["BOUNDS_RSS"], "w") as f:
            f.write(str(peak))
""")


def _run(tmp_path: Path, kind: str, target: str, args: tuple[str, ...], timeout: float,
         stdin: object) -> tuple[subprocess.CompletedProcess, int]:
    rss = tmp_path / "rss"
    env = dict(os.environ, BOUNDS_RSS=str(rss))
    r = subprocess.run([sys.executable, "-c", _MEASURE, kind, target, *args], capture_output=True, text=True,
                       timeout=timeout, cwd=ROOT, env=env, stdin=stdin)
    return r, int(rss.read_text()) * 1024


def measured(tmp_path: Path, *args: str, timeout: float = 120,
             stdin: object = subprocess.DEVNULL) -> tuple[subprocess.CompletedProcess, int]:
    """Run ``bpfmux ARGS`` in a subprocess; its result and peak RSS in bytes."""
    return _run(tmp_path, "module", "bpfmux.cli.main", args, timeout, stdin)


def measured_script(tmp_path: Path, code: str, timeout: float = 300) -> tuple[subprocess.CompletedProcess, int]:
    """Run Python ``code`` in a subprocess; its result and peak RSS in bytes."""
    script = tmp_path / "case.py"
    script.write_text(textwrap.dedent(code))
    return _run(tmp_path, "path", str(script), (), timeout, subprocess.DEVNULL)


def one_error_line(r: subprocess.CompletedProcess) -> str:
    """The single line a failed command printed (no traceback)."""
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bpfmux: "), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    return lines[0]


# --------------------------------------------------------------------------- maps


def test_array_of_the_whole_index_space_is_refused_before_anything_is_allocated() -> None:
    with Emulator(btf=None) as emu:
        with pytest.raises(BpfError) as e:
            emu.create_map(MapType.ARRAY, 4, 8, 0xFFFFFFFF, name="huge")
        assert e.value.errno == 12  # ENOMEM, as this kernel answers
        assert "budget" in str(e.value) and "memory_budget" in str(e.value)
        assert emu.vm.maps == [] and emu.vm.memory.used == 0  # nothing half-registered
    assert emu.closed  # and close() worked


@pytest.mark.parametrize("args,errno", [
    ((MapType.ARRAY, 4, 8, 1 << 28), 12),            # 2 GiB: over the default 1 GiB budget
    ((MapType.PROG_ARRAY, 4, 4, 0xFFFFFFFF), 12),
    ((MapType.RINGBUF, 0, 0, 1 << 31), 12),
    ((MapType.HASH, 4, 8, 0xFFFFFFFF), 7),           # E2BIG: more buckets than the kernel makes
    ((MapType.HASH, 4, 64, 1 << 24), 12),            # preallocated: 1 GiB of elements
    ((MapType.PERCPU_ARRAY, 4, 40 << 10, 1), 7),      # a per-CPU value over 32 KiB
    ((MapType.STACK_TRACE, 4, 8, (1 << 31) + 1), 7),
])
def test_map_sizes_get_the_kernels_errno(args: tuple, errno: int) -> None:
    with VM() as vm:
        with pytest.raises(BpfError) as e:
            vm.create_map(*args)
        assert e.value.errno == errno
        assert vm.maps == [] and vm.memory.used == 0


def test_no_prealloc_hash_charges_per_element_and_fails_enomem() -> None:
    with VM(memory_budget=256 * 1024) as vm:  # the buckets (64 KiB) now, each element when it is stored
        m = vm.create_map(MapType.HASH, 8, 8, 4096, flags=1)  # BPF_F_NO_PREALLOC
        stored = 0
        with pytest.raises(BpfError) as e:
            for k in range(4096):
                m[k] = k
                stored += 1
        assert e.value.errno == 12 and 0 < stored < 4096
        used = vm.memory.used
        del m[0]
        assert vm.memory.used < used
    assert vm.memory.used == 0


def test_budget_can_be_raised() -> None:
    with VM(memory_budget=1 << 20) as vm:
        with pytest.raises(BpfError):
            vm.create_map(MapType.ARRAY, 4, 8, 1 << 20)
    with VM(memory_budget=16 << 20) as vm:
        m = vm.create_map(MapType.ARRAY, 4, 8, 1 << 20)
        assert m[(1 << 20) - 1] == bytes(8)


def test_items_of_a_large_array_are_read_lazily() -> None:
    from itertools import islice

    with VM() as vm:
        m = vm.create_map(MapType.ARRAY, 4, 8, 1 << 24)  # 128 MiB
        m[5] = 7
        first = list(islice(m.items(), 6))
        assert first[5] == (5, (7).to_bytes(8, "little")) and len(first) == 6


def test_emulate_refuses_an_object_with_a_huge_map(tmp_path: Path) -> None:
    r, rss = measured(tmp_path, "emulate", str(BPF / "huge_map.bpf.o"), "--btf", "none")
    line = one_error_line(r)
    assert "ENOMEM" in line and "--memory-budget" in line
    assert rss < 300 * MiB


def test_emulate_streams_the_dump_of_a_large_array(tmp_path: Path) -> None:
    r, rss = measured(tmp_path, "emulate", str(BPF / "big_array.bpf.o"), "--btf", "none", "--json",
                      "--dump-entries", "5")
    assert r.returncode == 0, r.stderr
    big = json.loads(r.stdout)["maps"]["big"]
    assert list(big)[:5] == ["0", "1", "2", "3", "4"] and big["..."].startswith(f"{(1 << 25) - 5} more entries")
    assert rss < 256 * MiB + 300 * MiB  # the array itself, not a dict of its 33M entries


@pytest.mark.slow
def test_a_2_gib_array_with_a_raised_budget_dumps_in_bounded_memory(tmp_path: Path) -> None:
    # the array is 2 GiB and reading it adds next to nothing
    r, rss = measured_script(tmp_path, """
        from bpfmux.emu import Emulator
        from bpfmux.uapi import MapType
        with Emulator(btf=None, memory_budget=3 << 30) as emu:
            m = emu.create_map(MapType.ARRAY, 4, 8, 1 << 28, name="big")
            m[(1 << 28) - 1] = 1
            n = 0
            for k, v in m.items():
                n += 1
                if n == 1_000_000:
                    break
            print(n, m[(1 << 28) - 1].hex())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1000000", "0100000000000000"]
    assert rss < (2 << 30) + 400 * MiB


# --------------------------------------------------------------------------- helpers


@pytest.mark.parametrize("helper,insns", [
    # r1 = r10 - 8; r2 = 0xffffffff; r3 = 0; call bpf_probe_read_kernel (113)
    ("probe_read_kernel", "Insn(0xBF, 1, 10), Insn(0x07, 1, 0, 0, -8), Insn(0xB4, 2, 0, 0, -1), Insn(0xB7, 3), "
                          "Insn(0x85, 0, 0, 0, 113)"),
    # r1 = r10 - 16; r2 = 0xffffffff; call bpf_get_current_comm (16)
    ("get_current_comm", "Insn(0xBF, 1, 10), Insn(0x07, 1, 0, 0, -16), Insn(0xB4, 2, 0, 0, -1), "
                         "Insn(0x85, 0, 0, 0, 16)"),
])
def test_a_helper_given_4_gib_faults_without_allocating(tmp_path: Path, helper: str, insns: str) -> None:
    r, rss = measured_script(tmp_path, f"""
        from bpfmux.emu import VM
        from bpfmux.errors import EmulatorFault
        from bpfmux.isa.insn import Insn
        with VM() as vm:
            p = vm.load([{insns}, Insn(0x95)])
            for tier in ("checked", "fast"):
                try:
                    p.run(tier=tier)
                except EmulatorFault as e:
                    print(tier, e)
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["checked", "fast"]
    assert all("4294967295-byte write" in line for line in lines), lines
    assert rss < 200 * MiB  # no buffer of the size the program asked for was made


# --------------------------------------------------------------------------- run budget


@pytest.mark.parametrize("tier", ["fast", "native"])
def test_nested_bpf_loop_at_the_maximum_ends_on_the_run_budget(tmp_path: Path, tier: str) -> None:
    if tier == "native":
        _needs_llvmlite()
    r, rss = measured(tmp_path, "emulate", str(BPF / "hostile.bpf.o"), "--btf", "none", "--tier", tier)
    line = one_error_line(r)
    assert f"run budget of {1 << 22} instructions exhausted" in line
    assert rss < 300 * MiB


@pytest.mark.slow
def test_nested_bpf_loop_on_the_checked_tier(tmp_path: Path) -> None:
    r, rss = measured(tmp_path, "emulate", str(BPF / "hostile.bpf.o"), "--btf", "none", "--tier", "checked",
                      timeout=300)
    assert "run budget" in one_error_line(r)
    assert rss < 300 * MiB


def _needs_llvmlite() -> None:
    from bpfmux.emu.vm import native

    if not native.available():
        pytest.skip("llvmlite is not installed (pip install bpfmux[native])")


@pytest.mark.parametrize("tier", ["checked", "fast", "native"])
def test_run_budget_is_shared_by_callbacks(tier: str) -> None:
    if tier == "native":
        _needs_llvmlite()
    with Emulator(btf=None, run_budget=100_000, tier=tier) as emu:
        coll = emu.load(BPF / "hostile.bpf.o")
        coll.attach_all()
        with pytest.raises(EmulatorFault, match="run budget of 100000 instructions exhausted"):
            emu.call("bpf_fentry_test1", 1)
        inner = coll.maps[".bss"]["inner_calls"]
        assert 0 < inner < 100_000 // 6  # each inner iteration costs its callback and bpf_loop's own six


def test_sigint_ends_a_running_emulate(tmp_path: Path) -> None:
    p = subprocess.Popen([sys.executable, "-m", "bpfmux.cli.main", "emulate", str(BPF / "hostile.bpf.o"), "--btf",
                          "none", "--run-budget", str(1 << 40)], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)  # well inside the nested loops
        assert p.poll() is None
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- the fast tier's translator


def _chain(n: int) -> list[Insn]:
    """``r1 = -1``; n × (``if r1 == i goto +1; r0 += 1``); exit: one join point per pair."""
    out = [Insn(0xB7, 0), Insn(0xB7, 1, 0, 0, -1)]
    for i in range(n):
        out += [Insn(0x15, 1, 0, 1, i), Insn(0x07, 0, 0, 0, 1)]
    return out + [Insn(0x95)]


def _straight(n: int) -> list[Insn]:
    """``r2 = *(u64 *)(r1 + 0)``, n × ``r2 += 1``, ``r0 = r2``, exit."""
    return [Insn(0x79, 2, 1)] + [Insn(0x07, 2, 0, 0, 1)] * n + [Insn(0xBF, 0, 2), Insn(0x95)]


@pytest.mark.parametrize("dispatch", [False, True])
def test_long_straight_code_on_one_register_compiles(dispatch: bool) -> None:
    from bpfmux.emu.vm import translate

    with VM() as vm:
        p = vm.load(_straight(1000))
        p._fast = translate.compile_program(p, dispatch=dispatch)
        p._fast_version = vm.code_version()
        r = p.run((5).to_bytes(8, "little"), tier="fast")
        assert r.r0 == 1005 and r.insns == 1003


def test_16k_instruction_chain_on_both_tiers_and_forms() -> None:
    from bpfmux.emu.vm import translate

    with VM() as vm:
        p = vm.load(_chain(8000))
        fast, checked = p.run(tier="fast"), p.run(tier="checked")
        assert fast.r0 == checked.r0 == 8000 and fast.insns == checked.insns == 16003
        p._fast = translate.compile_program(p, dispatch=True)
        assert p.run(tier="fast").r0 == 8000


def test_deeply_nested_branches_fall_back_to_dispatch() -> None:
    # n forward branches over ever shorter tails: if/else nesting n deep, more than Python's 100 levels
    n = 300
    insns = [Insn(0xB7, 0), Insn(0xB7, 1, 0, 0, 299)]
    for i in range(n):
        insns += [Insn(0x55, 1, 0, 2 * (n - i) - 1, i), Insn(0x07, 0, 0, 0, 1)]
    insns.append(Insn(0x95))
    with VM() as vm:
        p = vm.load(insns)
        assert p.run(tier="fast").r0 == p.run(tier="checked").r0


@pytest.mark.slow
def test_a_million_instructions_translate_in_bounded_memory(tmp_path: Path) -> None:
    """The kernel's largest program, 1M instructions of join points, on the
    VM directly: the emulated verifier is not asked (it takes far longer than
    the translation on a program this size)."""
    r, rss = measured_script(tmp_path, """
        from bpfmux.emu import VM
        from bpfmux.isa.insn import Insn
        n = 499_998
        insns = [Insn(0xB7, 0), Insn(0xB7, 1, 0, 0, -1)]
        for i in range(n):
            insns += [Insn(0x15, 1, 0, 1, i), Insn(0x07, 0, 0, 0, 1)]
        insns += [Insn(0xB7, 2), Insn(0x95)]  # exactly the kernel's 1,000,000
        with VM() as vm:
            r = vm.load(insns).run(tier="fast")
            print(len(insns), r.r0, r.insns)
    """, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["1000000", "499998", "1000000"]
    assert rss < 4 << 30


# --------------------------------------------------------------------------- parsers and dumps


def _padding_btf() -> bytes:
    b = BtfBuilder()
    i = b.int("int", 4, signed=True)
    b.struct("huge", [("a", i)], size=0xFFFFFFFF)
    b.struct("gap", [("a", i), ("b", i, 8 * 4096)])
    return b.write()


def test_c_dump_writes_a_huge_gap_as_one_array() -> None:
    text = dump_c(Btf.parse(_padding_btf()))
    assert len(text) < 10_000
    assert "char __bpfmux_pad_4[4294967291];" in text
    # struct gap: 4092 bytes between a and b, up to a page written as bpftool does, one 'long: 64;' per 8 bytes
    gap = text[text.index("struct gap {"):]
    gap = gap[:gap.index("};")]
    assert gap.count("long: 64;") == 511 and "__bpfmux_pad" not in gap


def test_btf_dump_c_of_the_padding_btf_is_small(tmp_path: Path) -> None:
    f = tmp_path / "padding.btf"
    f.write_bytes(_padding_btf())
    r, rss = measured(tmp_path, "btf", "dump", "--format", "c", str(f))
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) < 10_000 and rss < 200 * MiB


@pytest.mark.parametrize("args", [["objdump", "/dev/zero"], ["btf", "dump", "/dev/zero"],
                                  ["btf", "dump", "--format", "c", "/dev/zero"],
                                  ["emulate", "/dev/zero", "--btf", "none"]])
def test_dev_zero_is_refused_before_reading(tmp_path: Path, args: list[str]) -> None:
    r, rss = measured(tmp_path, *args)
    assert "character device" in one_error_line(r)
    assert rss < 200 * MiB


@pytest.mark.parametrize("args", [["objdump"], ["btf", "dump"]])
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path, args: list[str]) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r, _ = measured(tmp_path, *args, str(fifo), timeout=60)
    assert "FIFO" in one_error_line(r)


def test_call_stream_from_dev_zero_on_stdin_is_refused(tmp_path: Path) -> None:
    with open("/dev/zero", "rb") as zero:
        r, rss = measured(tmp_path, "emulate", str(BPF / "multi.bpf.o"), "--btf", "none", "--calls", "-",
                          stdin=zero)
    assert "longer than" in one_error_line(r)
    assert rss < 200 * MiB


def test_call_stream_file_that_is_a_device_is_refused(tmp_path: Path) -> None:
    r, _ = measured(tmp_path, "emulate", str(BPF / "multi.bpf.o"), "--btf", "none", "--calls", "/dev/zero")
    assert "character device" in one_error_line(r)


def test_endless_repeat_is_refused() -> None:
    from bpfmux.emu.kernel.replay import parse_calls, parse_workload

    with pytest.raises(ParseError):
        list(parse_calls(['{"call": "f", "repeat": 100000000000}']))
    with pytest.raises(ParseError):
        parse_workload("f(1)*" + "9" * 5000)


def test_read_file_limits() -> None:
    from bpfmux.host.files import read_file

    with pytest.raises(ParseError, match="more than a test file may"):
        read_file("/proc/self/maps", 10, "test file")  # reports size 0: the limit holds while reading
    with pytest.raises(ParseError, match="directory"):
        read_file("/", 10)


# --------------------------------------------------------------------------- caches


def test_cache_writes_replace_a_planted_symlink_and_never_follow_it(tmp_path: Path) -> None:
    from bpfmux.host.cache import cache_dir, read_json, write_json

    root = cache_dir(tmp_path / "cache")
    assert root is not None
    victim = tmp_path / "victim"
    victim.write_text("precious")
    planted = root / "features.json"
    planted.symlink_to(victim)
    assert read_json(planted) is None  # O_NOFOLLOW: the link is not read
    write_json(planted, {"a": 1})
    assert victim.read_text() == "precious"
    assert not planted.is_symlink() and read_json(planted) == {"a": 1}
    for leftover in root.iterdir():
        assert not leftover.name.startswith(".tmp"), leftover


def test_cache_dir_that_is_a_symlink_is_not_used(tmp_path: Path) -> None:
    from bpfmux.host.cache import cache_dir

    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    link = tmp_path / "cache"
    link.symlink_to(target)
    assert cache_dir(link) is None


def _plant(root: Path, name: str, tmp_path: Path) -> tuple[Path, Path]:
    victim = tmp_path / f"victim-{name}"
    victim.write_text("precious")
    planted = root / name
    planted.symlink_to(victim)
    return planted, victim


def test_features_cache_writer_never_follows_a_planted_symlink(tmp_path: Path) -> None:
    """live.features: the per-boot cache file replaced by a symlink to a
    victim file is neither read nor written through."""
    if os.geteuid() != 0:
        pytest.skip("probing features loads programs: needs root")
    from bpfmux.host.cache import boot_id, cache_dir, read_json
    from bpfmux.live.features import Features
    from bpfmux.uapi import ProgType

    root = cache_dir(tmp_path / "cache")
    assert root is not None and boot_id() is not None
    planted, victim = _plant(root, f"features-{os.uname().release}-{boot_id()}.json", tmp_path)
    f = Features(cache_dir=root)
    assert f._mem == {}  # nothing read through the link
    f.prog_type(ProgType.SOCKET_FILTER)
    f.save()
    assert victim.read_text() == "precious"
    assert not planted.is_symlink() and "prog:1" in read_json(planted)
    assert [p.name for p in root.iterdir()] == [planted.name]  # no temporary file left


def test_btf_ids_cache_writer_never_follows_a_planted_symlink(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """live.btf_ids: likewise, through $XDG_CACHE_HOME."""
    from bpfmux.host.cache import boot_id, read_json
    from bpfmux.live.btf_ids import BtfIds

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    root = tmp_path / "xdg" / "bpfmux"
    root.mkdir(parents=True, mode=0o700)
    planted, victim = _plant(root, f"btf-ids-{boot_id()}.json", tmp_path)

    class _Btf:
        def find_ids(self, name: str, kind: str) -> list[int]:
            return [42]

    assert BtfIds(_Btf).get("some_func") == 42
    assert victim.read_text() == "precious"
    assert not planted.is_symlink() and read_json(planted) == {"func:some_func": 42}
    assert [p.name for p in root.iterdir()] == [planted.name]


def test_a_cache_dir_of_ours_only_readable_by_others_is_made_private_and_used(tmp_path: Path) -> None:
    from bpfmux.host.cache import cache_dir

    d = tmp_path / "cache"
    d.mkdir(mode=0o700)
    d.chmod(0o755)  # as another tool may have made ~/.cache/bpfmux: nobody else could write in it
    assert cache_dir(d) == d
    assert d.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("problem", ["open to others", "another owner", "a file"])
def test_a_cache_dir_others_could_plant_in_is_not_used(tmp_path: Path, problem: str) -> None:
    from bpfmux.host.cache import cache_dir

    d = tmp_path / "cache"
    if problem == "a file":
        d.write_text("")
    else:
        d.mkdir(mode=0o700)
    if problem == "open to others":
        d.chmod(0o777)
    elif problem == "another owner":
        if os.geteuid() != 0:
            pytest.skip("giving a directory to another user needs root")
        os.chown(d, 65534, 65534)
    assert cache_dir(d) is None
