"""The live loader's libbpf semantics: BTF key/value ids dropped for the map
types that take none, partial loads that report each failed program, and
what a zero-sized map says."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from bpfmux.errors import BpfError, VerifierError
from bpfmux.live import LiveKernel
from bpfmux.obj import MapSpec, load_object
from bpfmux.uapi import MapType

pytestmark = pytest.mark.usefixtures("root_required")

BPF = Path(__file__).resolve().parents[1] / "bpf"


def _with_map(ms: MapSpec):
    spec = load_object(BPF / "getpid.bpf.o")
    spec.maps[ms.name] = ms
    return spec


def test_cgroup_array_with_btf_ids_is_created_without_them() -> None:
    """The kernel refuses BTF ids for a cgroup array with ENOTSUPP; libbpf (and bpfmux) never give them."""
    spec = _with_map(MapSpec("cgroup_map", MapType.CGROUP_ARRAY, 4, 4, 1, btf_key_type_id=1, btf_value_type_id=1))
    with LiveKernel() as k, k.load(spec) as coll:
        assert coll.maps["cgroup_map"].type == MapType.CGROUP_ARRAY
        assert not [w for w in coll.warnings if "cgroup_map" in w]  # dropped up front, not after a refusal


def test_refused_btf_ids_retried_without_them_on_any_errno() -> None:
    """A hash map whose BTF ids point at a type of the wrong size: the kernel refuses, the map is made without."""
    spec = _with_map(MapSpec("oddmap", MapType.HASH, 4, 16, 8, btf_key_type_id=1, btf_value_type_id=1))
    with LiveKernel() as k, k.load(spec) as coll:
        assert coll.maps["oddmap"].value_size == 16
        assert any("oddmap" in w and "without them" in w for w in coll.warnings), coll.warnings


def test_zero_sized_map_says_to_size_it() -> None:
    spec = _with_map(MapSpec("stackmap", MapType.STACK_TRACE, 4, 8 * 127, 0))
    with LiveKernel() as k, pytest.raises(BpfError) as ei:
        k.load(spec)
    assert ei.value.errno == errno.EINVAL and "--map-size stackmap=N" in str(ei.value)
    spec.resize_map("stackmap", 64)
    with LiveKernel() as k, k.load(spec) as coll:
        assert coll.maps["stackmap"].max_entries == 64


def test_partial_load_reports_the_rejected_program_and_loads_the_rest() -> None:
    spec = load_object(BPF / "rejected.bpf.o")
    names = list(spec.programs)
    with LiveKernel() as k:
        with pytest.raises(VerifierError):
            k.load(spec, programs=names)
        with k.load(spec, programs=names, partial=True) as coll:
            assert set(coll.failed) and set(coll.programs) and set(coll.failed) | set(coll.programs) == set(names)
            err = next(iter(coll.failed.values()))
            assert isinstance(err, VerifierError) and err.log
