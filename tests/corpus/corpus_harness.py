"""Where the corpus is, and loading and attaching a tool's object as the
tool does (settings from :mod:`corpus_tools`), on any kernel of the contract."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from corpus_tools import TOOLS, Settings, Tool

from bpfmux.errors import BpfmuxError
from bpfmux.obj import ObjectSpec, load_object
from bpfmux.obj.sections import AttachKind, SecFlags

ROOT = Path(__file__).resolve().parents[2]


def corpus_dir() -> Path | None:
    """``libbpf-tools`` of the shared corpus: ``$BPFMUX_CORPUS``, else
    ``shared/corpus/libbpf-tools`` next to this checkout or one of its parents
    (``../shared`` of the main checkout, ``../../shared`` of a worktree)."""
    env = os.environ.get("BPFMUX_CORPUS")
    if env:
        p = Path(env)
        return p if (p / "obj").is_dir() else None
    for parent in ROOT.parents:
        p = parent / "shared" / "corpus" / "libbpf-tools"
        if (p / "obj").is_dir():
            return p
    return None


CORPUS = corpus_dir()
SKIP_REASON = ("the libbpf-tools corpus is absent (../shared/corpus/libbpf-tools/obj next to the checkout, "
               "or $BPFMUX_CORPUS)")


def tool_names() -> list[str]:
    """The corpus's tools (one per object), else the table's (tests then skip)."""
    if CORPUS is None:
        return sorted(TOOLS)
    return sorted(p.name.split(".")[0] for p in (CORPUS / "obj").glob("*.bpf.o"))


def object_path(tool: str) -> Path:
    assert CORPUS is not None
    return CORPUS / "obj" / f"{tool}.bpf.o"


def configured_spec(tool: Tool, settings: Settings) -> ObjectSpec:
    """The tool's object with ``settings`` applied, as its user space applies them before load."""
    spec = load_object(object_path(tool.name))
    for name, value in settings.globals.items():
        spec.set_global(name, value)
    for name, n in settings.map_sizes.items():
        spec.resize_map(name, max_entries=n)
    for name, n in settings.value_sizes.items():
        spec.resize_map(name, value_size=n)
    for name in settings.off:
        spec.program(name).autoload = False
    for name, target in settings.targets.items():
        spec.program(name).attach_target = target
    return spec


def _retprobe(prog: Any) -> bool:
    info = prog.spec.section_info if prog.spec is not None else None
    return bool(info is not None and info.kind is not None and SecFlags.RETPROBE in info.kind.flags)


@dataclass
class Started:
    """A tool's object loaded and attached the way the tool does it.

    :ivar failed: program → why it did not load.
    :ivar attach_failed: program → why an attach failed.
    :ivar idle: programs loaded and, as in the tool, not attached.
    """

    coll: Any
    links: list[Any] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    attach_failed: dict[str, str] = field(default_factory=dict)
    idle: dict[str, str] = field(default_factory=dict)

    @property
    def loaded(self) -> bool:
        return not self.failed

    @property
    def started(self) -> bool:
        """Everything the tool loads loaded and everything it attaches attached (libbpf's all or nothing)."""
        return not self.failed and not self.attach_failed

    def close(self) -> None:
        for link in self.links:
            link.close()
        self.links.clear()
        self.coll.close()


def _first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return lines[0] if lines else type(err).__name__


def attach_like_tool(prog: Any, settings: Settings) -> list[Any]:
    """The links the tool makes for ``prog`` (none for a program it leaves alone).

    :raises BpfmuxError: / :raises OSError: an attach failed (links made so far are closed).
    """
    name = prog.name
    if name in settings.skip_attach:
        return []
    links: list[Any] = []
    try:
        if name in settings.attach:
            for target in settings.attach[name]:
                links.append(prog.attach(target, retprobe=_retprobe(prog)))
        elif name in settings.perf:
            pe = settings.perf[name]
            opts: dict[str, Any] = {"hardware": pe.hardware}
            if pe.period is not None:
                opts["sample_period"] = pe.period
            else:
                opts["sample_freq"] = pe.freq
            links.append(prog.attach(pe.event, **opts))
        else:
            info = prog.spec.section_info if prog.spec is not None else None
            kind = info.kind.attach if info is not None and info.kind is not None else None
            if kind is None or not info.auto_attach:
                return []  # libbpf's skeleton attach skips what it cannot auto-attach
            if kind is AttachKind.PERF_EVENT:
                return []
            links.append(prog.attach())
    except BaseException:
        for link in links:
            link.close()
        raise
    return links


def start(kernel: Any, tool: Tool, settings: Settings) -> Started:
    """Load ``tool``'s object on ``kernel`` with ``settings`` (partial: every failure recorded) and attach
    as the tool does."""
    spec = configured_spec(tool, settings)
    coll = kernel.load(spec, partial=True)
    st = Started(coll, failed={n: _first_line(e) for n, e in coll.failed.items()})
    for name, prog in coll.programs.items():
        try:
            made = attach_like_tool(prog, settings)
        except (BpfmuxError, OSError) as err:
            st.attach_failed[name] = _first_line(err)
            continue
        if not made:
            st.idle[name] = settings.skip_attach.get(name, "not attached by the tool")
        st.links.extend(made)
    return st


@contextmanager
def started(kernel: Any, tool: Tool, settings: Settings) -> Iterator[Started]:
    """:func:`start` as a context manager that closes everything."""
    st = start(kernel, tool, settings)
    try:
        yield st
    finally:
        st.close()


def run_args(tool: Tool, settings: Settings) -> list[str]:
    """``bpfmux run`` options that apply ``settings`` (what a user types to run the tool's object)."""
    args: list[str] = []
    for name, value in settings.globals.items():
        args += ["--set", f"{name}={_text(value)}"]
    for name, n in settings.map_sizes.items():
        args += ["--map-size", f"{name}={n}"]
    for name, n in settings.value_sizes.items():
        args += ["--map-value-size", f"{name}={n}"]
    for name in sorted(settings.off):
        args += ["--skip", name]
    for name, target in settings.targets.items():
        args += ["--attach", f"{name}={target}"]
    for name, targets in settings.attach.items():
        for target in targets:
            args += ["--attach", f"{name}={target}"]
    for name, pe in settings.perf.items():
        args += ["--attach", f"{name}={'hw:' if pe.hardware else ''}{pe.event}"]
        if pe.period is not None:
            args += ["--period", str(pe.period)]
        elif pe.freq is not None:
            args += ["--freq", str(pe.freq)]
    return args


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode()
    return str(value)
