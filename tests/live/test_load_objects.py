"""LiveKernel.load of the committed test objects (tests/bpf/*.bpf.o)."""

from __future__ import annotations

import gc
import os
import struct
import warnings

import pytest

from bpfmux.errors import NotFoundError, NotSupportedError, ParseError, VerifierError
from bpfmux.host.cpus import possible_cpus
from bpfmux.host.kconfig import kernel_config
from bpfmux.live import LiveKernel, maps
from bpfmux.live.ringbuf import RingBuffer
from bpfmux.obj import load_object
from bpfmux.uapi import MapType, ProgType

pytestmark = pytest.mark.usefixtures("root_required")
BPF = os.path.join(os.path.dirname(__file__), "..", "bpf")


def obj(name: str) -> str:
    return os.path.join(BPF, f"{name}.bpf.o")


@pytest.fixture
def kernel(pin_root: str) -> LiveKernel:
    return LiveKernel(pin_root=pin_root)


LOADABLE = ["btf_core", "core", "getpid", "globals", "kfunc", "kprobes", "legacy_maps", "maps", "ringbuf",
            "subprogs", "syscount", "tailcall", "testrun", "rejected"]


@pytest.mark.parametrize("name", LOADABLE)
def test_object_loads_and_closes(kernel: LiveKernel, name: str) -> None:
    spec = load_object(obj(name))
    with kernel.load(spec) as coll:
        assert set(coll.programs) | set(coll.skipped) == set(spec.programs)
        assert set(coll.maps) == set(spec.maps)
        assert coll.btf_fd is not None and coll.warnings == []
        for p in coll.programs.values():
            assert p.id > 0 and p.prog_type == spec.programs[p.name].prog_type
        for m in coll.maps.values():
            assert m.id > 0
    assert coll.closed and all(p.closed for p in coll.programs.values())


def test_maps_object_types_and_static_inner_maps(kernel: LiveKernel) -> None:
    with kernel.load(obj("maps")) as coll:
        m = coll.maps
        expected = {"array_map": maps.ArrayMap, "percpu_array_map": maps.PerCpuArrayMap,
                    "percpu_hash_map": maps.PerCpuHashMap, "lru_hash_map": maps.LruHashMap,
                    "ringbuf_map": maps.RingBufMap, "perf_map": maps.PerfEventArrayMap,
                    "stack_map": maps.StackTraceMap, "prog_array_map": maps.ProgArrayMap,
                    "array_of_maps": maps.ArrayOfMapsMap, "hash_of_maps": maps.HashOfMapsMap}
        for name, cls in expected.items():
            assert type(m[name]) is cls, name
        assert m["perf_map"].max_entries == possible_cpus()  # 0 in the object: one slot per CPU
        assert m["array_of_maps"][0] == m["inner_a"].id and m["array_of_maps"][1] == m["inner_b"].id
        # BTF-decoded values: struct val comes back as a record, dicts go in
        m["array_map"][1] = {"count": 5, "flags": 1, "tag": b"ab\0\0"}
        v = m["array_map"][1]
        assert (v.count, v.flags, v.tag) == (5, 1, b"ab\0\0")
        with pytest.raises(ParseError):
            m["array_map"][1] = {"nope": 1}
        # BTF-decoded keys: the hash map's __u64 key comes back as an int
        m["hash_map"][5] = 6
        assert list(m["hash_map"]) == [5]
        coll.programs["use_maps"]  # loaded
    # hash_map is pinned by name: the load pinned it and closing leaves the pin
    pin = os.path.join(kernel.pin_root, "hash_map")
    try:
        assert os.path.exists(pin)
        with kernel.load(obj("maps")) as again:  # reused, contents kept
            assert again.maps["hash_map"][5] == 6
    finally:
        os.unlink(pin)


def test_failed_load_reusing_a_pinned_map_closes_its_fd(kernel: LiveKernel, monkeypatch) -> None:
    kernel.load(obj("maps")).close()  # pins hash_map
    pin = os.path.join(kernel.pin_root, "hash_map")
    real_wrap = maps.wrap

    def wrap(fd, **kw):
        if kw.get("name") == "hash_map":
            raise RuntimeError("wrap failed")
        return real_wrap(fd, **kw)

    try:
        before = len(os.listdir("/proc/self/fd"))
        monkeypatch.setattr(maps, "wrap", wrap)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(RuntimeError, match="wrap failed"):
                kernel.load(obj("maps"))
            gc.collect()
        # closed by the loader, not left to Fd's finalizer (which warns)
        assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        os.unlink(pin)


