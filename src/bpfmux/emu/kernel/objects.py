"""Programs and collections of the emulated kernel (the :mod:`bpfmux.api` interface).

An :class:`EmulatedProgram` wraps a VM program with what the object said
about it (section, type, attach type, target, flags) and with the kernel's
lifetime rule: the program lives while its fd, a perf event or a link holds
it. Closing the fd after attaching does not detach it.
"""

from __future__ import annotations

import errno
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ... import api
from ...codecs import datasec_variables
from ...errors import BpfError, BpfmuxError, NotSupportedError
from ...uapi import AttachType, ProgFlags, ProgType
from ..vm.interp import M32
from ..vm.runtime import RunContext
from .trampoline.frame import CallInfo

if TYPE_CHECKING:
    from ...attach import Linker
    from ...btf import Btf
    from ..vm.machine import EmuProgram
    from ..vm.maps import ArrayMap
    from .emulator import Emulator


class EmulatedProgram(api.Program):
    """A program loaded into an :class:`~bpfmux.emu.Emulator`.

    (``name``, ``section``, ``prog_type``, ``attach_type``, ``attach_target``,
    ``flags``, ``spec`` and ``fd`` as :class:`bpfmux.api.Program` says.)

    :ivar kernel: the emulator it is loaded in.
    :ivar vmprog: the VM's program.
    :ivar id: program id.
    :ivar runs: how many times it ran.
    :ivar max_ctx_offset: end of the highest context byte the verifier saw
        the program read (checked again at attach time, as the kernel does).
    """

    def __init__(self, kernel: Emulator, vmprog: EmuProgram, *, section: str = "",
                 attach_type: AttachType | int | None = None, attach_target: str | None = None,
                 flags: ProgFlags | int = 0, spec: Any = None) -> None:
        self.kernel = kernel
        self.vmprog = vmprog
        self._entry = vmprog.entry()
        self.name = vmprog.name
        self.section = section
        self.prog_type = ProgType(vmprog.prog_type)
        self.attach_type = AttachType(int(attach_type)) if attach_type is not None else None
        self.attach_target = attach_target
        self.flags = ProgFlags(int(flags))
        self.spec = spec
        self.id = vmprog.id
        self._fd = vmprog.fd
        self._refs = 1  # the fd
        self._fd_open = True
        self.runs = 0
        self.max_ctx_offset = 0

    @property
    def fd(self) -> int:
        """The program's emulated fd.

        :raises BpfError: ``EBADF`` once closed.
        """
        if not self._fd_open:
            raise BpfError(errno.EBADF, f"program {self.name!r} is closed")
        return self._fd

    # -- lifetime -------------------------------------------------------------

    def hold(self) -> None:
        """An owner (perf event, link) takes a reference.

        :raises BpfmuxError: the program was already freed.
        """
        if not self._refs:
            raise BpfmuxError(f"program {self.name!r} was freed")
        self._refs += 1

    def release(self) -> None:
        """An owner drops its reference; the last one frees the program."""
        self._refs -= 1
        if not self._refs:
            self.vmprog.close()

    @property
    def freed(self) -> bool:
        """True once nothing holds the program any more."""
        return not self._refs

    @property
    def refs(self) -> int:
        """How many fds, perf events and links hold the program."""
        return self._refs

    def close(self) -> None:
        """Close the program's fd; attachments keep it alive."""
        if self._fd_open:
            self._fd_open = False
            self.release()

    @property
    def closed(self) -> bool:
        """True once the fd is closed."""
        return not self._fd_open

    # -- running --------------------------------------------------------------

    def run(self, ctx: bytes | bytearray | None = None, *, context: RunContext | None = None,
            ctx_offset: int = 0, writable: bool = False) -> int:
        """Run once on ``ctx`` (what a hook does); returns ``r0``.

        :raises BpfmuxError: the program was freed (a use-after-free in the
            emulated kernel is a bug this check exists to catch).
        """
        self._count_run()
        return self.vmprog.run(ctx, context=context, ctx_offset=ctx_offset, ctx_writable=writable).r0

    def _count_run(self) -> None:
        if not self._refs:
            raise BpfmuxError(f"program {self.name!r} ran after it was freed")
        self.runs += 1

    def run_tracing(self, frame: bytearray, info: CallInfo) -> int:
        """Run from a trampoline (``ctx`` is the frame at ``info.slot``; on the frame's mapping when the
        trampoline mapped it).

        :raises BpfmuxError: the program was freed.
        """
        if info.base:
            self._count_run()
            return self._entry(info.base + 8 * info.slot, info)
        return self.run(frame, context=RunContext(tracing=info, cookie=info.cookie), ctx_offset=8 * info.slot)

    def test_run(self, ctx: bytes | None = None, data_in: bytes | None = None, repeat: int = 1, *,
                 context: RunContext | None = None) -> api.TestRunResult:
        """Run as ``BPF_PROG_TEST_RUN`` does (:meth:`bpfmux.api.Program.test_run`):
        fentry/fexit/fmod_ret programs through the kernel's test functions,
        other programs once on ``ctx`` (``context`` sets the run's task,
        cookie, … for helpers). ``ctx_out`` is the context after the run for
        the program types whose context the kernel copies back.

        :raises NotSupportedError: a packet (``data_in``) run: the emulator
            models no network stack.
        :raises BpfError: ``EINVAL`` a tracing program of an attach type
            test runs do not support.
        """
        if data_in is not None:
            raise NotSupportedError("test runs with packet data in the emulated kernel",
                                    f"{self.name}: the emulated kernel models no network stack")
        if self.prog_type == ProgType.TRACING and self.attach_type != AttachType.TRACE_RAW_TP:
            return api.TestRunResult(self.kernel.test_run_tracing(self) & M32)
        buf = bytearray(ctx) if ctx is not None else None
        res = self.vmprog.run(buf, context=context)
        copied = self.prog_type not in (ProgType.SYSCALL, ProgType.RAW_TRACEPOINT, ProgType.TRACING)
        return api.TestRunResult(res.r0 & M32, 0, b"", bytes(res.ctx or b"") if copied else b"")

    # -- attaching --------------------------------------------------------------

    @property
    def is_multi(self) -> bool:
        """A tracing program meant for a multi link (seed or mainline ABI)."""
        return self.prog_type == ProgType.TRACING and (
            ProgFlags.MULTI_FUNC in self.flags
            or self.attach_type in (AttachType.TRACE_FENTRY_MULTI, AttachType.TRACE_FEXIT_MULTI,
                                    AttachType.TRACE_FSESSION_MULTI)
        )

    def _linker(self) -> Linker:
        return self.kernel.linker

    def __repr__(self) -> str:
        return f"<EmulatedProgram {self.name!r} {self.prog_type.name.lower()} refs={self._refs}>"


