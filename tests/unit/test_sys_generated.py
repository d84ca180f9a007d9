"""``bpfmux.live.sys.types`` is generated from the kernel's BTF by
``python3 -m bpfmux.live.sys.generate``: the committed file must be exactly
what this kernel's BTF generates, every field must sit where the BTF says,
and the generated classes keep the names and C-like access callers use.

Reading ``/sys/kernel/btf/vmlinux`` needs no privileges, so these run
unprivileged; without the file (a kernel without ``CONFIG_DEBUG_INFO_BTF``)
there is nothing to generate from and the BTF tests skip.
"""

from __future__ import annotations

import ctypes
import difflib
import os
import platform

import pytest

from bpfmux.btf import Btf
from bpfmux.btf.builder import BtfBuilder
from bpfmux.live import sys as s
from bpfmux.live.sys import generate

needs_btf = pytest.mark.skipif(
    not os.path.exists(generate.VMLINUX),
    reason=f"{generate.VMLINUX} is absent (kernel without CONFIG_DEBUG_INFO_BTF): no BTF to generate types.py from",
)


@needs_btf
def test_committed_types_py_is_what_this_kernel_generates() -> None:
    with open(generate.TYPES_PATH, encoding="utf-8") as f:
        committed = f.read()
    assert committed.splitlines()[0] == generate.HEADER
    text = generate.render(Btf.vmlinux())
    if text != committed:
        diff = "".join(list(difflib.unified_diff(committed.splitlines(True), text.splitlines(True), "types.py",
                                                 "generated"))[:80])  # fmt: skip
        pytest.fail(f"types.py differs from what kernel {platform.release()}'s BTF generates; "
                    f"run python3 -m bpfmux.live.sys.generate:\n{diff}")  # fmt: skip


@needs_btf
def test_generation_is_deterministic() -> None:
    fresh = Btf.load(generate.VMLINUX)  # parsed anew, not the cached vmlinux()
    assert generate.render(fresh) == generate.render(Btf.vmlinux())


@needs_btf
def test_every_generated_field_sits_where_the_btf_puts_it() -> None:
    assert generate.verify(s.types, Btf.vmlinux()) > 400


@needs_btf
def test_check_mode_tells_a_stale_file(tmp_path, capsys) -> None:
    out = tmp_path / "types.py"
    out.write_text("# stale\n")
    assert generate.main(["--check", "--output", str(out)]) == 1
    assert "python3 -m bpfmux.live.sys.generate" in capsys.readouterr().err
    assert generate.main(["--output", str(out)]) == 0
    assert generate.main(["--check", "--output", str(out)]) == 0
    with open(generate.TYPES_PATH, encoding="utf-8") as f:
        assert out.read_text() == f.read()


@needs_btf
def test_an_overlay_the_kernel_already_has_gives_way(monkeypatch) -> None:
    normal = generate.render(Btf.vmlinux())
    clash = generate.Overlay("_LinkCreateAttr_u", "kprobe_multi", (("bogus", "u64"),), "the kernel's own wins")
    monkeypatch.setattr(generate, "OVERLAYS", (*generate.OVERLAYS, clash))
    assert generate.render(Btf.vmlinux()) == normal


@needs_btf
def test_an_overlay_that_would_grow_the_union_is_refused(monkeypatch) -> None:
    big = generate.Overlay("_LinkCreateAttr_u", "too_big", tuple((f"f{i}", "u64") for i in range(16)), "128 bytes")
    monkeypatch.setattr(generate, "OVERLAYS", (big,))
    with pytest.raises(generate.GenerateError, match="does not fit"):
        generate.render(Btf.vmlinux())


@needs_btf
def test_a_table_entry_the_kernel_lacks_is_an_error(monkeypatch) -> None:
    missing = generate.ClassSpec("NoSuchAttr", "union bpf_attr", "{no_such_field}", "nothing")
    monkeypatch.setattr(generate, "CLASSES", (missing,))
    with pytest.raises(generate.GenerateError, match="no_such_field"):
        generate.render(Btf.vmlinux())


# --- the generator on small hand-built BTF (no kernel needed) ------------------


def _namespace(text: str) -> dict:
    ns: dict = {}
    exec(compile(text, "<generated>", "exec"), ns)
    return ns


def test_gaps_in_the_kernel_layout_become_padding(monkeypatch) -> None:
    b = BtfBuilder()
    u32, u64 = b.int("unsigned int", 4), b.int("long long unsigned int", 8)
    b.struct("gappy", [("a", u32, 0), ("b", u32, 64), ("c", u64, 128)], size=32)  # b at 8, 8 bytes of tail
    monkeypatch.setattr(generate, "CLASSES", (generate.ClassSpec("Gappy", "struct gappy", doc="x"),))
    ns = _namespace(generate.render(b.btf))
    g = ns["Gappy"]
    assert (g.a.offset, g.b.offset, g.c.offset, ctypes.sizeof(g)) == (0, 8, 16, 32)
    assert "a=0, b=0, c=0)" in repr(g())  # padding is not shown


