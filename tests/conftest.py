"""Shared test set-up: mounts what BPF tests need and offers kernel fixtures."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BPF_DIR = ROOT / "tests" / "bpf"
CONFORMANCE_DIR = ROOT / "tests" / "data" / "conformance"  # copy of ../shared/conformance (MIT/Apache-2.0, see its LICENSE)


def _mount(fstype: str, target: str) -> None:
    if os.path.ismount(target) or os.geteuid() != 0:
        return
    subprocess.run(["mount", "-t", fstype, "nodev" if fstype != "bpf" else "bpf", target], check=False, capture_output=True)


def pytest_sessionstart(session: pytest.Session) -> None:
    """Mount tracefs, debugfs and bpffs when running as root (a fresh machine has none)."""
    _mount("tracefs", "/sys/kernel/tracing")
    _mount("debugfs", "/sys/kernel/debug")
    _mount("bpf", "/sys/fs/bpf")


@pytest.fixture(scope="session")
def root_required() -> None:
    """Skip when not root: live-kernel tests need CAP_BPF/CAP_PERFMON."""
    if os.geteuid() != 0:
        pytest.skip("needs root for bpf(2) and perf_event_open(2); run the suite as root")


@pytest.fixture
def pin_root(root_required: None):
    """A private directory in bpffs for maps pinned by name, removed afterwards
    (pins outlive the process: a test must not leave one for the next run)."""
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="bpfmux-test-", dir="/sys/fs/bpf")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def corpus_dir() -> Path | None:
    """The shared corpus (``../shared/corpus`` next to the checkout; from a git
    worktree, next to the main checkout; ``$BPFMUX_CORPUS`` first), or ``None``."""
    candidates = []
    if os.environ.get("BPFMUX_CORPUS"):
        candidates.append(Path(os.environ["BPFMUX_CORPUS"]))
    candidates.append(ROOT.parent / "shared" / "corpus")
    git = ROOT / ".git"
    if git.is_file():  # a worktree: "gitdir: <main>/.git/worktrees/<name>"
        text = git.read_text().strip()
        if text.startswith("gitdir:"):
            gitdir = Path(text.split(":", 1)[1].strip())
            for parent in gitdir.parents:
                if parent.name == ".git":
                    candidates.append(parent.parent.parent / "shared" / "corpus")
                    break
    return next((c for c in candidates if c.is_dir()), None)


@pytest.fixture(scope="session")
def bpftrace_tools() -> Path:
    """``bpftrace-tools`` of the shared corpus (bpftrace 0.17's tools and docs); skips when absent."""
    base = corpus_dir()
    if base is None or not (base / "bpftrace-tools" / "tools").is_dir():
        pytest.skip("the shared corpus (../shared/corpus/bpftrace-tools) is not next to this checkout; "
                    "set BPFMUX_CORPUS to its path")
    return base / "bpftrace-tools"
