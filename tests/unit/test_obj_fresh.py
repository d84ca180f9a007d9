"""The committed test objects (tests/bpf/*.bpf.o) equal a rebuild from source.

Rebuilds every object with ``tests/bpf/build.sh`` into a temporary directory
and compares bytes, so a source edited without rebuilding (or a build that is
not reproducible) fails here.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

BPF_DIR = Path(__file__).resolve().parent.parent / "bpf"
SOURCES = sorted(BPF_DIR.glob("*.bpf.c"))


def test_every_source_has_its_object_and_back() -> None:
    objs = {p.name for p in BPF_DIR.glob("*.bpf.o")}
    srcs = {p.name[:-2] + ".o" for p in SOURCES}
    assert SOURCES, "no test sources under tests/bpf"
    assert objs == srcs, f"objects without source: {objs - srcs}; sources without object: {srcs - objs}"


@pytest.fixture(scope="module")
def rebuilt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("clang", "llvm-strip"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (apt-get install clang llvm); cannot rebuild the test objects")
    out = tmp_path_factory.mktemp("bpf-rebuild")
    proc = subprocess.run(["bash", str(BPF_DIR / "build.sh"), str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, f"build.sh failed:\n{proc.stderr}"
    return out


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: p.name)
def test_committed_object_is_fresh(src: Path, rebuilt: Path) -> None:
    name = src.name[:-2] + ".o"
    committed = (BPF_DIR / name).read_bytes()
    fresh = (rebuilt / name).read_bytes()
    assert committed == fresh, f"tests/bpf/{name} differs from a rebuild of {src.name}: run tests/bpf/build.sh and commit"
