"""Trampoline policies: which image each function's patch site calls.

Three policies sit behind one interface (``multi-attach.md`` §2, "Policies"):

``clone`` (default, the seed's design)
    ``standard(f)`` for a function with only its own programs, one shared
    ``multi(S)`` image per distinct set ``S`` of multi programs, and
    ``clone(f, S)`` for a function with both.
``filter`` (the alternative the seed rejects)
    one shared image per multi set whose compare-and-branch chain on the ip
    handles the functions that also have their own programs.
``per-function`` (the 2026 mainline design)
    every function gets its own image holding its own and the multi
    programs; one batched site update per attach.

All three run the same programs in the same order with the same frames; they
differ in how many images they build, how many sites they patch, how many
grace periods they wait, and how many dispatch steps a call takes
(:class:`~.images.Costs`).
"""

from __future__ import annotations

import abc
import contextlib
import errno
import gc
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ....errors import BpfError, ParseError
from ....uapi import BPF_MAX_TRAMP_LINKS
from .frame import FramePool, ProgKind
from .functions import KernelFunction
from .images import Attachment, Costs, Image, TracingProgram, build_filter, build_path, run_order


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """Pause the cyclic garbage collector during a bulk update.

    Attaching to tens of thousands of functions allocates one small object per
    function; none of them is cyclic garbage, yet they trigger full
    collections that cost more than the attach itself (measured: 50,000
    functions attach 3× faster).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class FunctionState:
    """What is attached to one function."""

    __slots__ = ("func", "own", "multi")

    def __init__(self, func: KernelFunction) -> None:
        self.func = func
        self.own: list[Attachment] = []
        self.multi: list[Attachment] = []

    @property
    def count(self) -> int:
        """Programs on this function's trampoline."""
        return len(self.own) + len(self.multi)

    def order(self) -> tuple[Attachment, ...]:
        """Run order of this function's programs."""
        return tuple(run_order(self.own, self.multi))


