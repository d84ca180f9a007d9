"""Loaded programs of the live kernel.

:class:`LiveProgram` implements :class:`bpfmux.api.Program`: ``attach`` and
``attach_many`` go through the one dispatch of :mod:`bpfmux.attach` to the
live kernel's linker (:mod:`bpfmux.live.links`); ``test_run`` wraps
``BPF_PROG_TEST_RUN``. A program opened from a borrowed fd number
(:func:`from_id` owns its fd; ``LiveProgram(7, …)`` does not) works the same.

:func:`load_insns` loads a program from raw instructions (``list[Insn]`` or
bytes); :class:`~bpfmux.live.kernel.LiveKernel` uses it for ELF objects.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .. import api
from ..errors import BpfError
from ..isa.insn import Insn, encode
from ..uapi import AttachType, ProgFlags, ProgType
from . import sys as _sys

if TYPE_CHECKING:  # pragma: no cover
    from ..attach import Linker
    from ..obj.spec import ProgramSpec


class LiveProgram(api.Program):
    """A program loaded into the running kernel.

    :ivar fd_obj: the owned :class:`~bpfmux.live.sys.Fd` (or a borrowed fd
        number, which :meth:`close` leaves open).
    :ivar log: the verifier log when one was asked for.
    (``name``, ``section``, ``prog_type``, ``attach_type``, ``attach_target``,
    ``flags`` and ``spec`` as :class:`bpfmux.api.Program` says.)
    """

    def __init__(self, fd: _sys.Fd | int, *, name: str, prog_type: ProgType | int, section: str = "",
                 attach_type: AttachType | int | None = None, attach_target: str | None = None,
                 flags: ProgFlags | int = 0, spec: ProgramSpec | None = None, log: str = "") -> None:
        self.fd_obj = fd
        self.name = name
        self.section = section
        self.prog_type = ProgType(prog_type)
        self.attach_type = AttachType(attach_type) if attach_type is not None else None
        self.attach_target = attach_target
        self.flags = ProgFlags(flags)
        self.spec = spec
        self.log = log
        self._id: int | None = None

    # --- resource ------------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The program fd number.

        :raises BpfError: ``EBADF`` once closed.
        """
        return self.fd_obj.fd if isinstance(self.fd_obj, _sys.Fd) else self.fd_obj

    def close(self) -> None:
        """Close the program fd if owned (attached links keep the program alive)."""
        if isinstance(self.fd_obj, _sys.Fd):
            self.fd_obj.close()

    @property
    def closed(self) -> bool:
        """True once closed (a borrowed fd number never is)."""
        return isinstance(self.fd_obj, _sys.Fd) and self.fd_obj.closed

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"id={self.id}"
        return f"<{type(self).__name__} {self.name!r} {self.prog_type.name.lower()} {state}>"

    # --- kernel facts ------------------------------------------------------------------

    @property
    def id(self) -> int:
        """The kernel's program id.

        :raises BpfError: closed.
        """
        if self._id is None:
            self._id = _sys.prog_info(self.fd).id
        return self._id

    def info(self) -> _sys.ProgInfo:
        """Fresh ``bpf_prog_info`` (tag, run counts with stats enabled, …).

        :raises BpfError: closed.
        """
        return _sys.prog_info(self.fd)

    @property
    def tag(self) -> str:
        """The program tag (hex), as bpftool shows it.

        :raises BpfError: closed.
        """
        return bytes(self.info().tag).hex()

    def pin(self, path: str) -> None:
        """Pin the program in bpffs.

        :raises BpfError: ``EEXIST`` taken, ``EPERM`` not on bpffs.
        """
        _sys.obj_pin(self.fd, path)

    # --- running and attaching ----------------------------------------------------------

    def test_run(self, ctx: bytes | None = None, data_in: bytes | None = None, repeat: int = 1, *,
                 data_size_out: int | None = None, ctx_size_out: int | None = None, flags: int = 0,
                 cpu: int = 0) -> api.TestRunResult:
        """Run the program with ``BPF_PROG_TEST_RUN`` (see
        :meth:`bpfmux.api.Program.test_run`). Output buffers default to the
        input sizes.

        :raises BpfError: the program type cannot be test run (``ENOTSUPP``,
            ``EINVAL`` with a hint).
        """
        no_ctx_out = self.prog_type in (ProgType.SYSCALL, ProgType.RAW_TRACEPOINT, ProgType.TRACING)
        if data_size_out is None:
            data_size_out = len(data_in) + 256 if data_in else 0
        if ctx_size_out is None:
            ctx_size_out = len(ctx) if ctx and not no_ctx_out else 0
        res = _sys.prog_test_run(self.fd, data_in=data_in, data_size_out=data_size_out, ctx_in=ctx,
                                 ctx_size_out=ctx_size_out, repeat=0 if no_ctx_out else repeat, flags=flags, cpu=cpu)
        return api.TestRunResult(res.retval, res.duration_ns, res.data_out, res.ctx_out)

    def _linker(self) -> Linker:
        from .links import LINKER

        return LINKER


