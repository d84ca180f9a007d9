"""Fuzzing: truncated, corrupted and random BTF / .BTF.ext raise ParseError and nothing else."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bpfmux.btf import Btf
from bpfmux.btf.elf import elf_sections
from bpfmux.btf.ext import BtfExt
from bpfmux.btf.layout import TypeKindError
from bpfmux.btf.rawdump import raw_lines
from bpfmux.errors import NotFoundError, ParseError

OBJ = Path(__file__).resolve().parents[1] / "bpf"
SECS = elf_sections((OBJ / "btf_core.bpf.o").read_bytes(), (".BTF", ".BTF.ext"))
KINDS = elf_sections((OBJ / "btf_kinds.bpf.o").read_bytes(), (".BTF",))[".BTF"]
BLOBS = [SECS[".BTF"], KINDS]
GOOD = Btf.parse(SECS[".BTF"])
FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def exercise(data: bytes) -> None:
    """Everything a reader of untrusted BTF does; only ParseError may escape."""
    btf = Btf.parse(data, source="fuzz")
    btf.validate()
    for _ in raw_lines(btf):
        pass
    for t in btf.own_types():
        try:
            btf.sizeof(t)
            btf.alignof(t)
            if t.kind.name in ("STRUCT", "UNION"):
                btf.fields(t, flatten=True)
        except TypeKindError:
            pass  # a valid answer for void/func/fwd-like types
        if t.name:
            try:
                btf.find(t.name)
            except NotFoundError:
                raise AssertionError(f"{t.name!r} is in the BTF but find() misses it") from None


def mutate(blob: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    b = bytearray(blob)
    for pos, val in edits:
        b[pos % len(b)] = val
    return bytes(b[:cut] if cut is not None else b)


@FUZZ
@given(st.sampled_from(BLOBS), st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8), st.none() | st.integers(0, 4000))
@example(BLOBS[0], [(24, 85)], None)  # a name offset moved onto a source line "struct task_struct___mine *t = …"
def test_corrupted_btf_raises_only_parse_error(blob: bytes, edits: list[tuple[int, int]], cut: int | None) -> None:
    try:
        exercise(mutate(blob, edits, cut))
    except ParseError:
        pass


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_raise_only_parse_error(data: bytes) -> None:
    for d in (data, b"\x9f\xeb\x01\x00\x18\x00\x00\x00" + data):
        try:
            exercise(d)
        except ParseError:
            pass


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), max_size=8), st.none() | st.integers(0, 2000))
def test_corrupted_btf_ext_raises_only_parse_error(edits: list[tuple[int, int]], cut: int | None) -> None:
    try:
        ext = BtfExt.parse(mutate(SECS[".BTF.ext"], edits, cut), GOOD, source="fuzz")
    except ParseError:
        return
    for recs in ext.core_relos.values():
        for r in recs:
            assert 0 <= r.type_id < len(GOOD)
    assert all(isinstance(li.line_num, int) for recs in ext.line_info.values() for li in recs)
