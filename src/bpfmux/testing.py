"""pytest plugin: test BPF programs in the emulated kernel, without root.

Installed with bpfmux (entry point ``pytest11``), or enable it explicitly with
``pytest -p bpfmux.testing``. It provides:

``emulator``
    a fresh :class:`bpfmux.Emulator` per test, closed afterwards. Choose the
    trampoline policy with ``--bpfmux-policy`` (default ``clone``) or per
    test with ``@pytest.mark.bpfmux(policy="filter", btf=None, tier="checked")``.
``bpf_object``
    a factory: ``bpf_object(path, **load_options)`` loads an ELF object into
    the test's emulator and returns its collection (closed afterwards).
``emulator_factory``
    ``emulator_factory(**options)`` for tests that need several emulators.
``bpftrace_script``
    ``bpftrace_script(text, workload, *params, unsafe=False, json=False)``
    runs a bpftrace script on the test's emulator (no root) and returns what
    bpftrace would have printed; ``workload`` is a workload spec such as
    ``"sys:getpid*3"``, a call-stream file, or a function called with the
    emulator once the probes are attached.

Example (``test_counter.py``)::

    def test_counts_calls(emulator, bpf_object):
        coll = bpf_object("build/counter.bpf.o")
        coll.attach_all()
        for _ in range(3):
            emulator.call("bpf_fentry_test1", 1)
        assert coll.maps[".bss"]["calls"] == 3

    @pytest.mark.bpfmux(policy="per-function")
    def test_same_under_mainline_design(emulator, bpf_object):
        ...

Testing a bpftrace script::

    def test_counts_getpid(bpftrace_script):
        out = bpftrace_script('t:syscalls:sys_enter_getpid { @[comm] = count(); }', "sys:getpid*3")
        assert "@[bpfmux-emu]: 3" in out

Nothing here touches the host kernel: programs run on bpfmux's VM against
emulated kernel functions, tracepoints and kprobes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from .api import close_all

POLICIES = ("clone", "filter", "per-function")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--bpfmux-policy`` and ``--bpfmux-btf``."""
    group = parser.getgroup("bpfmux", "bpfmux emulated kernel")
    group.addoption("--bpfmux-policy", default="clone", choices=POLICIES,
                    help="trampoline policy of the emulator fixture (default: clone)")
    group.addoption("--bpfmux-btf", default="auto",
                    help="BTF of the emulated kernel: auto (vmlinux when present), none, or a path")


def pytest_configure(config: pytest.Config) -> None:
    """Register the ``bpfmux`` marker."""
    config.addinivalue_line("markers", "bpfmux(policy=..., btf=..., tier=..., verify=...): emulator options")


def _options(request: pytest.FixtureRequest) -> dict[str, Any]:
    btf: Any = request.config.getoption("--bpfmux-btf", "auto")
    opts: dict[str, Any] = {"policy": request.config.getoption("--bpfmux-policy", "clone"),
                            "btf": None if btf == "none" else btf}
    marker = request.node.get_closest_marker("bpfmux")
    if marker is not None:
        opts.update(marker.kwargs)
    return opts


@pytest.fixture
def emulator_factory(request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Make emulators (``emulator_factory(policy="filter")``); all closed after
    the test, every one even if a close fails (the first error is raised then)."""
    from .emu.kernel.emulator import Emulator

    made: list[Emulator] = []

    def make(**options: Any) -> Emulator:
        opts = _options(request)
        opts.update(options)
        emu = Emulator(**opts)
        made.append(emu)
        return emu

    yield make
    close_all(made)


@pytest.fixture
def emulator(emulator_factory: Callable[..., Any]) -> Any:
    """A fresh emulated kernel for this test."""
    return emulator_factory()


@pytest.fixture
def bpf_object(emulator: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., Any]]:
    """Load ELF objects into the test's emulator: ``bpf_object(path, **options)``.
    Every collection is closed after the test, even if one close fails.

    A relative path is taken from the current directory, or else from the
    test file's directory when it exists only there.

    :raises ParseError: the object is malformed (and the errors of
        :meth:`bpfmux.Emulator.load`).
    """
    loaded: list[Any] = []
    here = os.path.dirname(str(request.node.fspath))

    def load(path: str | os.PathLike[str], **options: Any) -> Any:
        p = os.fspath(path)
        if not os.path.isabs(p) and not os.path.exists(p) and os.path.exists(os.path.join(here, p)):
            p = os.path.join(here, p)
        coll = emulator.load(p, **options)
        loaded.append(coll)
        return coll

    yield load
    close_all(loaded)


@pytest.fixture
def bpftrace_script(emulator: Any) -> Callable[..., str]:
    """``run(text, workload="", *params, unsafe=False, json=False, helper_check=0)``: a bpftrace
    script on the test's emulator (``helper_check``: ``-k`` 1, ``-kk`` 2); returns what bpftrace
    would have printed."""
    from .bpftrace.emulated import run_emulated
    from .bpftrace.runtime import Options

    def run(text: str, workload: Any = "", *params: str, unsafe: bool = False, json: bool = False,
            helper_check: int = 0) -> str:  # fmt: skip
        return run_emulated(text, workload, emulator=emulator,
                            options=Options(params=list(params), unsafe=unsafe, json=json,
                                            helper_check=helper_check))  # fmt: skip

    return run
