"""What the live subcommands (``trace``, ``run``) share: the checks a
newcomer's machine fails first, each turned into one line that says what to do,
and duration parsing."""

from __future__ import annotations

import errno
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from ..errors import BpfError, BpfmuxError, NotFoundError, NotSupportedError, ParseError, VerifierError

__all__ = ["CliError", "ensure_root", "ensure_tracefs", "error_line", "parse_duration", "run_guarded"]

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def run_guarded(impl: Callable[[Any], int], args: Any) -> int:
    """Run a subcommand's body; any error becomes one line on stderr (exit 1).

    ``--debug`` adds the traceback and a verifier log; Ctrl-C exits 130, a
    closed pipe 0. A command line must not show a newcomer a traceback, so
    this catches every exception, not only ours.
    """
    try:
        return impl(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:
        if getattr(args, "debug", False):
            import traceback

            traceback.print_exc()
            if getattr(e, "log", ""):
                print(e.log, file=sys.stderr)  # type: ignore[attr-defined]  # checked by the getattr above
        print(error_line(e), file=sys.stderr)
        return 1


class CliError(BpfmuxError):
    """An error whose message is already the one line to print."""


def parse_duration(text: str) -> int:
    """``"10us"``, ``"2ms"``, ``"1s"``, ``"500"`` (ns) → nanoseconds.

    :raises ParseError: not a number with an optional unit.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ns|us|ms|s)?\s*", text)
    if not m:
        raise ParseError(f"bad duration {text!r}; write e.g. 500ns, 10us, 2ms or 1s")
    return int(float(m.group(1)) * _UNITS[m.group(2) or "ns"])


def ensure_root(what: str) -> None:
    """:raises CliError: not root."""
    if os.geteuid() != 0:
        raise CliError(f"{what} needs root (CAP_BPF and CAP_PERFMON) to load BPF programs; run it with sudo")


def _tracefs_mounted() -> bool:
    return any(os.path.isdir(os.path.join(p, "events")) for p in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"))


def ensure_tracefs(quiet: bool = False) -> None:
    """Mount tracefs at /sys/kernel/tracing when it is missing (we are root),
    and say so on stderr.

    :raises CliError: it is not mounted and mounting failed.
    """
    if _tracefs_mounted():
        return
    import subprocess

    target = "/sys/kernel/tracing"
    try:
        r = subprocess.run(["mount", "-t", "tracefs", "nodev", target], capture_output=True, text=True, check=False)
        ok = r.returncode == 0 and _tracefs_mounted()
        why = r.stderr.strip()
    except OSError as e:
        ok, why = False, str(e)
    if not ok:
        raise CliError(f"tracefs is not mounted and mounting it failed ({why or 'unknown reason'}); "
                       f"run 'mount -t tracefs nodev {target}' as root")  # fmt: skip
    if not quiet:
        print(f"bpfmux: tracefs was not mounted; mounted it on {target}", file=sys.stderr)


def error_line(err: BaseException) -> str:
    """The one line printed for an error (no traceback)."""
    if isinstance(err, CliError):
        return f"bpfmux: error: {err}"
    if isinstance(err, NotSupportedError):
        return f"bpfmux: not supported: {err}"
    if isinstance(err, NotFoundError):
        return f"bpfmux: not found: {err}"
    if isinstance(err, ParseError):
        return f"bpfmux: error: {err}"
    if isinstance(err, VerifierError):
        first = str(err).splitlines()[0]
        return (f"bpfmux: the kernel's verifier rejected a program: {first} "
                "(run with --debug for the verifier log)")  # fmt: skip
    if isinstance(err, BpfError) and err.errno in (errno.EPERM, errno.EACCES):
        return f"bpfmux: permission denied: {err}; run as root (sudo)"
    if isinstance(err, BpfmuxError | OSError):
        return f"bpfmux: error: {err}"
    return f"bpfmux: internal error: {type(err).__name__}: {err} (run with --debug for the traceback and report it)"
