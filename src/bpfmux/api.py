"""The kernel contract: what both kernels offer, with the same names.

Two backends implement it: :class:`bpfmux.live.LiveKernel` (the running
kernel, through ``bpf(2)``) and :class:`bpfmux.emu.Emulator` (the emulated
kernel: the project's VM, verifier and trampolines). Code written against
these classes runs on either::

    def count_sleeps(kernel: Kernel) -> int:
        with kernel.load("tests/bpf/getpid.bpf.o") as coll:
            links = coll.attach_all()
            ...

- :class:`Kernel`: ``load`` (an ELF object → :class:`Collection`),
  ``load_program`` (raw instructions → :class:`Program`), ``create_map``,
  what it has (``tracepoint_names``, ``function_names``, ``supports``, ``btf_id``),
  ``close``; a context manager.
- :class:`Program`: ``name``, ``section``, ``prog_type``, ``attach_type``,
  ``attach_target``, ``flags``, ``fd`` (an int), ``attach_kind``,
  :meth:`Program.test_run` → :class:`TestRunResult`, :meth:`Program.attach`
  and :meth:`Program.attach_many` (one dispatch for both kernels:
  :mod:`bpfmux.attach`).
- :class:`Map`: a ``MutableMapping`` with ``name``, ``type``, ``key_size``,
  ``value_size``, ``max_entries``, ``flags`` and ``fd``.
- :class:`Link` / :class:`MultiLink`: one attachment; ``close()`` detaches.

Every object that holds a kernel resource is a context manager whose
``close()`` is idempotent. Bad arguments raise
:class:`~bpfmux.errors.InvalidArgumentError`; malformed input (objects,
text) raises :class:`~bpfmux.errors.ParseError`.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Self

from .record import Frozen
from .record import set_field as _set
from .uapi import AttachType, MapFlags, MapType, ProgFlags, ProgType

if TYPE_CHECKING:  # pragma: no cover
    from .attach import Linker
    from .btf import Btf
    from .errors import BpfmuxError
    from .isa.insn import Insn
    from .obj.sections import AttachKind
    from .obj.spec import ObjectSpec, ProgramSpec

__all__ = ["FEATURES", "Closable", "close_all", "Collection", "Kernel", "Link", "Map", "MultiLink", "Program", "TestRunResult"]


#: the feature names :meth:`Kernel.supports` answers
FEATURES = ("kprobes", "kprobe_multi", "kprobe_session", "uprobes", "uprobe_multi", "uprobe_session", "fentry",
            "tracing_multi", "btf")


class Closable(abc.ABC):
    """Something that holds resources until :meth:`close`."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release every resource; calling it again does nothing."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """True once :meth:`close` ran."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def close_all(objs: Iterable[Any]) -> None:
    """Close every object in order, all of them even if one close fails
    (Ctrl-C included); the first error is raised at the end.

    :raises BaseException: the first error a close raised.
    """
    errors: list[BaseException] = []
    for obj in list(objs):
        try:
            obj.close()
        except BaseException as e:  # keep closing, re-raise below
            errors.append(e)
    if errors:
        raise errors[0]


class TestRunResult(Frozen):
    """What one ``BPF_PROG_TEST_RUN`` reports, on either kernel.

    :ivar retval: the program's return value as the kernel reports it (u32).
    :ivar duration_ns: average run time per repetition (0 when not measured).
    :ivar data_out: the packet after the run (networking programs).
    :ivar ctx_out: the context after the run, for the program types whose
        context the kernel copies back (empty otherwise).
    """

    __test__ = False  # not a pytest class
    __slots__ = ("retval", "duration_ns", "data_out", "ctx_out")

    retval: int
    duration_ns: int
    data_out: bytes
    ctx_out: bytes

    def __init__(self, retval: int, duration_ns: int = 0, data_out: bytes = b"", ctx_out: bytes = b"") -> None:
        _set(self, "retval", retval)
        _set(self, "duration_ns", duration_ns)
        _set(self, "data_out", data_out)
        _set(self, "ctx_out", ctx_out)


class Link(Closable):
    """One attachment of a program to a hook; detaches on :meth:`close`.

    :ivar kind: the link kind (``"tracepoint"``, ``"raw_tracepoint"``,
        ``"uprobe_multi"``, ``"tracing_multi"``, …).
    """

    kind: str = "link"

    @property
    @abc.abstractmethod
    def program(self) -> Program:
        """The attached program."""

    def update(self, program: Program, old: Program | None = None) -> None:
        """Replace the attached program atomically (``BPF_LINK_UPDATE``).

        :raises NotSupportedError: this link kind cannot be updated.
        :raises BpfError: ``EINVAL`` incompatible program, ``EPERM`` ``old``
            does not match.
        """
        from .errors import NotSupportedError

        raise NotSupportedError(f"{self.kind} link update")


class MultiLink(Link):
    """One program attached to many targets as one unit.

    :ivar mechanism: how it was attached (``"uprobe_multi"``,
        ``"kprobe_multi"``, ``"tracing_multi"``, ``"raw_tracepoint"``,
        ``"perf_event"``, ``"per-target"``, …).
    :ivar targets: the targets, in the order given.
    """

    mechanism: str = "per-target"
    targets: Sequence[str] = ()


class Map(Closable, MutableMapping[Any, Any]):
    """A BPF map as a mutable mapping; keys and values decoded through BTF
    when the map has BTF types, else bytes (ints are packed little-endian).

    :ivar name: the map's name.
    :ivar type: its :class:`~bpfmux.uapi.MapType`.
    :ivar key_size: / :ivar value_size: / :ivar max_entries: as created.
    :ivar flags: its :class:`~bpfmux.uapi.MapFlags`.
    """

    name: str
    type: MapType
    key_size: int
    value_size: int
    max_entries: int
    flags: MapFlags

    @property
    @abc.abstractmethod
    def fd(self) -> int:
        """The map's file descriptor number (an emulated number in the emulator).

        :raises BpfError: ``EBADF`` once closed.
        """

    @abc.abstractmethod
    def lookup_raw(self, key: Any) -> bytes | None:
        """The value bytes at ``key`` as ``bpf(2)`` returns them (per-CPU
        values one after another, each padded to 8 bytes), or ``None``.

        :raises BpfError: the kernel's error (``EBADF`` closed, …).
        """

    @abc.abstractmethod
    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """Every ``(key, value)`` as bytes (values as :meth:`lookup_raw` gives them).

        :raises BpfError: the kernel's error.
        """


class Program(Closable):
    """A loaded program.

    :ivar name: program (function) name.
    :ivar section: ELF section it came from (``""`` for raw instructions).
    :ivar prog_type: its :class:`~bpfmux.uapi.ProgType`.
    :ivar attach_type: the expected attach type it was loaded with (``None``: none).
    :ivar attach_target: what the section (or the load) names as target:
        a function, a tracepoint, a glob (``None``: none).
    :ivar flags: the :class:`~bpfmux.uapi.ProgFlags` it was loaded with.
    :ivar spec: the :class:`~bpfmux.obj.ProgramSpec` it came from, if any.
    """

    name: str
    section: str
    prog_type: ProgType
    attach_type: AttachType | None
    attach_target: str | None
    flags: ProgFlags
    spec: ProgramSpec | None

    @property
    @abc.abstractmethod
    def fd(self) -> int:
        """The program's file descriptor number (an emulated number in the emulator).

        :raises BpfError: ``EBADF`` once closed.
        """

    @property
    def attach_kind(self) -> AttachKind | None:
        """How this program attaches (:class:`~bpfmux.obj.sections.AttachKind`),
        from its section, else its type and attach type; ``None``: not to a
        tracing hook."""
        from .obj.sections import attach_kind_of

        return attach_kind_of(self.prog_type, self.attach_type, self.flags, self.section)

    @abc.abstractmethod
    def test_run(self, ctx: bytes | None = None, data_in: bytes | None = None, repeat: int = 1) -> TestRunResult:
        """Run the program once (``BPF_PROG_TEST_RUN``).

        ``ctx`` is the context (``syscall``, ``raw_tp``, ``tracing``, …
        programs); ``data_in`` the packet of networking programs. A
        fentry/fexit/fmod_ret program's test run calls the kernel's test
        functions through their trampolines, as ``net/bpf/test_run.c`` does.

        :raises NotSupportedError: this kernel cannot test-run the program type.
        :raises BpfError: the kernel refused the run.
        """

    @abc.abstractmethod
    def _linker(self) -> Linker:
        """The kernel's :class:`bpfmux.attach.Linker` that attaches this program."""

    def attach(self, target: str | None = None, **options: Any) -> Link:
        """Attach to ``target`` (default: the target the section names).

        :param options: ``cookie``; ``retprobe`` (kprobes, uprobes); ``pid``
            (uprobes); ``via`` (``"link"``/``"ioctl"`` for perf events);
            sampling options for perf_event programs (``sample_freq``,
            ``sample_period``, ``cpus``).
        :raises InvalidArgumentError: no target given and the section names none,
            or an option that does not fit the program.
        :raises NotSupportedError: this kernel lacks the attach kind.
        :raises NotFoundError: the target does not exist.
        :raises BpfError: the kernel refused the attach.
        """
        from .attach import attach

        return attach(self._linker(), self, target, **options)

    def attach_many(self, targets: Iterable[str], cookies: Sequence[int] | None = None, **options: Any) -> MultiLink:
        """Attach to every target at once with the best mechanism this kernel
        has (globs allowed). All or nothing: on failure nothing stays attached.

        :raises InvalidArgumentError: no targets, or cookies that do not match them.
        :raises NotSupportedError: no mechanism fits these targets.
        :raises NotFoundError: a target matches nothing.
        :raises BpfError: the kernel refused the attach.
        """
        from .attach import attach_many

        return attach_many(self._linker(), self, targets, cookies, **options)


