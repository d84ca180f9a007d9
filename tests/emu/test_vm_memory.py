"""The emulated address space: regions, slots, faults, handles."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bpfmux.emu.vm.memory import FIRST_SLOT, AddressSpace
from bpfmux.errors import BpfmuxError, EmulatorFault


def test_regions_get_their_own_slot():
    sp = AddressSpace()
    a = sp.map(16, "a")
    b = sp.map(bytearray(b"xyz"), "b", writable=False)
    assert a.base == FIRST_SLOT << 32 and b.base == (FIRST_SLOT + 1) << 32
    assert sp.region_at(a.base + 15) is a and sp.region_at(a.base + 16) is None
    assert sp.read(b.base + 1, 2) == b"yz"
    sp.write(a.base + 4, b"hi")
    assert a.buf[4:6] == b"hi"


def test_faults_name_the_reason():
    sp = AddressSpace()
    a = sp.map(8, "ctx")
    ro = sp.map(bytearray(4), "ro", writable=False)
    with pytest.raises(EmulatorFault, match=r"insn 3: invalid 4-byte read at .*ctx\+6.*out of bounds") as ei:
        sp.check(a.base + 6, 4, pc=3)
    assert ei.value.pc == 3 and ei.value.address == a.base + 6
    with pytest.raises(EmulatorFault, match="read-only"):
        sp.write(ro.base, b"x")
    with pytest.raises(EmulatorFault, match="no memory there"):
        sp.read(0, 1)
    with pytest.raises(EmulatorFault, match="bytes below ctx"):
        sp.read(a.base - 8, 1)


def test_an_address_just_below_a_region_is_named_after_it_not_after_the_slot_it_is_in():
    sp = AddressSpace()
    low = sp.map(16, "map value")
    stack = sp.map(512, "stack")
    assert stack.base == low.base + (1 << 32)  # adjacent slots: stack.base - 8 lies in low's slot
    with pytest.raises(EmulatorFault, match=r"8 bytes below stack, size 512\): out of bounds"):
        sp.read(stack.base - 8, 8)
    with pytest.raises(EmulatorFault, match=r"map value\+20, size 16\): out of bounds"):
        sp.read(low.base + 20, 8)  # just past the end of the slot's own region: named after it


def test_unmap_and_slot_reuse():
    sp = AddressSpace()
    a = sp.map(8, "a")
    base = a.base
    sp.unmap(a)
    sp.unmap(a)  # idempotent
    with pytest.raises(EmulatorFault):
        sp.read(base, 1)
    assert sp.map(4, "b").base == base


def test_handles_are_not_memory():
    sp = AddressSpace()
    obj = object()
    h = sp.add_handle(obj)
    assert sp.handle(h) is obj
    with pytest.raises(EmulatorFault, match="not memory"):
        sp.read(h, 1)
    sp.remove_handle(h)
    assert sp.handle(h) is None


def test_set_writable():
    sp = AddressSpace()
    a = sp.map(4, "a")
    sp.set_writable(a, False)
    with pytest.raises(EmulatorFault, match="read-only"):
        sp.write(a.base, b"x")
    sp.set_writable(a, True)
    sp.write(a.base, b"x")


def test_bad_maps():
    sp = AddressSpace()
    with pytest.raises(BpfmuxError):
        sp.map(-1)
    with pytest.raises(BpfmuxError):
        sp.map(memoryview(b"ro"), writable=True)
    with pytest.raises(BpfmuxError):
        sp.map(b"bytes")  # type: ignore[arg-type]


def test_strings():
    sp = AddressSpace()
    a = sp.map(bytearray(b"abc\0def"), "s")
    assert sp.try_read_str(a.base, 10) == b"abc\0"
    assert sp.try_read_str(a.base, 2) == b"a\0"
    assert sp.try_read_str(a.base + 4, 10) is None  # runs off the region without a NUL
    assert sp.try_read_str(0, 4) is None
    assert sp.try_read(a.base + 5, 4) is None


@settings(max_examples=400, deadline=None)
@given(addr=st.integers(-(2**65), 2**65), size=st.integers(0, 64), write=st.booleans())
def test_any_access_either_works_or_faults(addr, size, write):
    sp = AddressSpace()
    r = sp.map(32, "r")
    try:
        buf, off = sp.check(addr, size, write)
    except EmulatorFault as e:
        assert e.address == addr
    else:
        assert buf is r.buf and off + size <= 32 and addr == r.base + off
    assert size == 0 or sp.try_read(addr, size) is None or 0 <= addr - r.base <= 32 - size
