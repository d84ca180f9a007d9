"""Every test-object program this kernel's verifier accepts, bpfmux's verifier accepts too.

Each program is loaded on its own through ``LiveKernel`` (the kernel's
verdict) and checked with ``bpfmux.emu.verifier_obj.verify_program`` (ours).
Programs the kernel cannot load for another reason than its verifier (a
program type or attach kind this kernel refuses, such as fentry, which fails
``EPERM`` here) say so and are not counted as verdicts.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from bpfmux.btf import Btf
from bpfmux.emu.verifier_obj import verify_program
from bpfmux.errors import BpfError, BpfmuxError, NotSupportedError, VerifierError
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


@pytest.mark.parametrize(("obj_name", "prog"), PROGRAMS, ids=[f"{o}:{p}" for o, p in PROGRAMS])
def test_kernel_accepts_implies_we_accept(obj_name: str, prog: str, root_required: None) -> None:
    from bpfmux.live.kernel import LiveKernel

    path = str(BPF / obj_name)
    try:
        coll = LiveKernel().load(path, programs=[prog])
    except VerifierError as err:
        if err.errno == errno.ENOENT:
            pytest.skip(f"not a verdict on the program: a kernel symbol it needs is not in this kernel ({err.log.strip().splitlines()[0]})")
        # the kernel's verifier said no: ours must say no too
        with pytest.raises(VerifierError):
            verify_program(load_object(path), prog, Btf.vmlinux())
        assert err.log
        return
    except NotSupportedError as err:
        pytest.skip(f"not a verifier verdict: this kernel cannot load it ({err})")
    except BpfError as err:
        if err.errno in (errno.EPERM, errno.EOPNOTSUPP, 524):  # 524: the kernel's ENOTSUPP
            pytest.skip(f"not a verifier verdict: the kernel refuses this program kind here ({err})")
        raise
    coll.close()
    result = verify_program(load_object(path), prog, Btf.vmlinux())
    assert result.insns_processed >= 1
