"""What every subcommand shares: the one error path (:func:`run_guarded`,
:func:`error_line`, the exit statuses), the options every parser has
(``--debug``), the checks a newcomer's machine fails first, each turned into
one line that says what to do, and duration parsing."""

from __future__ import annotations

import argparse
import errno
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from ..errors import BpfError, BpfmuxError, NotFoundError, NotSupportedError, ParseError, VerifierError
from ..record import Frozen
from ..record import set_field as _set

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_STATUS_HELP",
    "EXIT_USAGE",
    "CliError",
    "CommandParser",
    "Privileges",
    "UsageError",
    "console",
    "ensure_root",
    "ensure_tracefs",
    "error_line",
    "parse_command",
    "parse_duration",
    "parse_size",
    "privilege_problem",
    "read_privileges",
    "run_guarded",
    "user_input",
]

#: Exit statuses of every subcommand.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

#: The sentence the epilogs use for the statuses above.
EXIT_STATUS_HELP = "exit status: 0 on success, 1 on an error, 2 on bad usage, 130 after Ctrl-C."

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}

# capability numbers (linux/capability.h)
_CAP_SYS_ADMIN = 21
_CAP_PERFMON = 38
_CAP_BPF = 39


class CliError(BpfmuxError):
    """An error whose message is already the one line to print (exit status 1)."""


class UsageError(CliError):
    """Something the user typed is malformed or contradictory (exit status 2).

    Raised for command-line arguments only; a malformed input *file* is a
    :class:`~bpfmux.errors.ParseError` and exits 1.
    """


class CommandParser(argparse.ArgumentParser):
    """The parser of ``bpfmux`` and of each subcommand (``add_subparsers``
    makes every subcommand's parser one of these too).

    Every parser gets ``--debug``, and a usage error argparse detects becomes
    the same one line (exit status 2) as one the subcommand detects.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # SUPPRESS: a subcommand's parser must not reset a --debug given before it ("bpfmux --debug trace")
        self.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                          help="on an error, also show the traceback (and the verifier log)")  # fmt: skip
        self.set_defaults(help_prog=self.prog)

    def error(self, message: str) -> NoReturn:
        """Print ``message`` as the one error line and exit with status 2.

        :raises SystemExit: always, with status 2.
        """
        print(error_line(UsageError(message), self.prog), file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def run_guarded(impl: Callable[[Any], int | None], args: Any) -> int:
    """Run a subcommand's body: every error becomes one line on stderr.

    The status is what ``impl`` returns (``None`` counts as 0), 2 for a
    :class:`UsageError`, 1 for any other error, 130 after Ctrl-C and 0 when
    the reader of stdout went away (``bpfmux … | head``). ``args.debug``
    adds the traceback and a verifier log. A command line must not show a
    newcomer a traceback, so this catches every exception, not only ours.

    :param args: the parsed arguments (an ``argparse.Namespace``); it may be
        filled in by ``impl`` itself, so ``debug`` is read only on an error.
    :raises SystemExit: argparse's exit (``--help``, a usage error), passed on.
    """
    try:
        status = int(impl(args) or 0)
        sys.stdout.flush()  # a closed pipe or a full disk shows here, not at interpreter exit
        return status
    except KeyboardInterrupt:
        _settle_stdout()
        return EXIT_INTERRUPTED
    except SystemExit:  # --help, or a usage error argparse found: argparse's own exit
        _settle_stdout()
        raise
    except BrokenPipeError:
        _detach_stdout()
        return EXIT_OK
    except Exception as e:
        if getattr(args, "debug", False):
            import traceback

            traceback.print_exc()
            log = getattr(e, "log", "")  # a verifier rejection's log
            if log:
                print(log, file=sys.stderr)
        print(error_line(e, getattr(args, "help_prog", None)), file=sys.stderr)
        _settle_stdout()
        return EXIT_USAGE if isinstance(e, UsageError) else EXIT_FAILURE


def _detach_stdout() -> None:
    """Point stdout at /dev/null so flushing what is left at exit cannot fail again."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(fd, sys.stdout.fileno())
        finally:
            os.close(fd)
    except (OSError, ValueError):  # no real file descriptor (captured in tests): nothing will be flushed to one
        pass


def _settle_stdout() -> None:
    """Flush stdout now; if that fails (or is interrupted), drop what is left."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError, KeyboardInterrupt):
        _detach_stdout()


def console() -> Any:
    """A rich console on stdout whose closed pipe ends the command like any
    other output's (status 0), instead of rich's own exit with status 1."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            _detach_stdout()
            raise BrokenPipeError

    return _Console()


