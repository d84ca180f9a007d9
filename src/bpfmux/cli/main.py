"""Entry point of the ``bpfmux`` command line.

Each subcommand lives in its own module under :mod:`bpfmux.cli` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a
callable taking the parsed arguments and returning an exit status. Every
parser is a :class:`~bpfmux.cli._common.CommandParser` (so every subcommand
has ``--debug``), and :func:`main` runs the subcommand through
:func:`~bpfmux.cli._common.run_guarded`, the one error path: a subcommand
raises, it never prints its own error line.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading

from ._common import EXIT_USAGE, CommandParser, run_guarded

#: Subcommand modules, in the order ``--help`` lists them.
SUBCOMMANDS = [
    "btf",
    "conformance",
    "features",
    "objdump",
    "trace",
    "bpftrace",
    "run",
    "emulate",
    "study",
]

#: other names of subcommands (``bpfmux bt`` is ``bpfmux bpftrace``)
ALIASES = {"bt": "bpftrace"}


EPILOG = """\
examples:
  sudo bpfmux trace 'tracepoint:syscalls:sys_enter_*'        live table of syscall counts
  sudo bpfmux trace 'uprobe:libc:str*' --latency -c 'ls /'   latency histograms of one command
  sudo bpfmux run examples/objects/syscount.bpf.o -d 2       load an object, attach, dump its maps
  bpfmux COMMAND --help                                      each command's options and examples

exit status: 0 on success, 1 on an error (one line on stderr; --debug adds the
traceback), 2 on bad usage (a malformed option, probe spec or duration),
130 when interrupted before there was anything to report (Ctrl-C).
"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the top-level parser with every available subcommand (or just
    ``only``, so running one subcommand does not import the others).

    :raises ImportError: a subcommand's module cannot be imported.
    """
    parser = CommandParser(
        prog="bpfmux",
        description="Multi-attach eBPF toolkit: trace with many programs per hook and one program on many functions.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS if only is None else [only]:
        module = importlib.import_module(f"{__package__}.{name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Parsing and the subcommand both run inside
    :func:`~bpfmux.cli._common.run_guarded`: an error is one line on stderr
    (status 1, or 2 for bad usage), Ctrl-C exits 130 after cleanup and a
    closed pipe 0.

    :raises SystemExit: ``--help`` (status 0) or a usage error argparse
        detects (status 2), as argparse does.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    _take_sigint()
    return run_guarded(lambda args: _dispatch(argv, args), argparse.Namespace())


def _take_sigint() -> None:
    """Make SIGINT end every subcommand (Ctrl-C, or ``kill -INT``), even when it
    was inherited ignored: a shell starts a script's background jobs
    (``bpfmux trace … &``) with SIGINT ignored, and Python then leaves it so,
    which would leave ``kill -INT`` no way to stop the command and print its
    results. Only the main thread can set a handler; elsewhere (``main()``
    called from a thread) the caller's handling stays."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _dispatch(argv: list[str], args: argparse.Namespace) -> int:
    """Parse ``argv`` into ``args`` (which the guard reads ``--debug`` from) and
    run the subcommand."""
    first = ALIASES.get(argv[0], argv[0]) if argv else None
    parser = build_parser(first if first in SUBCOMMANDS else None)
    parser.parse_args(argv, namespace=args)
    if first is not None:
        _ran.append(first)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    return args.func(args)


#: subcommands that close every file, fd, link and map they open before returning (also on errors), so the
#: interpreter's teardown has nothing left to do that the kernel does not do at exit (see :func:`entry`)
EXIT_WITHOUT_TEARDOWN = frozenset({"bpftrace"})

_ran: list[str] = []


def entry() -> None:
    """The ``bpfmux`` executable: :func:`main`, then the process exits.

    After a subcommand of :data:`EXIT_WITHOUT_TEARDOWN`, once its output is
    flushed and the ``atexit`` functions have run, the process exits without
    the interpreter's teardown (with this many modules loaded, tens of
    milliseconds of destroying objects, which a tracer's user waits for
    after Ctrl-C); the kernel releases what is left. Other subcommands, or
    when a non-daemon thread is still running, exit the usual way.

    :raises SystemExit: the usual exit, with the command's status.
    """
    status = main()
    if not (_ran and _ran[-1] in EXIT_WITHOUT_TEARDOWN) or any(
            not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):  # fmt: skip
        sys.exit(status)
    import atexit

    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader went away: nothing more to say (as run_guarded treats it)
        pass
    except OSError:
        sys.exit(status or 1)  # the interpreter reports it
    os._exit(status)


if __name__ == "__main__":
    entry()