def test_global_data_initial_values_and_frozen_rodata(kernel: LiveKernel) -> None:
    with kernel.load(obj("globals")) as coll:
        data, rodata, bss = coll.maps[".data"], coll.maps[".rodata"], coll.maps[".bss"]
        assert isinstance(data, maps.DataSecMap)
        assert data["data_counter"] == 42
        assert rodata["ro_config"] == 7
        res = coll.programs["read_globals"].test_run(ctx=b"")
        assert res.retval == 0
        out = bss["bss_out"]  # __u64[8], decoded through the object's BTF
        kver = int(kernel_config()["LINUX_KERNEL_VERSION"])
        assert out[:6] == [42, 3, 7, ord("p"), 0xF00 + 22, 0xBA5]
        assert out[6] == kver and out[7] & 3 == 1  # CONFIG_BPF_SYSCALL=y, the fake option absent
        assert data["data_counter"] == 43  # the program's write is visible
        with pytest.raises(PermissionError):
            rodata["ro_config"] = 8  # frozen
        data["data_counter"] = 100
        coll.programs["read_globals"].test_run(ctx=b"")
        assert coll.maps[".bss"]["bss_out"][0] == 100


def test_tail_call_slots_are_filled(kernel: LiveKernel) -> None:
    with kernel.load(obj("tailcall")) as coll:
        jt = coll.maps["jump_table"]
        assert jt[0] == coll.programs["tail_a"].id and jt[2] == coll.programs["tail_b"].id and 1 not in jt
        entry = coll.programs["tail_entry"]
        assert entry.test_run(ctx=struct.pack("<Q", 2)).retval == 20
        assert entry.test_run(ctx=struct.pack("<Q", 1)).retval == 1  # empty slot: falls through


def test_ringbuf_object_delivers(kernel: LiveKernel) -> None:
    ev = struct.Struct("<IIQ16s")
    with kernel.load(obj("ringbuf")) as coll, RingBuffer(coll.maps["events"], decode=ev) as rb:
        coll.programs["produce"].test_run(ctx=struct.pack("<II", 10, 100))
        got = rb.drain()
        assert [e[2] for e in got] == [*range(100, 110), 0xFFFFFFFF]
        assert rb.discarded == 1
        assert coll.maps[".bss"]["produced"] == 10


def test_rejected_program_raises_verifier_error_with_source_lines(kernel: LiveKernel) -> None:
    before = len(os.listdir("/proc/self/fd"))
    with pytest.raises(VerifierError) as exc:
        kernel.load(obj("rejected"), programs=["unchecked_lookup"])
    err = exc.value
    assert err.program == "unchecked_lookup"
    assert "invalid mem access 'map_value_or_null'" in err.log
    assert "rejected.bpf.c:32" in err.log and "missing NULL check" in err.log  # source line from line_info
    assert len(os.listdir("/proc/self/fd")) == before  # the half-loaded collection was closed


def test_missing_kernel_features_raise_not_supported(kernel: LiveKernel) -> None:
    with pytest.raises(NotSupportedError) as exc:
        kernel.load(obj("fentry_test"))
    assert exc.value.feature == "fentry"
    with pytest.raises(NotSupportedError) as exc:
        kernel.load(obj("multi"), programs=["mainline_entry"])
    assert "multi" in exc.value.feature


def test_unknown_program_selection(kernel: LiveKernel) -> None:
    with pytest.raises(NotFoundError):
        kernel.load(obj("getpid"), programs=["nope"])


def test_program_attach_delegates_to_links(kernel: LiveKernel) -> None:
    with kernel.load(obj("getpid")) as coll:
        prog = coll.programs["count_getpid"]
        assert prog.prog_type == ProgType.RAW_TRACEPOINT and prog.attach_target == "sys_enter"
        with prog.attach() as link:
            assert link.program is prog
            os.getpid()
        assert link.closed


def test_no_fd_leak_over_1000_load_close_cycles(kernel: LiveKernel) -> None:
    spec = load_object(obj("getpid"))
    with kernel.load(spec):  # warm caches (BTF features, vmlinux) before counting
        pass
    before = sorted(os.listdir("/proc/self/fd"))
    for _ in range(1000):
        coll = kernel.load(spec)
        coll.close()
    assert sorted(os.listdir("/proc/self/fd")) == before


def test_map_create_of_unknown_type_is_not_supported() -> None:
    with pytest.raises(NotSupportedError):
        maps.create(MapType.ARENA + 40, 4, 4, 1)  # type: ignore[operator]