class TrampolinePolicy(abc.ABC):
    """Base of the policies: bookkeeping, limits, atomicity, invariants.

    Subclasses decide images and sites in :meth:`_refresh`.
    """

    name = "?"

    def __init__(self) -> None:
        self.costs = Costs()
        self.states: dict[KernelFunction, FunctionState] = {}
        #: patch sites: function → image it calls (absent: no-op)
        self.sites: dict[KernelFunction, Image] = {}
        self._seq = 0
        #: where images take their frames (the emulated kernel sets its VM's pool; ``None``: a fresh frame per
        #: call, mapped by each program run)
        self.frames: FramePool | None = None

    # -- operations -----------------------------------------------------

    def next_seq(self) -> int:
        """A new attach sequence number (newer programs get larger ones)."""
        self._seq += 1
        return self._seq

    def attach(self, func: KernelFunction, att: Attachment) -> None:
        """Attach a fentry/fexit/fmod_ret program to ``func``.

        :raises BpfError: ``EINVAL`` the function can't be traced; ``E2BIG``
            its trampoline already holds the most programs; ``EEXIST`` the
            attachment is already there; ``EBUSY`` the program is already
            linked to this function (as the kernel's trampoline refuses it).
        """
        reason = func.untraceable_reason(multi=False)
        if reason:
            raise BpfError(errno.EINVAL, f"cannot attach {att.kind.name.lower()} program: {reason}")
        st = self.states.get(func)
        if st is not None:
            if att in st.own:
                raise BpfError(errno.EEXIST, f"program already attached to {func.name}")
            if any(a.prog is att.prog for a in st.own):
                raise BpfError(errno.EBUSY, f"program {att.prog.name!r} is already linked to {func.name}'s "
                                            "trampoline; close that link first")
            if st.count >= BPF_MAX_TRAMP_LINKS:
                raise BpfError(errno.E2BIG, f"{func.name} already has {BPF_MAX_TRAMP_LINKS} programs on its trampoline")
        else:
            st = self.states[func] = FunctionState(func)
        st.own.append(att)
        self._refresh([func])

    def detach(self, func: KernelFunction, att: Attachment) -> None:
        """Detach a program attached with :meth:`attach`.

        :raises BpfError: ``ENOENT`` it is not attached there.
        """
        st = self.states.get(func)
        if st is None or att not in st.own:
            raise BpfError(errno.ENOENT, f"program not attached to {func.name}")
        st.own.remove(att)
        self._drop_if_empty(st)
        self._refresh([func])

    def attach_multi(self, att: Attachment, funcs: Sequence[KernelFunction]) -> None:
        """Attach a multi program to every function in ``funcs`` — all or none.

        :raises BpfError: ``EINVAL`` a function can't be traced (the message
            names the first); ``E2BIG`` a function's trampoline is full.
        """
        with bulk():
            self._attach_multi(att, funcs)

    def _attach_multi(self, att: Attachment, funcs: Sequence[KernelFunction]) -> None:
        states = self.states
        for f in funcs:
            reason = f.untraceable_reason(multi=True)
            if reason:
                raise BpfError(errno.EINVAL, f"cannot attach multi program: {reason}")
            st = states.get(f)
            if st is not None and st.count >= BPF_MAX_TRAMP_LINKS:
                raise BpfError(
                    errno.E2BIG, f"{f.name} already has {BPF_MAX_TRAMP_LINKS} programs on its trampoline; nothing attached"
                )
        att.funcs = tuple(funcs)
        for f in funcs:
            st = states.get(f)
            if st is None:
                st = states[f] = FunctionState(f)
            st.multi.append(att)
        self._refresh(funcs)

    def detach_multi(self, att: Attachment) -> None:
        """Detach a multi program from all its functions."""
        funcs = att.funcs
        with bulk():
            for f in funcs:
                st = self.states[f]
                st.multi.remove(att)
                self._drop_if_empty(st)
            self._refresh(funcs)

    def replace_program(self, att: Attachment, prog: TracingProgram) -> None:
        """Swap the program of an attachment everywhere it runs (link update)."""
        att.prog = prog
        funcs = att.funcs if att.kind.is_multi else tuple(
            st.func for st in self.states.values() if att in st.own
        )
        self._refresh(funcs, rebuild=True)

    def _drop_if_empty(self, st: FunctionState) -> None:
        if not st.own and not st.multi:
            del self.states[st.func]

    # -- calls -----------------------------------------------------------

    def call(self, func: KernelFunction, args: Sequence[int]) -> int:
        """Call ``func`` through its patch site; returns the return register (u64)."""
        self.costs.calls += 1
        img = self.sites.get(func)
        if img is None:
            return func.call_body(args)
        return img.fn(func.addr, args, func)

    # -- images -----------------------------------------------------------

    @abc.abstractmethod
    def _refresh(self, funcs: Iterable[KernelFunction], rebuild: bool = False) -> None:
        """Bring the images and sites of ``funcs`` up to date (one batch)."""

    def images(self) -> list[Image]:
        """Every live image."""
        seen: dict[int, Image] = {}
        for img in self.sites.values():
            seen.setdefault(id(img), img)
        return list(seen.values())

    def _point(self, func: KernelFunction, img: Image | None, freed: list[Image]) -> bool:
        """Point ``func``'s site at ``img``; collect images nobody uses any more."""
        old = self.sites.get(func)
        if old is img:
            return False
        if old is not None:
            old.refs.discard(func)
            if not old.refs:
                freed.append(old)
        if img is None:
            del self.sites[func]
        else:
            self.sites[func] = img
            img.refs.add(func)
        return True

    def _finish(self, patched: int, freed: list[Image]) -> None:
        c = self.costs
        if patched:
            c.site_patches += patched
            c.batches += 1
        if freed:
            c.grace_periods += 1  # one synchronize for the whole batch
            self._forget(freed)

    def _forget(self, freed: list[Image]) -> None:  # noqa: B027 - optional hook
        """Drop policy caches that refer to freed images."""

    def _new_image(self, kind: str, func: KernelFunction | None, multi: tuple[Attachment, ...], runs: tuple[Attachment, ...], steps: int = 1) -> Image:
        fn, size = build_path(runs, self.costs, func, steps, self.frames)
        self.costs.images_built += 1
        self.costs.image_bytes += size
        return Image(kind, func, multi, runs, fn, size)

    # -- invariants -------------------------------------------------------

    @abc.abstractmethod
    def expected_kind(self, st: FunctionState) -> str:
        """The image kind this policy must use for a function in state ``st``."""

    def check_invariants(self) -> None:
        """Check the spec's invariants; raises ``AssertionError`` naming the first broken one."""
        for func, img in self.sites.items():
            st = self.states.get(func)
            assert st is not None, f"{func.name}: site points at {img} but nothing is attached"
        for func, st in self.states.items():
            site = self.sites.get(func)
            assert site is not None, f"{func.name}: programs attached but its site is a no-op"
            assert site.kind == self.expected_kind(st), f"{func.name}: {site.kind} image, expected {self.expected_kind(st)}"
            assert site.plan(func) == st.order(), f"{func.name}: image runs {site.plan(func)}, expected {st.order()}"
            assert func in site.refs, f"{func.name}: image does not know it serves this function"
            if site.kind in ("standard", "clone", "per-function"):
                assert site.refs == {func} and site.func is func, f"{site} serves {len(site.refs)} functions"
        for img in self.images():
            for f in img.refs:
                assert self.sites.get(f) is img, f"{img} lists {f.name} but that site points elsewhere"


class ClonePolicy(TrampolinePolicy):
    """The seed's design: standard, shared multi, and per-function clones."""

    name = "clone"

    def __init__(self) -> None:
        super().__init__()
        self._multi_images: dict[tuple[Attachment, ...], Image] = {}

    def expected_kind(self, st: FunctionState) -> str:
        if st.own and st.multi:
            return "clone"
        return "standard" if st.own else "multi"

    def _refresh(self, funcs: Iterable[KernelFunction], rebuild: bool = False) -> None:
        states, sites = self.states, self.sites
        shared = self._multi_images
        freed: list[Image] = []
        patched = 0
        if rebuild:
            # images bake their programs in: drop shared images that hold a changed one
            for f in funcs:
                img = sites.get(f)
                if img is not None and img.kind == "multi":
                    shared.pop(img.multi, None)
        for f in funcs:
            st = states.get(f)
            old = sites.get(f)
            if st is None:
                img = None
            elif st.own:
                multi = tuple(st.multi)
                img = self._new_image("clone" if multi else "standard", f, multi, st.order())
            else:
                key = tuple(st.multi)
                img = shared.get(key)
                if img is None:
                    img = shared[key] = self._new_image("multi", None, key, st.order())
            if img is not old:
                patched += self._point(f, img, freed)
        self._finish(patched, freed)

    def _forget(self, freed: list[Image]) -> None:
        shared = self._multi_images
        for img in freed:
            if img.kind == "multi" and shared.get(img.multi) is img:
                del shared[img.multi]