class Collection(Closable, Mapping[str, "Program | Map"]):
    """Everything loaded from one object: ``programs`` and ``maps`` by name.

    Indexing a collection by name returns the program or map of that name.
    Closing it closes every program fd and map; links keep what they use.

    :ivar spec: the :class:`~bpfmux.obj.ObjectSpec` it was loaded from.
    :ivar skipped: programs not loaded, with the reason.
    :ivar failed: programs a partial load (``Kernel.load(partial=True)``)
        could not load, with the error.
    :ivar warnings: degradations during load (BTF refused, …).
    """

    programs: dict[str, Program]
    maps: dict[str, Map]

    def __init__(self, spec: ObjectSpec | None = None) -> None:
        self.programs = {}
        self.maps = {}
        self.spec = spec
        self.skipped: dict[str, str] = {}
        self.failed: dict[str, BpfmuxError] = {}
        self.warnings: list[str] = []
        self._closed = False

    def close(self) -> None:
        """Close every program fd and map, all of them even if one close
        fails (idempotent).

        :raises BaseException: the first error a close raised, after all were closed.
        """
        if self._closed:
            return
        self._closed = True
        close_all([*self.programs.values(), *self.maps.values()])

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def __getitem__(self, name: str) -> Program | Map:
        if name in self.programs:
            return self.programs[name]
        return self.maps[name]

    def __iter__(self) -> Iterator[str]:
        yield from self.programs
        yield from self.maps

    def __len__(self) -> int:
        return len(self.programs) + len(self.maps)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} programs={list(self.programs)} maps={list(self.maps)}>"

    def attach_all(self) -> list[Link]:
        """Attach every program that its section says how to attach.

        :raises NotSupportedError: / :raises BpfError: as :meth:`Program.attach`;
            whatever was attached is detached first.
        """
        links: list[Link] = []
        try:
            for p in self.programs.values():
                links.append(p.attach())
        except BaseException:
            for link in links:
                link.close()
            raise
        return links


