"""The package layering the kernel contract promises, read from the imports
themselves: the emulated kernel never imports the live one, nothing outside
``bpfmux.live`` imports a private name of it, and the shared layers (the
contract, the loader, the attach dispatch, host facts, the spec side) import
neither backend."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "bpfmux"


def _imports(path: Path) -> list[tuple[str, list[str], int]]:
    """``(absolute module, imported names, line)`` of every import in ``path``."""
    package = list(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.append((mod, [a.name for a in node.names], node.lineno))
        elif isinstance(node, ast.Import):
            for a in node.names:
                out.append((a.name, [], node.lineno))
    return out


def _modules(under: str) -> list[Path]:
    return sorted((SRC / under).rglob("*.py")) if (SRC / under).is_dir() else [SRC / f"{under}.py"]


def _targets(mod: str, names: list[str]) -> list[str]:
    """The modules an import reaches: ``from bpfmux.live import links`` reaches ``bpfmux.live.links`` too."""
    return [mod] + [f"{mod}.{n}" for n in names]


def test_the_import_reader_sees_relative_and_absolute_imports() -> None:
    found = {t for m, names, _ in _imports(SRC / "emu" / "kernel" / "emulator.py") for t in _targets(m, names)}
    assert "bpfmux.api" in found and "bpfmux.emu.kernel.linker" in found  # a check that cannot pass on nothing


@pytest.mark.parametrize("package", ["emu"])
def test_the_emulated_kernel_never_imports_the_live_one(package: str) -> None:
    bad = [f"{p.relative_to(SRC)}:{line} imports {t}"
           for p in _modules(package) for mod, names, line in _imports(p)
           for t in _targets(mod, names) if t == "bpfmux.live" or t.startswith("bpfmux.live.")]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("package", ["api", "attach", "loader", "host", "obj", "btf", "isa", "abi", "uapi", "errors",
                                     "codecs", "show"])
def test_shared_layers_import_neither_backend(package: str) -> None:
    bad = [f"{p.relative_to(SRC)}:{line} imports {t}"
           for p in _modules(package) for mod, names, line in _imports(p)
           for t in _targets(mod, names) if t.startswith(("bpfmux.live", "bpfmux.emu", "bpfmux.trace", "bpfmux.cli"))]
    assert not bad, "\n".join(bad)


def test_no_private_live_name_is_imported_from_outside_live() -> None:
    bad = []
    for p in sorted(SRC.rglob("*.py")):
        if p.is_relative_to(SRC / "live"):
            continue
        for mod, names, line in _imports(p):
            if not (mod == "bpfmux.live" or mod.startswith("bpfmux.live.")):
                continue
            private = [part for part in mod.split(".") if part.startswith("_")]
            private += [n for n in names if n.startswith("_")]
            if private:
                bad.append(f"{p.relative_to(SRC)}:{line} imports {mod} {names}")
    assert not bad, "\n".join(bad)