class FilterPolicy(TrampolinePolicy):
    """One shared image per multi set; own programs behind an ip compare chain."""

    name = "filter"

    def __init__(self) -> None:
        super().__init__()
        self._filters: dict[tuple[Attachment, ...], Image] = {}
        #: per filter image: address → generated branch of each function it
        #: serves that has its own programs (chain order = insertion order)
        self._handlers: dict[Image, dict[int, tuple[Callable[..., Any], int]]] = {}

    def expected_kind(self, st: FunctionState) -> str:
        return "filter" if st.multi else "standard"

    def _refresh(self, funcs: Iterable[KernelFunction], rebuild: bool = False) -> None:
        states, sites, handlers = self.states, self.sites, self._handlers
        freed: list[Image] = []
        patched = 0
        dirty: dict[Image, None] = {}
        for f in funcs:
            st = states.get(f)
            old = sites.get(f)
            if old is not None and old.kind == "filter":
                if old.branches.pop(f.addr, None) is not None:
                    del handlers[old][f.addr]
                    dirty[old] = None
                elif rebuild:
                    dirty[old] = None
            if st is None:
                img = None
            elif not st.multi:
                img = self._new_image("standard", f, (), st.order())
            else:
                key = tuple(st.multi)
                img = self._filters.get(key)
                if img is None:
                    img = self._filters[key] = Image("filter", None, key, tuple(run_order((), key)), _unbuilt, 0)
                    handlers[img] = {}
                    dirty[img] = None
                if st.own:
                    order = st.order()
                    fn, size = build_path(order, self.costs, f, steps=0, frames=self.frames)
                    handlers[img][f.addr] = (fn, size)
                    img.branches[f.addr] = order
                    dirty[img] = None
                elif rebuild:
                    dirty[img] = None
            if img is not old:
                patched += self._point(f, img, freed)
        for img in dirty:
            if img.refs:
                if img.size:
                    patched += 1  # the rebuilt shared image is swapped in behind one stub
                self._rebuild_filter(img)
        self._finish(patched, freed)

    def _rebuild_filter(self, img: Image) -> None:
        img.runs = tuple(run_order((), img.multi))
        multi_fn, size = build_path(img.runs, self.costs, None, steps=0, frames=self.frames)
        branch = self._handlers[img]
        img.fn, chain = build_filter(multi_fn, tuple(branch), tuple(h for h, _ in branch.values()), self.costs)
        if img.size:
            self.costs.grace_periods += 1  # the old shared image is freed after a grace period
        img.size = size + chain + sum(s for _, s in branch.values()) + 16 * len(branch)
        self.costs.images_built += 1
        self.costs.image_bytes += img.size

    def _forget(self, freed: list[Image]) -> None:
        for img in freed:
            if img.kind == "filter":
                self._handlers.pop(img, None)
                if self._filters.get(img.multi) is img:
                    del self._filters[img.multi]


def _unbuilt(ip: int, args: Sequence[int], body: object) -> int:
    raise AssertionError("filter image used before it was built")


class PerFunctionPolicy(TrampolinePolicy):
    """The 2026 mainline design: one image per function, batched site updates."""

    name = "per-function"

    def expected_kind(self, st: FunctionState) -> str:
        return "per-function"

    def _refresh(self, funcs: Iterable[KernelFunction], rebuild: bool = False) -> None:
        states = self.states
        freed: list[Image] = []
        patched = 0
        for f in funcs:
            st = states.get(f)
            img = None if st is None else self._new_image("per-function", f, tuple(st.multi), st.order())
            patched += self._point(f, img, freed)
        self._finish(patched, freed)


POLICIES: dict[str, type[TrampolinePolicy]] = {
    "clone": ClonePolicy,
    "filter": FilterPolicy,
    "per-function": PerFunctionPolicy,
}


def make_policy(name: str) -> TrampolinePolicy:
    """Create a policy by name (``clone``, ``filter``, ``per-function``).

    :raises ParseError: unknown name (a ``ValueError``).
    """
    try:
        return POLICIES[name]()
    except KeyError:
        raise ParseError(f"unknown trampoline policy {name!r}; choose one of {', '.join(POLICIES)}") from None


__all__ = [
    "POLICIES",
    "ClonePolicy",
    "FilterPolicy",
    "FunctionState",
    "PerFunctionPolicy",
    "ProgKind",
    "TrampolinePolicy",
    "make_policy",
]