class Kernel(Closable):
    """A kernel that loads and runs BPF programs: the live one or the emulated one.

    :ivar kind: ``"live"`` or ``"emulated"``.
    :ivar btf: the kernel's BTF (``None``: the kernel has none).
    """

    kind: str
    btf: Btf | None

    @abc.abstractmethod
    def load(self, spec_or_path: ObjectSpec | str | bytes | os.PathLike[str], *,
             programs: Iterable[str] | None = None, kconfig: Mapping[str, object] | None = None,
             log_level: int = 0, partial: bool = False) -> Collection:
        """Load an object: its maps in order (global data filled,
        ``.rodata`` frozen), its programs (relocated, CO-RE resolved against
        this kernel's BTF, verified), then the slots of prog arrays and maps
        of maps. All or nothing, unless ``partial``.

        :param programs: load only these programs (default: every program
            whose section does not start with ``?`` and whose spec's
            ``autoload`` is set).
        :param kconfig: values for (or overriding) ``__kconfig`` externs.
        :param log_level: verifier log level to keep in ``program.log``.
        :param partial: a program that cannot be loaded is recorded with its
            error in :attr:`Collection.failed` and the others load (maps
            still all or nothing).
        :raises ParseError: the object is malformed.
        :raises VerifierError: a program was rejected (``.log`` says why).
        :raises NotFoundError: an attach target, map or strong extern is
            missing, or a name in ``programs`` is not a program of the object.
        :raises NotSupportedError: the kernel lacks something the object needs.
        :raises BpfError: any other refusal; nothing stays loaded.
        """

    @abc.abstractmethod
    def load_program(self, insns: Sequence[Insn] | bytes, prog_type: ProgType | int, *, name: str = "",
                     section: str = "", attach_type: AttachType | int | None = None,
                     attach_target: str | None = None, flags: ProgFlags | int = 0, license: str = "GPL",
                     log_level: int = 0) -> Program:
        """Load one program from instructions whose map references are
        already fds of this kernel's maps. A tracing program's
        ``attach_target`` (a function, or a raw tracepoint for tp_btf) is
        looked up in this kernel's BTF.

        :raises VerifierError: rejected, with the log.
        :raises NotFoundError: ``attach_target`` is not in this kernel's BTF.
        :raises NotSupportedError: the kernel cannot load this program type.
        :raises BpfError: any other refusal.
        """

    @abc.abstractmethod
    def create_map(self, map_type: MapType | int, key_size: int, value_size: int, max_entries: int, *,
                   name: str = "", flags: MapFlags | int = 0, inner: Map | None = None) -> Map:
        """Create one map (``inner``: the template of a map of maps).

        :raises NotSupportedError: the kernel has no such map type.
        :raises BpfError: the kernel refused (sizes, flags, memory).
        """

    def detach_all(self, links: Iterable[Link]) -> None:
        """Close every link as fast as this kernel allows (the live one closes
        them on several threads: a perf event's or a uprobe's detach waits for
        the kernel's grace period, and those overlap); all of them even if
        one fails.

        :raises BaseException: the first error a close raised, after every link was closed.
        """
        close_all(links)

    # -- what the kernel has ------------------------------------------------

    @abc.abstractmethod
    def tracepoint_names(self, pattern: str = "*:*") -> list[tuple[str, str]]:
        """``(category, name)`` of every tracepoint matching ``pattern``
        (``category:name``, shell globs allowed), sorted.

        :raises NotSupportedError: the kernel's tracepoints cannot be listed
            (tracefs is not mounted).
        """

    @abc.abstractmethod
    def function_names(self, pattern: str) -> list[str]:
        """Kernel functions that probes can attach to, matching ``pattern``
        (a name is returned as given; a glob is expanded).

        :raises NotFoundError: a glob that matches nothing.
        """

    @abc.abstractmethod
    def supports(self, feature: str) -> bool:
        """Whether the kernel has ``feature``: ``"kprobes"``,
        ``"kprobe_multi"``, ``"kprobe_session"``, ``"uprobes"``,
        ``"uprobe_multi"``, ``"uprobe_session"``, ``"fentry"``,
        ``"tracing_multi"``, ``"btf"``.

        :raises InvalidArgumentError: an unknown feature name.
        """

    @abc.abstractmethod
    def btf_id(self, name: str, kind: str = "func") -> int:
        """The id of a type in the kernel's BTF (``kind``: ``func``,
        ``struct``, ``typedef``, …), e.g. for kfunc calls.

        :raises NotFoundError: no such type.
        :raises NotSupportedError: the kernel has no BTF.
        """
