"""The ctypes layouts of ``live.sys`` match the running kernel's own BTF, as
``bpftool`` reads it.

``live.sys.types`` is generated from the BTF by bpfmux's own reader
(``tests/unit/test_sys_generated.py`` checks it is up to date); this test
checks the result through an independent reader: every field, bit-field and
nested member must sit at the offset (and bit) the kernel's
``union bpf_attr`` (and ``bpf_prog_info``, ``perf_event_attr``, …) puts it,
as read from ``/sys/kernel/btf/vmlinux`` through ``bpftool -j btf dump``, and
every structure must have the kernel's size. Members the kernel does not have
yet (the generator's overlay, the 2026 ``tracing_multi``) are listed
explicitly and must lie inside the kernel's union size, so the kernel still
sees zeros there.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import shutil
import subprocess

import pytest

from bpfmux.live import sys as s

VMLINUX = "/sys/kernel/btf/vmlinux"

pytestmark = pytest.mark.skipif(
    not (shutil.which("bpftool") and os.path.exists(VMLINUX)),
    reason="needs bpftool and /sys/kernel/btf/vmlinux (CONFIG_DEBUG_INFO_BTF) to read the kernel's layouts",
)

#: members bpfmux declares that this kernel (6.18) predates, per structure.
NEWER_THAN_KERNEL = {"tracing_multi"}
#: ctypes names that stand for a run of kernel bit-fields (one integer word).
ALIASES = {"flags@PerfEventAttr": "disabled"}


@functools.cache
def _types() -> list[dict]:
    out = subprocess.run(["bpftool", "-j", "btf", "dump", "file", VMLINUX], capture_output=True, check=True).stdout
    return json.loads(out)["types"]


def _by_id(type_id: int) -> dict:
    t = _types()[type_id - 1]
    assert t["id"] == type_id
    return t


def _resolve(type_id: int) -> dict:
    t = _by_id(type_id)
    while t["kind"] in ("TYPEDEF", "CONST", "VOLATILE", "TYPE_TAG"):
        t = _by_id(t["type_id"])
    return t


def _named(kind: str, name: str) -> dict:
    for t in _types():
        if t.get("name") == name and t["kind"] == kind:
            return t
    raise AssertionError(f"kernel BTF has no {kind} {name}")


def _members(t: dict, base_bits: int = 0) -> dict[str, tuple[int, dict, int]]:
    """Named members of a struct/union as (bit offset, type, bit-field width),
    anonymous members flattened in."""
    out: dict[str, tuple[int, dict, int]] = {}
    for m in t["members"]:
        off = base_bits + m["bits_offset"]
        mt = _resolve(m["type_id"])
        if m["name"] == "(anon)" and mt["kind"] in ("STRUCT", "UNION"):
            for k, v in _members(mt, off).items():
                out.setdefault(k, v)
        else:
            out[m["name"]] = (off, mt, m.get("bitfield_size", 0))
    return out


def _compare(cls: type, kernel: dict, where: str, base: int = 0) -> int:
    """Check every ctypes field of ``cls`` against ``kernel``; returns fields checked.

    A field in ``_anonymous_`` stands for the kernel's anonymous struct/union
    at the same offset: its members are compared against the flattened members.
    """
    km = {k: (b - base * 8, t, w) for k, (b, t, w) in _members(kernel).items()}
    checked = 0
    for field in cls._fields_:
        name, ctype = field[0], field[1]
        if name in NEWER_THAN_KERNEL:
            assert getattr(cls, name).offset + ctypes.sizeof(ctype) <= kernel["size"], f"{where}.{name} overflows"
            continue
        if name in getattr(cls, "_anonymous_", ()):
            checked += _compare(ctype, kernel, f"{where}.{name}", base + getattr(cls, name).offset)
            continue
        kname = ALIASES.get(f"{name}@{cls.__name__}", ALIASES.get(name, name))
        assert kname in km, f"{where}: kernel has no member {kname!r}"
        bits, kt, width = km[kname]
        desc = getattr(cls, name)
        if len(field) == 3:  # a ctypes bit-field: its storage unit's offset, then the bit inside it
            ours_bit, ours_width = desc.offset * 8 + (desc.size & 0xFFFF), desc.size >> 16
            assert (ours_bit, ours_width) == (bits, width), f"{where}.{name}: ours at bit {ours_bit}:{ours_width}, kernel {bits}:{width}"
            checked += 1
            continue
        ours = desc.offset
        assert bits % 8 == 0 and bits // 8 == ours, f"{where}.{name}: ours at {ours}, kernel at bit {bits}"
        if isinstance(ctype, type) and issubclass(ctype, ctypes.Structure | ctypes.Union) and kt["kind"] in ("STRUCT", "UNION"):
            checked += _compare(ctype, kt, f"{where}.{name}")
        elif kt["kind"] in ("INT", "ENUM", "PTR", "ARRAY"):
            size = kt.get("size") or (8 if kt["kind"] == "PTR" else None)
            if kt["kind"] == "ARRAY":
                elem = _resolve(kt["type_id"])
                size = elem["size"] * kt["nr_elems"]
            if kt["kind"] == "INT" and kt.get("nr_bits", size * 8) != size * 8:
                size = None  # a bit-field: only the offset matters
            if size is not None and name not in ("flags",):
                assert ctypes.sizeof(ctype) == size, f"{where}.{name}: ours {ctypes.sizeof(ctype)} bytes, kernel {size}"
        checked += 1
    return checked


def _attr_member(index_or_name: int | str) -> dict:
    attr = _named("UNION", "bpf_attr")
    members = attr["members"]
    if isinstance(index_or_name, int):
        return _resolve(members[index_or_name]["type_id"])
    for m in members:
        if m["name"] == index_or_name:
            return _resolve(m["type_id"])
    raise AssertionError(f"bpf_attr has no member {index_or_name}")


ATTR_MEMBERS = [
    (s.MapCreateAttr, 0),
    (s.MapElemAttr, 1),
    (s.MapBatchAttr, "batch"),
    (s.ProgLoadAttr, 3),
    (s.ObjAttr, 4),
    (s.ProgAttachAttr, 5),
    (s.TestRunAttr, "test"),
    (s.GetIdAttr, 7),
    (s.InfoAttr, "info"),
    (s.QueryAttr, "query"),
    (s.RawTracepointAttr, "raw_tracepoint"),
    (s.BtfLoadAttr, 11),
    (s.TaskFdQueryAttr, "task_fd_query"),
    (s.LinkCreateAttr, "link_create"),
    (s.LinkUpdateAttr, "link_update"),
    (s.LinkDetachAttr, "link_detach"),
    (s.EnableStatsAttr, "enable_stats"),
    (s.IterCreateAttr, "iter_create"),
    (s.ProgBindMapAttr, "prog_bind_map"),
]


@pytest.mark.parametrize(("cls", "member"), ATTR_MEMBERS, ids=[c.__name__ for c, _ in ATTR_MEMBERS])
def test_bpf_attr_member_layout(cls: type, member: int | str) -> None:
    kernel = _attr_member(member)
    assert _compare(cls, kernel, cls.__name__) >= 1
    # the size we pass is the member's own (and so within the whole union), overlays included
    assert ctypes.sizeof(cls) == kernel["size"], f"{cls.__name__}: ours {ctypes.sizeof(cls)}, kernel {kernel['size']}"


NAMED = [
    (s.ProgInfo, "bpf_prog_info"),
    (s.MapInfo, "bpf_map_info"),
    (s.BtfInfo, "bpf_btf_info"),
    (s.LinkInfo, "bpf_link_info"),
    (s.PerfEventAttr, "perf_event_attr"),
    (s.FuncInfo, "bpf_func_info"),
    (s.LineInfo, "bpf_line_info"),
    (s.PerfEventQueryBpf, "perf_event_query_bpf"),
]


@pytest.mark.parametrize(("cls", "name"), NAMED, ids=[n for _, n in NAMED])
def test_named_struct_layout(cls: type, name: str) -> None:
    kernel = _named("STRUCT", name)
    assert _compare(cls, kernel, name) >= 2
    assert ctypes.sizeof(cls) == kernel["size"], f"{name}: ours {ctypes.sizeof(cls)}, kernel {kernel['size']}"


def test_link_info_union_members_checked() -> None:
    """bpf_link_info's perf_event/uprobe_multi members sit where the kernel has them."""
    kernel = _named("STRUCT", "bpf_link_info")
    union = next(_resolve(m["type_id"]) for m in kernel["members"] if m["name"] == "(anon)")
    members = {m["name"]: _resolve(m["type_id"]) for m in union["members"]}
    ours_union = dict(s.LinkInfo._fields_)["u"]
    for name in ("raw_tracepoint", "tracing", "kprobe_multi", "uprobe_multi", "perf_event"):
        ours = dict((f[0], f[1]) for f in ours_union._fields_)[name]
        assert _compare(ours, members[name], f"bpf_link_info.{name}") >= 1


def test_overlay_members_are_ones_this_kernel_lacks() -> None:
    """An overlay member this kernel has would hide the kernel's own layout
    (the generator then takes the kernel's): NEWER_THAN_KERNEL must be exactly
    the overlays the committed file carries."""
    link_create = _members(_attr_member("link_create"))
    for name in NEWER_THAN_KERNEL:
        assert name not in link_create, f"this kernel has {name}: regenerate types.py and drop it here"
        assert "Overlay" in type(getattr(s.LinkCreateAttr(), name)).__doc__