@contextmanager
def user_input(option: str | None = None) -> Iterator[None]:
    """Parse errors raised inside come from what the user typed on the command
    line: turn them into :class:`UsageError` (exit status 2).

    Use it only around parsing of arguments, never of input files.

    :param option: the option the text came from (``"--workload"``), put in
        front of the message.
    :raises UsageError: a :class:`~bpfmux.errors.ParseError` was raised.
    """
    try:
        yield
    except ParseError as e:
        where = option or e.source  # an offset into a command-line argument helps nobody: leave it out
        raise UsageError(f"{where}: {e.message}" if where else e.message) from e


def parse_duration(text: str) -> int:
    """``"10us"``, ``"2ms"``, ``"1s"``, ``"500"`` (ns) → nanoseconds.

    :raises ParseError: not a number with an optional unit.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ns|us|ms|s)?\s*", text)
    if not m:
        raise ParseError(f"bad duration {text!r}; write e.g. 500ns, 10us, 2ms or 1s")
    return int(float(m.group(1)) * _UNITS[m.group(2) or "ns"])


_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """``"512M"``, ``"4G"``, ``"1.5GiB"``, ``"65536"`` (bytes) → bytes (units are powers of 1024).

    :raises ParseError: not a positive size.
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMgGtT]?)(?:i?[bB])?\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise ParseError(f"bad size {text!r}; write e.g. 512M, 4G or a number of bytes")
    return int(float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()])


def parse_command(text: str) -> list[str]:
    """Split ``-c CMD`` as a shell would (quotes, no expansion).

    :raises UsageError: empty, or an unclosed quote.
    """
    import shlex

    try:
        argv = shlex.split(text)
    except ValueError as e:
        raise UsageError(f"-c {text!r}: {str(e).lower()}; quote the command as in a shell") from None
    if not argv:
        raise UsageError("-c needs a command, e.g. -c 'ls /tmp'")
    return argv


# --- privileges ---------------------------------------------------------------------------------------


class Privileges(Frozen):
    """What decides whether this process may load tracing programs.

    :ivar euid: effective user id.
    :ivar caps: effective capability mask (``CapEff`` of /proc/self/status).
    :ivar unprivileged_bpf_disabled: ``kernel.unprivileged_bpf_disabled``
        (``None`` when it cannot be read).
    :ivar lockdown: the kernel lockdown mode in force (``"integrity"``,
        ``"confidentiality"``), ``None`` when none or unknown.
    :ivar seccomp: ``Seccomp`` of /proc/self/status (2: a filter is active).
    """

    __slots__ = ("euid", "caps", "unprivileged_bpf_disabled", "lockdown", "seccomp")

    euid: int
    caps: int
    unprivileged_bpf_disabled: int | None
    lockdown: str | None
    seccomp: int

    def __init__(
        self,
        euid: int,
        caps: int,
        unprivileged_bpf_disabled: int | None = None,
        lockdown: str | None = None,
        seccomp: int = 0,
    ) -> None:
        _set(self, "euid", euid)
        _set(self, "caps", caps)
        _set(self, "unprivileged_bpf_disabled", unprivileged_bpf_disabled)
        _set(self, "lockdown", lockdown)
        _set(self, "seccomp", seccomp)

    def has(self, cap: int) -> bool:
        """Whether capability number ``cap`` is effective."""
        return bool(self.caps >> cap & 1)

    @property
    def missing(self) -> list[str]:
        """The capabilities tracing needs that this process lacks
        (CAP_SYS_ADMIN stands in for both, as in the kernel)."""
        if self.has(_CAP_SYS_ADMIN):
            return []
        return [name for cap, name in ((_CAP_BPF, "CAP_BPF"), (_CAP_PERFMON, "CAP_PERFMON")) if not self.has(cap)]


def _read(path: str) -> str | None:
    from ..host.files import MiB, read_text

    try:
        return read_text(path, MiB, "file", encoding="ascii", errors="replace")
    except (OSError, ParseError):
        return None


def read_privileges() -> Privileges:
    """This process's :class:`Privileges` (unreadable facts count as absent)."""
    status = _read("/proc/self/status") or ""
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    try:
        caps = int(fields.get("CapEff", "0").strip(), 16)
    except ValueError:
        caps = 0
    try:
        seccomp = int(fields.get("Seccomp", "0").strip())
    except ValueError:
        seccomp = 0
    text = (_read("/proc/sys/kernel/unprivileged_bpf_disabled") or "").strip()
    unpriv = int(text) if text.isdigit() else None
    m = re.search(r"\[(\w+)\]", _read("/sys/kernel/security/lockdown") or "")
    lockdown = m.group(1) if m and m.group(1) != "none" else None
    return Privileges(os.geteuid(), caps, unpriv, lockdown, seccomp)