class EmulatedCollection(api.Collection):
    """Everything loaded from one object into an emulator.

    :ivar programs: name → :class:`EmulatedProgram`.
    :ivar maps: name → emulated map (global data by section name, as a
        :class:`DataSection`).
    """


class DataSection(api.Map):
    """A global-data map (``.data``, ``.rodata``, ``.bss``, …) of an emulated
    object, viewed as ``{variable: value}`` through the object's BTF.

    ``sec["counter"]`` reads a variable, ``sec["counter"] = 5`` writes it
    (``.rodata`` is frozen: ``PermissionError``); ``raw()`` is the section's
    bytes; iteration and ``len()`` go over the variables (index 0 alone when
    the object has no BTF for the section), as the live kernel's
    ``DataSecMap``; everything else (``fd``, ``close``, ``type`` …) is the
    underlying map's.
    """

    def __init__(self, mp: ArrayMap, btf: Btf | None, section: str) -> None:
        self.map = mp
        self.name = mp.name or section
        self.variables: dict[str, tuple[int, int, Any]] = datasec_variables(btf, section)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.map, name)

    # -- the Map contract, through the underlying map -------------------------------

    @property
    def fd(self) -> int:
        """The underlying map's fd.

        :raises BpfError: ``EBADF`` once closed.
        """
        return self.map.fd

    def close(self) -> None:
        """Close the underlying map (idempotent)."""
        self.map.close()

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self.map.closed

    def lookup_raw(self, key: Any) -> bytes | None:
        """The underlying map's raw value (the whole section at index 0)."""
        return self.map.lookup_raw(key)

    def raw_items(self) -> list[tuple[bytes, bytes]]:
        """The underlying map's raw items."""
        return self.map.raw_items()

    def __iter__(self) -> Iterator[Any]:
        return iter(self.variables) if self.variables else iter(range(1))

    def __len__(self) -> int:
        return len(self.variables) if self.variables else 1

    def __delitem__(self, key: str | int) -> None:
        """Nothing can be deleted from global data.

        :raises BpfError: ``EINVAL``, the kernel's answer for an array element.
        """
        del self.map[key if isinstance(key, int) else 0]

    def raw(self) -> bytes:
        """The whole section."""
        return bytes(self.map.storage[0][: self.map.value_size])

    def write_raw(self, data: bytes) -> None:
        """Overwrite the whole section.

        :raises PermissionError: the section is frozen (``.rodata``).
        """
        self.map[0] = data

    def _var(self, name: str) -> tuple[int, int, Any]:
        from ...errors import NotFoundError

        if name not in self.variables:
            raise NotFoundError("variable", f"{self.name}.{name}", f"variables: {', '.join(sorted(self.variables))}")
        return self.variables[name]

    def __getitem__(self, key: str | int) -> Any:
        if isinstance(key, int):
            return self.map[key]
        off, size, codec = self._var(key)
        return codec.decode(self.raw()[off : off + size])

    def __setitem__(self, key: str | int, value: Any) -> None:
        if isinstance(key, int):
            self.map[key] = value
            return
        off, size, codec = self._var(key)
        data = bytearray(self.raw())
        data[off : off + size] = codec.encode(value)
        self.write_raw(bytes(data))

    def __contains__(self, key: object) -> bool:
        return key in self.variables

    def keys(self) -> list[str]:  # type: ignore[override]  # a snapshot list, as the live DataSecMap's
        """Variable names."""
        return list(self.variables)

    def items(self) -> list[tuple[str, Any]]:  # type: ignore[override]  # a snapshot list, as the live DataSecMap's
        """``(variable, value)`` pairs."""
        return [(k, self[k]) for k in self.variables]

    def values(self) -> list[Any]:  # type: ignore[override]  # a snapshot list, as the live DataSecMap's
        """Every variable's value."""
        return [v for _, v in self.items()]

    def __repr__(self) -> str:
        return f"<DataSection {self.name!r} {', '.join(self.variables)}>"