_FUNC_INFO = struct.Struct("<II")
_LINE_INFO = struct.Struct("<IIII")


def pack_func_info(records: Iterable[tuple[int, int]]) -> bytes:
    """``struct bpf_func_info`` records (insn_off in slots, type_id)."""
    return b"".join(_FUNC_INFO.pack(*r) for r in records)


def pack_line_info(records: Iterable[tuple[int, int, int, int]]) -> bytes:
    """``struct bpf_line_info`` records."""
    return b"".join(_LINE_INFO.pack(*r) for r in records)


def load_insns(insns: Sequence[Insn] | bytes, prog_type: ProgType | int, *, name: str = "", license: str = "GPL",
               expected_attach_type: AttachType | int | None = None, flags: ProgFlags | int = 0,
               attach_btf_id: int = 0, attach_btf_obj_fd: _sys.Fd | int | None = None,
               btf_fd: _sys.Fd | None = None, func_info: bytes = b"", line_info: bytes = b"",
               kern_version: int = 0, log_level: int = 0, section: str = "", attach_target: str | None = None,
               spec: ProgramSpec | None = None) -> LiveProgram:
    """Load a program from raw instructions.

    :raises VerifierError: rejected (the message shows the verifier's last
        lines, with source lines when ``line_info`` and BTF were given).
    :raises BpfError: any other refusal.
    """
    code = insns if isinstance(insns, bytes) else encode(list(insns))
    log: list[str] = []
    fd = _sys.prog_load(int(prog_type), code, license, name=name,
                        expected_attach_type=int(expected_attach_type or 0), prog_flags=int(flags),
                        kern_version=kern_version, prog_btf_fd=btf_fd if (func_info or line_info) else None,
                        func_info=func_info, line_info=line_info, attach_btf_id=attach_btf_id,
                        attach_btf_obj_fd=attach_btf_obj_fd, log_level=log_level,
                        log_out=log if log_level else None)
    with fd.close_on_error():
        return LiveProgram(fd, name=name, prog_type=prog_type, section=section, attach_type=expected_attach_type,
                           attach_target=attach_target, flags=flags, spec=spec, log="".join(log))


def from_id(prog_id: int) -> LiveProgram:
    """Open the program with kernel id ``prog_id``.

    :raises BpfError: ``ENOENT`` no such program.
    """
    fd = _sys.get_fd_by_id(_sys.ObjKind.PROG, prog_id)
    with fd.close_on_error():
        info = _sys.prog_info(fd)
        return LiveProgram(fd, name=info.name.decode(errors="replace"), prog_type=info.type)


__all__ = ["BpfError", "LiveProgram", "from_id", "load_insns", "pack_func_info", "pack_line_info"]
