"""Fuzzing load_object: truncated or corrupted objects raise only ParseError."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpfmux.errors import ParseError
from bpfmux.obj import load_object

BPF = Path(__file__).resolve().parent.parent / "bpf"
SEEDS = {p.name: p.read_bytes() for p in sorted(BPF.glob("*.bpf.o"))}
NAMES = sorted(SEEDS)
FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _load(data: bytes) -> None:
    try:
        spec = load_object(data, name="fuzz")
    except ParseError as err:
        assert str(err)
        return
    # whatever parses must also finalize without crashing on dummy fds
    for p in spec.programs.values():
        try:
            p.instructions(lambda _name: 3)
        except ParseError:
            pass
        except Exception as err:  # externs/CO-RE need a target BTF: those are documented errors
            from bpfmux.errors import BpfmuxError

            assert isinstance(err, BpfmuxError), repr(err)


@FUZZ
@given(st.sampled_from(NAMES), st.data())
def test_truncated(name: str, data: st.DataObject) -> None:
    blob = SEEDS[name]
    cut = data.draw(st.integers(0, len(blob) - 1))
    _load(blob[:cut])


@FUZZ
@given(st.sampled_from(NAMES), st.data())
def test_corrupted_bytes(name: str, data: st.DataObject) -> None:
    blob = bytearray(SEEDS[name])
    n = data.draw(st.integers(1, 16))
    for _ in range(n):
        pos = data.draw(st.integers(0, len(blob) - 1))
        blob[pos] = data.draw(st.integers(0, 255))
    _load(bytes(blob))


@FUZZ
@given(st.sampled_from(NAMES), st.data())
def test_corrupted_words_in_headers_and_tables(name: str, data: st.DataObject) -> None:
    """Targets ELF header, section headers and small tables, where a bad word does the most."""
    blob = bytearray(SEEDS[name])
    shoff = int.from_bytes(blob[0x28:0x30], "little")
    regions = [(0, 64), (shoff, len(blob))]
    lo, hi = data.draw(st.sampled_from(regions))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(lo, max(lo, min(hi, len(blob)) - 4)))
        word = data.draw(st.sampled_from([0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x10000, data.draw(st.integers(0, 2**32 - 1))]))
        blob[pos:pos + 4] = word.to_bytes(4, "little")
    _load(bytes(blob))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes(blob: bytes) -> None:
    _load(blob)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256))
def test_elf_magic_then_garbage(blob: bytes) -> None:
    _load(b"\x7fELF\x02\x01\x01" + blob)
