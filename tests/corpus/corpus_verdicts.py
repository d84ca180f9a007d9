"""Each corpus program's verdict on a kernel: loaded, rejected by the
verifier (with its errno), or no verdict (the kernel lacks what the program
needs)."""

from __future__ import annotations

from typing import Any

from corpus_harness import configured_spec
from corpus_tools import Settings, Tool

from bpfmux.errors import ENOTSUPP, BpfError, NotFoundError, NotSupportedError, VerifierError

ACCEPT, REJECT, NONE = "accept", "reject", "none"


def _verdict(err: BaseException) -> tuple[str, str]:
    import errno

    first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    if isinstance(err, VerifierError):
        if err.errno in (errno.ENOENT, errno.EPERM, errno.EOPNOTSUPP, ENOTSUPP):  # a symbol or kind the kernel lacks
            return NONE, first
        log = (err.log or "").strip().splitlines()
        tail = next((line for line in reversed(log) if line and not line.startswith(("processed", "verification"))),
                    first)
        return REJECT, f"{errno.errorcode.get(err.errno, str(err.errno))}: {tail}"
    if isinstance(err, NotSupportedError | NotFoundError):
        return NONE, first
    if isinstance(err, BpfError):
        return NONE, first
    return NONE, f"{type(err).__name__}: {first}"


def verdicts(kernel: Any, tool: Tool, settings: Settings) -> dict[str, tuple[str, str]]:
    """program → ``(verdict, detail)`` for every program of ``tool``'s object (each one named, so programs
    the tool leaves out are judged too), loaded partially with ``settings``."""
    spec = configured_spec(tool, settings)
    names = list(spec.programs)
    coll = kernel.load(spec, programs=names, partial=True)
    try:
        out = {n: (ACCEPT, "") for n in coll.programs}
        out.update({n: _verdict(e) for n, e in coll.failed.items()})
    finally:
        coll.close()
    return out


def _errno(verdict: str, detail: str) -> str:
    """The errno name of a rejection (its detail starts with it), else ``""``."""
    return detail.split(":", 1)[0] if verdict == REJECT else ""


def disagreements(kernel_v: dict[str, tuple[str, str]], emu_v: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Programs both kernels judged, where they differ (accept against reject, or rejections with different
    errnos): program → what each said."""
    out = {}
    for name, (kv, kd) in kernel_v.items():
        ev, ed = emu_v.get(name, (NONE, "not loaded"))
        if kv != NONE and ev != NONE and (kv != ev or _errno(kv, kd) != _errno(ev, ed)):
            out[name] = f"kernel {kv}{': ' + kd if kd else ''}; emulator {ev}{': ' + ed if ed else ''}"
    return out
