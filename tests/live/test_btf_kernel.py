"""BTF against the running kernel: written blobs load with BPF_BTF_LOAD (also sanitized ones, and the
kernel's own probe), and CO-RE results equal the values libbpf patches (read from ``bpftool -d``)."""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from bpfmux.btf import Btf
from bpfmux.btf.core import resolve
from bpfmux.btf.elf import elf_sections
from bpfmux.btf.ext import BtfExt
from bpfmux.btf.sanitize import KernelFeatures, fixup_datasecs, sanitize
from bpfmux.btf.writer import write
from bpfmux.live import sys as lsys

pytestmark = pytest.mark.usefixtures("root_required")
BPF = Path(__file__).resolve().parents[1] / "bpf"


def object_btf(name: str) -> Btf:
    """An object's BTF with DATASEC sizes/offsets fixed from its ELF, as a loader does."""
    from elftools.elf.elffile import ELFFile

    path = BPF / name
    with open(path, "rb") as f:
        elf = ELFFile(f)
        sizes = {s.name: s["sh_size"] for s in elf.iter_sections()}
        symtab = elf.get_section_by_name(".symtab")
        offs = {}
        for sym in symtab.iter_symbols():
            if sym["st_shndx"] not in ("SHN_UNDEF", "SHN_ABS", "SHN_COMMON") and isinstance(sym["st_shndx"], int):
                offs[(elf.get_section(sym["st_shndx"]).name, sym.name)] = sym["st_value"]
    btf = Btf.load(path)
    fixup_datasecs(btf, sizes.get, lambda sec, var: offs.get((sec, var)))
    return btf


def test_written_object_btf_loads() -> None:
    btf = object_btf("btf_kinds.bpf.o")
    # extern variables are resolved by the loader; the kernel takes no extern VAR
    for t in btf.own_types():
        if t.kind.name == "VAR" and int(t.linkage) == 2:  # type: ignore[attr-defined]
            t.linkage = 1  # type: ignore[attr-defined]
    with lsys.btf_load(write(btf)) as fd:
        info = lsys.btf_info(fd)
        assert info.btf_size == len(write(btf))


# BTF features in the order kernels gained them; an older kernel lacks a suffix of this list.
_HISTORY = ["func_global", "datasec", "float", "decl_tag", "type_tag", "enum64"]


@pytest.mark.parametrize("oldest_missing", range(len(_HISTORY)), ids=lambda i: f"no-{_HISTORY[i]}-and-later")
def test_sanitized_btf_loads(oldest_missing: int) -> None:
    """As for an older kernel: every feature from ``oldest_missing`` on is absent (this kernel still loads the result).

    Kernels without BTF funcs at all (before 5.0) are not covered: a current kernel rejects the
    nameless enum values libbpf's FUNC_PROTO replacement makes, so that case is checked without loading.
    """
    btf = object_btf("btf_kinds.bpf.o")
    for t in btf.own_types():
        if t.kind.name == "VAR" and int(t.linkage) == 2:  # type: ignore[attr-defined]
            t.linkage = 1  # type: ignore[attr-defined]
    feats = KernelFeatures(**{name: False for name in _HISTORY[oldest_missing:]})
    clean = sanitize(btf, feats)
    kinds = {t.kind.name for t in clean.own_types()}
    if not feats.datasec:
        assert not kinds & {"VAR", "DATASEC"}
    if not feats.func:
        assert not kinds & {"FUNC", "FUNC_PROTO"}
    if not feats.float:
        assert "FLOAT" not in kinds
    if not feats.decl_tag:
        assert "DECL_TAG" not in kinds
    if not feats.type_tag:
        assert "TYPE_TAG" not in kinds
    with lsys.btf_load(write(clean)):
        pass


def test_sanitize_without_funcs_replaces_them() -> None:
    clean = sanitize(object_btf("btf_kinds.bpf.o"), KernelFeatures.none())
    kinds = {t.kind.name for t in clean.own_types()}
    assert not kinds & {"FUNC", "FUNC_PROTO", "VAR", "DATASEC", "FLOAT", "DECL_TAG", "TYPE_TAG", "ENUM64"}
    assert clean.find("use_kinds").kind.name == "TYPEDEF"
    assert clean.find("_bss").kind.name == "STRUCT"


def test_feature_probe_on_this_kernel() -> None:
    assert KernelFeatures.probe(lsys.btf_load) == KernelFeatures()


def test_kernel_rejects_what_the_probe_says_it_rejects() -> None:
    """A DATASEC of size 0 (an unfixed object) is rejected: the loader must run fixup_datasecs."""
    btf = Btf.load(BPF / "btf_kinds.bpf.o")
    with pytest.raises(OSError):
        lsys.btf_load(write(btf))


_PATCH = re.compile(r"prog '(\w+)': relo #(\d+): patched insn #(\d+) \((?:ALU/ALU64|LDX/ST/STX|LDIMM64)\) (?:imm|off|imm64) (\d+) -> (\d+)")
_POISON = re.compile(r"prog '(\w+)': relo #(\d+): substituting insn #(\d+) w/ invalid insn")


@pytest.mark.skipif(shutil.which("bpftool") is None, reason="bpftool not installed (.ci/install installs it)")
@pytest.mark.parametrize("obj", ["core.bpf.o", "btf_core.bpf.o"])
def test_core_results_equal_libbpfs(obj: str) -> None:
    pin = Path("/sys/fs/bpf") / f"bpfmux_btf_{uuid.uuid4().hex[:8]}"
    try:
        log = subprocess.run(["bpftool", "-d", "prog", "loadall", str(BPF / obj), str(pin)], capture_output=True, text=True).stderr
    finally:
        shutil.rmtree(pin, ignore_errors=True)
    patched = {int(m[3]): (int(m[4]), int(m[5])) for m in _PATCH.finditer(log)}
    poisoned = {int(m[3]) for m in _POISON.finditer(log)}
    assert patched, log[-2000:]
    data = (BPF / obj).read_bytes()
    secs = elf_sections(data, (".BTF", ".BTF.ext"))
    local = Btf.parse(secs[".BTF"])
    ext = BtfExt.parse(secs[".BTF.ext"], local)
    vmlinux = Btf.vmlinux()
    seen = 0
    for relos in ext.core_relos.values():
        for r in relos:
            res = resolve(r, local, vmlinux)
            if r.insn_idx in poisoned:
                assert res.poison, (r, res)
            else:
                assert not res.poison, (r, res.reason)
                insn_value, patched_value = patched[r.insn_idx]
                assert res.new_val == patched_value, (r, res)
                if res.validate:  # libbpf logs the instruction's value, which equals orig_val when it validates
                    assert res.orig_val == insn_value, (r, res)
            seen += 1
    assert seen == len(patched) + len(poisoned)