def test_a_packed_layout_is_refused(monkeypatch) -> None:
    b = BtfBuilder()
    u8, u32 = b.int("unsigned char", 1), b.int("unsigned int", 4)
    b.struct("packed", [("a", u8, 0), ("b", u32, 8)], size=5)
    monkeypatch.setattr(generate, "CLASSES", (generate.ClassSpec("Packed", "struct packed", doc="x"),))
    with pytest.raises(generate.GenerateError, match="Packed.b"):
        generate.render(b.btf)


def _fake_attr(with_tracing_multi: bool) -> Btf:
    """A ``union bpf_attr`` with just a ``link_create`` shaped like the kernel's."""
    b = BtfBuilder()
    u32, u64 = b.int("unsigned int", 4), b.int("long long unsigned int", 8)
    kprobe_multi = b.struct("", [("flags", u32), ("cnt", u32), ("syms", u64), ("addrs", u64), ("cookies", u64)])
    members = [("target_btf_id", u32), ("kprobe_multi", kprobe_multi)]
    if with_tracing_multi:
        members.append(("tracing_multi", b.struct("", [("ids", u64), ("cookies", u64), ("cnt", u32)])))
    union = b.union("", members)
    link_create = b.struct("", [("prog_fd", u32), ("target_fd", u32), ("attach_type", u32), ("flags", u32),
                                ("", union)])  # fmt: skip
    b.union("bpf_attr", [("link_create", link_create)])
    return b.btf


def test_the_tracing_multi_overlay_is_added_where_the_kernel_lacks_it(monkeypatch) -> None:
    spec = generate.ClassSpec("LinkCreateAttr", "union bpf_attr", "link_create", "x")
    monkeypatch.setattr(generate, "CLASSES", (spec,))
    old = _namespace(generate.render(_fake_attr(False)))
    a = old["LinkCreateAttr"](prog_fd=3)
    a.tracing_multi.cnt = 2
    assert a.u.tracing_multi.cnt == 2 and "Overlay" in type(a.tracing_multi).__doc__
    assert old["LinkCreateAttr"].u.offset == 16 and ctypes.sizeof(old["LinkCreateAttr"]) == 48
    new = generate.render(_fake_attr(True))  # a kernel that has it: its own member, no overlay
    assert "Overlay" not in new and "tracing_multi" in new


# --- what callers rely on (no BTF needed: this is the committed file) ---------


def test_anonymous_members_are_reached_as_in_c() -> None:
    a = s.ProgLoadAttr(attach_prog_fd=5)
    assert a.attach_btf_obj_fd == 5
    e = s.MapElemAttr(map_fd=3, value=7)
    assert e.next_key == 7
    lc = s.LinkCreateAttr(prog_fd=4, target_fd=6, attach_type=1)
    lc.perf_event.bpf_cookie = 9
    assert lc.u.perf_event.bpf_cookie == 9 and lc.map_fd == 4 and lc.target_ifindex == 6
    lc.u.iter.iter_info = 11
    assert lc.iter_info == 11 and lc.u.target_btf_id == 11  # the union's members overlap
    info = s.LinkInfo()
    info.perf_event.u.kprobe.missed = 2
    assert info.u.perf_event.kprobe.missed == 2


def test_perf_event_attr_keeps_one_flags_word() -> None:
    attr = s.PerfEventAttr(type=1, config=2, sample_period=3, flags=int(s.PerfFlag.DISABLED | s.PerfFlag.FREQ),
                           wakeup_events=4, config1=5, config2=6)  # fmt: skip
    assert (attr.sample_freq, attr.wakeup_watermark, attr.kprobe_func, attr.probe_offset) == (3, 4, 5, 6)
    assert ctypes.sizeof(s.PerfEventAttr) == 136 and s.PerfEventAttr.flags.offset == 40
    assert s.ProgInfo.gpl_compatible.size == 4  # the word, not a one-bit field


def test_repr_shows_fields_with_anonymous_members_in_place() -> None:
    text = repr(s.MapElemAttr(map_fd=3, key=1, value=7))
    assert text.startswith("MapElemAttr(map_fd=3, key=1, value=7, next_key=7, flags=0")
    assert "_anon" not in text


def test_test_named_classes_are_not_collected_by_pytest() -> None:
    assert s.TestRunAttr.__test__ is False
