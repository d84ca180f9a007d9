"""The backend-independent object interface.

Both backends (:mod:`bpfmux.live`, the real kernel, and :mod:`bpfmux.emu`, the
emulated kernel) return objects that implement these abstract classes, so the
same user code runs on either. Every object that holds a kernel resource is a
context manager whose ``close()`` is idempotent.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any


class Closable(abc.ABC):
    """Something that holds resources until :meth:`close`."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release every resource; calling it again does nothing."""

    @property
    @abc.abstractmethod
    def closed(self) -> bool:
        """True once :meth:`close` ran."""

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


class Map(Closable, MutableMapping):
    """A BPF map as a mutable mapping; keys and values decoded through BTF.

    :ivar name: the map's name.
    :ivar type: its :class:`bpfmux.uapi.MapType`.
    """

    name: str
    key_size: int
    value_size: int
    max_entries: int


class Program(Closable):
    """A loaded program.

    :ivar name: program (function) name.
    :ivar section: ELF section it came from.
    """

    name: str
    section: str

    @abc.abstractmethod
    def attach(self, target: str | None = None, **options: Any) -> Link:
        """Attach by section name (or to ``target``) and return the link.

        :raises NotSupportedError: the kernel lacks this attach kind.
        :raises BpfError: the kernel refused the attach.
        """

    @abc.abstractmethod
    def attach_many(self, targets: Iterable[str], cookies: Sequence[int] | None = None, **options: Any) -> MultiLink:
        """Attach to every target at once with the best mechanism available.

        All or nothing: on failure nothing stays attached.

        :raises NotSupportedError: no mechanism fits these targets.
        :raises BpfError: the kernel refused the attach.
        """


class Collection(Closable, Mapping):
    """Everything loaded from one object: ``programs`` and ``maps`` by name.

    Indexing a collection by name returns the program or map of that name.
    Closing it closes every program fd and map; links keep what they use.

    :ivar spec: the :class:`~bpfmux.obj.ObjectSpec` it was loaded from.
    :ivar skipped: programs not loaded, with the reason.
    """

    programs: Mapping[str, Program]
    maps: Mapping[str, Map]

    def __init__(self, spec: Any = None) -> None:
        self.programs = {}
        self.maps = {}
        self.spec = spec
        self.skipped: dict[str, str] = {}
        self._closed = False

    def close(self) -> None:
        """Close every program fd and map (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for p in self.programs.values():
            p.close()
        for m in self.maps.values():
            m.close()

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

    def attach_all(self) -> list[Link]:
        """Attach every program that its section says how to attach."""
        links = []
        try:
            for p in self.programs.values():
                links.append(p.attach())
        except BaseException:
            for link in links:
                link.close()
            raise
        return links