def _and(names: list[str]) -> str:
    return " and ".join(names)


def privilege_problem(priv: Privileges | None = None) -> str | None:
    """What keeps this process from loading tracing programs, as the end of a
    sentence that says what to do; ``None`` when it has the capabilities.

    :param priv: the facts to judge (default: :func:`read_privileges`).
    """
    p = read_privileges() if priv is None else priv
    missing = p.missing
    if not missing:
        return None
    if p.euid == 0:
        return (
            f"this process runs as root but without {_and(missing)} (nor CAP_SYS_ADMIN), as in a container "
            f"or under a wrapper that drops capabilities; grant {'them' if len(missing) > 1 else 'it'} "
            f"(e.g. docker run --cap-add {' --cap-add '.join(n[4:] for n in missing)})"
        )
    why = f"user {p.euid} lacks {_and(missing)}"
    if p.unprivileged_bpf_disabled:
        why += (f", and kernel.unprivileged_bpf_disabled={p.unprivileged_bpf_disabled} forbids bpf(2) to "
                "unprivileged users")  # fmt: skip
    return f"{why}; run it as root (sudo)"


def ensure_root(what: str) -> None:
    """Check that this process may load and attach tracing programs.

    :param what: the command, for the message (``"bpfmux trace"``).
    :raises CliError: it lacks CAP_BPF or CAP_PERFMON (and CAP_SYS_ADMIN);
        the message says why (not root; root in a container) and what to do.
    """
    p = read_privileges()
    problem = privilege_problem(p)
    if problem is None:
        return
    needs = "root (CAP_BPF and CAP_PERFMON)" if p.euid != 0 else "CAP_BPF and CAP_PERFMON"
    raise CliError(f"{what} needs {needs} to load BPF programs; {problem}")


def _denied_anyway(p: Privileges) -> str:
    """Why the kernel refuses a process that has the capabilities."""
    if p.lockdown:
        return f"the kernel is locked down ({p.lockdown}), which forbids some BPF programs and helpers"
    if p.seccomp == 2:
        return "a seccomp filter is active on this process and may forbid bpf(2) or perf_event_open(2)"
    return "a security module (SELinux, AppArmor, a BPF LSM) may have refused it"


def _permission_hint() -> str:
    p = read_privileges()
    problem = privilege_problem(p)
    if problem is not None:
        return problem
    return f"this process has CAP_BPF and CAP_PERFMON, so {_denied_anyway(p)}"


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


def _one_line(text: str) -> str:
    return "; ".join(part.strip() for part in text.splitlines() if part.strip())


def error_line(err: BaseException, prog: str | None = None) -> str:
    """The one line printed for an error (no traceback); the only place that
    formats it. A script error (one with an ``excerpt``) adds the script's line
    and a caret under the construct.

    :param prog: the command whose ``--help`` a usage error points to
        (``"bpfmux trace"``).
    """
    if isinstance(err, UsageError):
        hint = f" (see '{prog} --help')" if prog else ""
        return f"bpfmux: error: {_one_line(str(err))}{hint}"
    if isinstance(err, VerifierError):
        first = str(err).splitlines()[0]
        return (f"bpfmux: the kernel's verifier rejected a program: {first} "
                "(run with --debug for the verifier log)")  # fmt: skip
    if isinstance(err, CliError | ParseError):
        excerpt = getattr(err, "excerpt", "")
        if isinstance(excerpt, str) and excerpt:  # a script error: its line, with a caret under the construct
            return f"bpfmux: error: {_one_line(str(err))}\n{excerpt}"
        text = f"bpfmux: error: {err}"
    elif isinstance(err, NotSupportedError):
        text = f"bpfmux: not supported: {err}"
    elif isinstance(err, NotFoundError):
        text = f"bpfmux: not found: {err}"
    elif isinstance(err, BpfError) and err.errno in (errno.EPERM, errno.EACCES):
        text = f"bpfmux: permission denied: {err}; {_permission_hint()}"
    elif isinstance(err, BpfmuxError | OSError):
        text = f"bpfmux: error: {err}"
    else:
        text = f"bpfmux: internal error: {type(err).__name__}: {err} (run with --debug for the traceback and report it)"
    return _one_line(text)
