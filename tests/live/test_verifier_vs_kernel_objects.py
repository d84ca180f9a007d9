"""Every test-object program the running kernel's verifier accepts, bpfmux's verifier accepts too
(and what it rejects, ours rejects, with the kernel's errno); the same for bcc's
libbpf-tools when its objects are at hand (``shared/corpus/libbpf-tools/obj``).

Each program is loaded on its own through ``LiveKernel`` (the kernel's
verdict) and checked with ``bpfmux.emu.verifier.objects.verify_program`` (ours).
Programs the kernel cannot load for a reason other than its verifier (a
program kind it refuses, such as fentry here, or a kernel symbol it lacks)
give no verdict; they are listed, not compared. The VM tier runs this file in
its 6.12 guest too, where fentry/fexit/fmod_ret load.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from bpfmux.btf import Btf
from bpfmux.emu.verifier.objects import verify_program
from bpfmux.errors import ENOTSUPP, BpfError, BpfmuxError, NotFoundError, NotSupportedError, VerifierError
from bpfmux.obj import ObjectSpec, load_object

BPF = Path(__file__).resolve().parents[1] / "bpf"


def _corpus_dir() -> Path | None:
    """bcc's libbpf-tools objects (``shared/corpus/libbpf-tools/obj`` beside a parent of the checkout)."""
    for parent in Path(__file__).resolve().parents:
        d = parent / "shared" / "corpus" / "libbpf-tools" / "obj"
        if d.is_dir():
            return d
    return None


CORPUS = _corpus_dir()


def _objects(where: Path | None = BPF) -> list[str]:
    out: list[str] = []
    if where is None:
        return out
    for path in sorted(where.glob("*.bpf.o")):
        try:
            load_object(str(path))
        except BpfmuxError:
            continue
        out.append(path.name)
    return out


def _kernel_errno(detail: str) -> int:
    return int(detail.split(":", 1)[0])


def _sized(path: str) -> ObjectSpec:
    """The object with the sizes its tool's user space would give the maps it
    leaves unsized (``max_entries 0``, stack-trace value size 0), as ``bpfmux
    run`` gives them: the programs are the same, so the verdicts are too."""
    from bpfmux.cli.run_setup import DEFAULT_SIZE, DEFAULT_SIZES, STACK_VALUE_SIZE
    from bpfmux.uapi import MapType

    spec = load_object(path)
    for ms in spec.maps.values():
        if int(ms.type) == MapType.STACK_TRACE and ms.value_size == 0:
            ms.value_size = STACK_VALUE_SIZE
        if ms.max_entries == 0 and not ms.is_global_data and \
                int(ms.type) not in (MapType.PERF_EVENT_ARRAY, MapType.RINGBUF, MapType.USER_RINGBUF):
            ms.max_entries = DEFAULT_SIZES.get(MapType(int(ms.type)), DEFAULT_SIZE)
    return spec


def _kernel_verdict(path: str, prog: str, pin_root: str) -> tuple[str, str]:
    """("accept", "") / ("reject", "errno: log") / ("none", why)."""
    from bpfmux.live.kernel import LiveKernel

    try:
        coll = LiveKernel(pin_root=pin_root).load(_sized(path), programs=[prog])
    except VerifierError as err:
        if err.errno == errno.ENOENT:  # a kernel symbol this kernel lacks: not a verdict on the program
            return "none", err.log.strip().splitlines()[0]
        return "reject", f"{err.errno}: {err.log}"
    except (NotSupportedError, NotFoundError) as err:  # a kind or a kconfig value this kernel lacks
        return "none", str(err)
    except BpfError as err:
        if err.errno in (errno.EPERM, errno.EOPNOTSUPP, ENOTSUPP):
            return "none", str(err)
        if "creating map" in str(err):  # a map kind this kernel lacks, or one bigger than it allows
            return "none", str(err)
        raise
    coll.close()
    return "accept", ""


@pytest.mark.parametrize("obj_name", _objects())
def test_verdicts_agree(obj_name: str, pin_root: str) -> None:
    _compare(BPF / obj_name, pin_root)


@pytest.mark.skipif(CORPUS is None, reason="no libbpf-tools corpus (shared/corpus/libbpf-tools/obj) here")
@pytest.mark.parametrize("obj_name", _objects(CORPUS))
def test_libbpf_tools_verdicts_agree(obj_name: str, pin_root: str) -> None:
    """bcc's libbpf-tools, real programs: the same verdicts (sigsnoop leaves R0
    unset at a static subprogram's exit, softirqs indexes an array through a
    32-bit copy, tcppktlat passes a socket to bpf_get_socket_cookie …)."""
    assert CORPUS is not None
    _compare(CORPUS / obj_name, pin_root)


def _compare(obj: Path, pin_root: str) -> None:
    path, obj_name = str(obj), obj.name
    spec = load_object(path)
    compared, no_verdict = [], {}
    for prog in spec.programs:
        verdict, detail = _kernel_verdict(path, prog, pin_root)
        if verdict == "none":
            no_verdict[prog] = detail
            continue
        if verdict == "accept":
            result = verify_program(_sized(path), prog, Btf.vmlinux())
            assert result.insns_processed >= 1, prog
        else:
            with pytest.raises(VerifierError) as info:
                verify_program(_sized(path), prog, Btf.vmlinux())
            assert info.value.errno == _kernel_errno(detail), f"{prog}: kernel said {detail.strip()[-300:]}"
        compared.append(prog)
    if not compared:
        pytest.skip(f"this kernel loads none of {obj_name}'s programs ({'; '.join(sorted(set(no_verdict.values())))[:300]}); "
                    "they are compared where a kernel loads them (the VM tier's 6.12 guest loads fentry, fexit and fmod_ret)")
    print(f"{obj_name}: compared {compared}; no verdict here: {sorted(no_verdict)}")
