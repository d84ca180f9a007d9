"""The ctypes layouts of ``live.sys`` match the running kernel's own BTF.

Every field bpfmux declares must sit at the offset the kernel's
``union bpf_attr`` (and ``bpf_prog_info``, ``perf_event_attr``, …) puts it,
as read from ``/sys/kernel/btf/vmlinux`` through ``bpftool -j btf dump``.
Fields the kernel does not have yet (the 2026 ``tracing_multi``) are listed
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
#: ctypes names that stand for a kernel bit-field word or a renamed padding field.
ALIASES = {"flags@PerfEventAttr": "disabled", "_reserved_2": "__reserved_2"}


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


def _members(t: dict, base_bits: int = 0) -> dict[str, tuple[int, dict]]:
    """Named members of a struct/union, anonymous members flattened in."""
    out: dict[str, tuple[int, dict]] = {}
    for m in t["members"]:
        off = base_bits + m["bits_offset"]
        mt = _resolve(m["type_id"])
        if m["name"] == "(anon)" and mt["kind"] in ("STRUCT", "UNION"):
            for k, v in _members(mt, off).items():
                out.setdefault(k, v)
        else:
            out[m["name"]] = (off, mt)
    return out


def _compare(cls: type, kernel: dict, where: str, base: int = 0) -> int:
    """Check every ctypes field of ``cls`` against ``kernel``; returns fields checked.

    A field in ``_anonymous_`` stands for the kernel's anonymous struct/union
    at the same offset: its members are compared against the flattened members.
    """
    km = {k: (b - base * 8, t) for k, (b, t) in _members(kernel).items()}
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
        bits, kt = km[kname]
        ours = getattr(cls, name).offset
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
    # the size we pass must not exceed the whole union (else the kernel checks a tail we never wrote)
    assert ctypes.sizeof(cls) <= _named("UNION", "bpf_attr")["size"]
    if cls is not s.LinkCreateAttr:
        assert ctypes.sizeof(cls) == kernel["size"], f"{cls.__name__}: ours {ctypes.sizeof(cls)}, kernel {kernel['size']}"


NAMED = [
    (s.ProgInfo, "bpf_prog_info"),
    (s.MapInfo, "bpf_map_info"),
    (s.BtfInfo, "bpf_btf_info"),
    (s.LinkInfo, "bpf_link_info"),
    (s.PerfEventAttr, "perf_event_attr"),
    (s.FuncInfo, "bpf_func_info"),
    (s.LineInfo, "bpf_line_info"),
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
    for name in ("raw_tracepoint", "tracing", "kprobe_multi", "uprobe_multi", "perf_event"):
        ours = dict((f[0], f[1]) for f in s.types._LiUnion._fields_)[name]
        assert _compare(ours, members[name], f"bpf_link_info.{name}") >= 1
