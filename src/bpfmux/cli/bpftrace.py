"""``bpfmux bpftrace`` (also ``bpfmux bt``): run bpftrace scripts with bpftrace's own command line and output."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import IO, Any

from ._common import CliError, UsageError, ensure_root, ensure_tracefs, parse_command, user_input

DESCRIPTION = """\
Compile a bpftrace script (bpftrace 0.17's language) into BPF programs
without LLVM or a compiler, attach every probe list and wildcard as one
multi-attach, and print what bpftrace prints: printf output as it happens,
and the maps at exit (histogram bars, stats, JSON with -f json), so scripts
and the programs that parse bpftrace's output work unchanged.

usage like bpftrace's:
  bpfmux bpftrace [options] FILE [ARG ...]      a script file ('-' reads stdin); ARGs are $1, $2 ...
  bpfmux bpftrace [options] -e 'PROGRAM' [ARG ...]
  bpfmux bpftrace -l [PATTERN]                  list probes ('-lv' with tracepoint arguments)
"""

EPILOG = """\
examples:
  bpfmux bpftrace -e 'BEGIN { printf("hello world\\n"); }'
  bpfmux bpftrace -e 'tracepoint:syscalls:sys_enter_openat { printf("%s %s\\n", comm, str(args->filename)); }'
  bpfmux bpftrace -e 'tracepoint:raw_syscalls:sys_enter { @[comm] = count(); }'
  bpfmux bt opensnoop.bt                                          a script file
  bpfmux bpftrace -l 'tracepoint:syscalls:sys_enter_*'
  bpfmux bpftrace -e 't:syscalls:sys_enter_getpid { @ = count(); }' --emulate 'sys:getpid*3'
                                                                  the same on the emulated kernel, no root

Environment, as bpftrace's: BPFTRACE_STRLEN (64), BPFTRACE_MAP_KEYS_MAX (4096).

exit status: 0 after the script ran (also after Ctrl-C once the probes are
attached), 1 when the script does not compile (the error shows the line and a
caret) or a probe cannot be attached, 2 on bad usage, 130 on Ctrl-C before the
probes are attached. Needs root, except with --emulate and -d.
"""


def register(sub: Any) -> None:
    """Add ``bpftrace`` (alias ``bt``) to the subcommand parsers."""
    p = sub.add_parser("bpftrace", aliases=["bt"], help="run bpftrace scripts (bpftrace's command line and output)",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("args", nargs="*", metavar="FILE|ARG", help="script file (without -e) and positional parameters")
    p.add_argument("-e", dest="program", metavar="PROGRAM", help="the program text")
    p.add_argument("-l", dest="list", action="store_true", help="list probes (matching the first argument)")
    p.add_argument("-c", dest="command", metavar="CMD", help="run CMD, trace until it exits (cpid is its pid)")
    p.add_argument("-p", dest="pid", type=int, metavar="PID", help="uprobes only in PID; exit when it exits")
    p.add_argument("-f", dest="format", default="text", metavar="FORMAT", help="output format: text or json")
    p.add_argument("-o", dest="output", metavar="FILE", help="write output to FILE")
    p.add_argument("-q", dest="quiet", action="store_true", help="no 'Attaching N probes...' line")
    p.add_argument("-v", dest="verbose", action="count", default=0, help="verbose: how each probe is attached")
    p.add_argument("-d", dest="dry", action="count", default=0, help="dry run: print the programs, attach nothing")
    p.add_argument("-k", dest="helper_check", action="count", default=0,
                   help="warn when a map update or delete fails (-kk: reads too), at the place in the script")  # fmt: skip
    p.add_argument("-B", dest="buffering", default="line", metavar="MODE", help="output buffering: line, full, none")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="accepted for compatibility (types come from BTF)")  # fmt: skip
    p.add_argument("--include", dest="includes", action="append", default=[], metavar="FILE",
                   help="accepted for compatibility (types come from BTF)")  # fmt: skip
    p.add_argument("--unsafe", action="store_true", help="allow system() and signal()")
    p.add_argument("--no-warnings", action="store_true", help="do not print warnings")
    p.add_argument("-V", "--version", action="store_true", help="print the version")
    p.add_argument("--emulate", metavar="WORKLOAD",
                   help="run on the emulated kernel (no root), driven by WORKLOAD: a call-stream file or a spec "
                        "such as 'sys:openat*3,user:libc:strlen*2' (see bpfmux emulate --help)")  # fmt: skip
    p.add_argument("--policy", default="clone", choices=("clone", "filter", "per-function"),
                   help="--emulate: trampoline policy of the emulated kernel")  # fmt: skip
    p.set_defaults(func=run)


def _script(args: argparse.Namespace) -> tuple[str, str, list[str]]:
    """(program text, its name for errors, positional parameters).

    :raises UsageError: no program, or an unreadable file.
    """
    if args.program is not None:
        return args.program, "stdin", list(args.args)
    if not args.args:
        raise UsageError("filename or -e 'program' required")
    path, params = args.args[0], list(args.args[1:])
    if path == "-":
        return sys.stdin.read(), "stdin", params
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read(), path, params
    except OSError as e:
        raise UsageError(f"failed to open file '{path}': {e.strerror}") from None


def _check_usage(args: argparse.Namespace) -> None:
    """:raises UsageError: options that contradict each other or are malformed."""
    if args.command is not None and args.pid is not None:
        raise UsageError("cannot use both -c and -p")
    if args.verbose and args.dry:
        raise UsageError("use either -v or -d")
    if args.format not in ("text", "json"):
        raise UsageError(f"invalid output format \"{args.format}\"; valid formats: 'text', 'json'")
    if args.buffering not in ("line", "full", "none"):
        raise UsageError("-B must be either 'line', 'full', or 'none'")
    if args.pid is not None and args.pid <= 0:
        raise UsageError(f"-p needs a positive process id, not {args.pid}")
    if args.helper_check > 2:
        raise UsageError("-k may be given at most twice (-kk)")
    if args.command is not None:
        parse_command(args.command)
    if args.emulate is not None and (args.command is not None or args.pid is not None):
        raise UsageError("--emulate runs the emulated kernel's workload; -c and -p name real processes")


def _env_int(name: str, default: int) -> int:
    """:raises UsageError: the variable is set to something else than a positive integer."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v <= 0:
        raise UsageError(f"env var '{name}' did not contain a valid positive integer: {text!r}")
    return v


def _open_output(args: argparse.Namespace) -> IO[str]:
    buffering = {"line": 1, "full": -1, "none": 1}[args.buffering]
    if args.output:
        try:
            return open(args.output, "w", buffering=buffering, encoding="utf-8", errors="surrogateescape")
        except OSError as e:
            raise CliError(f"failed to open output file \"{args.output}\": {e.strerror}") from None
    try:
        sys.stdout.reconfigure(errors="surrogateescape", line_buffering=args.buffering != "full",  # type: ignore[union-attr]
                               write_through=args.buffering == "none")  # fmt: skip
    except (AttributeError, ValueError):
        pass
    return sys.stdout


def run(args: argparse.Namespace) -> int:
    """Run ``bpfmux bpftrace`` (errors are reported by the caller's guard).

    :raises UsageError: bad arguments.
    :raises ScriptError: the script does not compile (its message shows where).
    :raises CliError: not privileged, no such process.
    :raises BpfmuxError: a probe cannot be attached, the kernel refused a program.
    """
    if args.version:
        print("bpftrace v0.17.0 (bpfmux: bpftrace's language, compiled without LLVM)")
        return 0
    _check_usage(args)
    if args.list:
        return _list(args)
    from ..bpftrace.runtime import Options

    text, name, params = _script(args)
    opts = Options(params=params, unsafe=args.unsafe, json=args.format == "json", quiet=args.quiet, pid=args.pid,
                   has_child=args.command is not None, helper_check=args.helper_check,
                   strlen=min(_env_int("BPFTRACE_STRLEN", 64), 200),
                   map_keys_max=_env_int("BPFTRACE_MAP_KEYS_MAX", 4096))  # fmt: skip
    if args.emulate is not None:
        return _run_emulated(args, text, name, opts)
    if args.dry:
        return _dry_run(args, text, name, opts)
    if args.pid is not None and not os.path.exists(f"/proc/{args.pid}"):
        raise CliError(f"no process with pid {args.pid}")
    ensure_root("bpfmux bpftrace")
    ensure_tracefs(quiet=True)
    return _run_live(args, text, name, opts)


def _warn(args: argparse.Namespace, warnings: list[str]) -> None:
    if args.no_warnings:
        return
    for w in warnings:
        print(f"WARNING: {w}", file=sys.stderr)


def _dry_run(args: argparse.Namespace, text: str, name: str, opts: Any) -> int:
    """``-d``: compile on an emulated kernel's view of this machine and print the programs."""
    from ..bpftrace.runtime import compile_script
    from ..emu import Emulator
    from ..isa.disasm import disassemble

    with Emulator() as emu:
        script = compile_script(text, emu, opts, name=name)
        _warn(args, script.warnings)
        out = sys.stdout
        for p in script.programs:
            ctx = p.info.ctx
            out.write(f"; {ctx.attach.text}: {ctx.how} ({len(ctx.targets)} probe(s)), {p.prog_type.name.lower()}, "
                      f"{len(p.program.insns)} instructions, {p.scratch} bytes of scratch\n")  # fmt: skip
            out.write(disassemble(p.program.insns) + "\n")
    return 0


def _run_emulated(args: argparse.Namespace, text: str, name: str, opts: Any) -> int:
    from ..bpftrace.emulated import run_emulated
    from ..emu.kernel.replay import load_events

    with user_input("--emulate"):
        events = load_events(args.emulate)
    out = _open_output(args)
    try:
        run_emulated(text, events, options=opts, name=name, out=out, policy=args.policy,
                     maps_out=sys.stdout if out is not sys.stdout else None)  # fmt: skip
    finally:
        if out is not sys.stdout:
            out.close()
    return 0


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _run_live(args: argparse.Namespace, text: str, name: str, opts: Any) -> int:
    from ..bpftrace.runtime import Session, compile_script
    from ..live import LiveKernel

    out = _open_output(args)
    child = None
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    kernel = LiveKernel()
    session = None

    def on_sigint(signum: int, frame: Any) -> None:
        # Once the session exists, Ctrl-C asks it to stop, as bpftrace's flag does: it can arrive while the
        # probes attach or BEGIN's output prints, and the run still ends with END and the maps. Before, it aborts.
        if session is None:
            raise KeyboardInterrupt
        session.exit_requested = True

    # installed even when the shell started us with SIGINT ignored (a background job), as bpftrace does
    old_int = signal.signal(signal.SIGINT, on_sigint)
    try:
        if args.command:
            from ..trace.child import HeldChild

            child = HeldChild(args.command)
            opts.child_pid = child.pid
        try:
            script = compile_script(text, kernel, opts, name=name)
            _warn(args, script.warnings)
            session = Session(script, kernel, opts, out=out)
            session.start()
        except BaseException:
            if child is not None:
                child.abandon()
            raise
        if args.verbose:
            for line in session.mechanisms:
                print(f"bpfmux: {line}", file=sys.stderr)
        if child is not None:
            child.release()
        with _SignalWakeup() as wake_fd:
            _loop(session, child, args.pid, wake_fd)
        # as in bpftrace, a Ctrl-C only ends the tracing: one more while END runs and the maps print is ignored
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        session.finish()
        if args.verbose and child is not None and child.status is not None:
            print(f"Child exited with code: {child.status}", file=out)
        return 0
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
        try:
            if session is not None:
                session.close()
            if child is not None and child.poll() is None:
                _terminate(child)
        finally:
            kernel.close()
            if out is not sys.stdout:
                out.close()


def _terminate(child: Any) -> None:
    try:
        os.kill(child.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    for _ in range(50):
        if child.poll() is not None:
            return
        time.sleep(0.02)
    try:
        os.kill(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    child.wait()


class _SignalWakeup:
    """A pipe the interpreter writes a byte to when a signal arrives (``signal.set_wakeup_fd``): the
    event loop waits on its read end too, so Ctrl-C ends the wait at once rather than after the poll's
    timeout (the handler alone runs only after the wait is over). Entering yields the read end, or
    ``None`` off the main thread (where no wake-up fd can be set)."""

    def __init__(self) -> None:
        self._fds: tuple[int, int] | None = None
        self._old = -1

    def __enter__(self) -> int | None:
        r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            self._old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
        except ValueError:  # not the main thread
            os.close(r)
            os.close(w)
            return None
        self._fds = (r, w)
        return r

    def __exit__(self, *exc: object) -> None:
        if self._fds is None:
            return
        signal.set_wakeup_fd(self._old)
        for fd in self._fds:
            os.close(fd)
        self._fds = None


def _loop(session: Any, child: Any, pid: int | None, wake_fd: int | None = None) -> None:
    """Deliver events until exit(), Ctrl-C, the child's exit or the process's end."""
    try:
        while not session.exit_requested:
            session.poll(0.1, wake_fd)
            if child is not None and child.poll() is not None:
                session.drain()
                return
            if pid is not None and not os.path.exists(f"/proc/{pid}"):
                session.drain()
                return
            if time.monotonic() - getattr(session, "_lost_check", 0.0) > 1.0:
                session._lost_check = time.monotonic()
                session.report_lost()
    except KeyboardInterrupt:
        session.drain()


# -- listing -------------------------------------------------------------------------------------

def _list(args: argparse.Namespace) -> int:
    """``-l [PATTERN]``: every probe matching the pattern, sorted, as bpftrace lists them."""
    pattern = args.args[0] if args.args else "*:*"
    if pattern == "*":
        pattern = "*:*"
    if len(args.args) > 1:
        raise UsageError("-l takes at most one search pattern")
    from ..trace.listing import list_probes

    with user_input("-l"):
        rows = list_probes(pattern, verbose=args.verbose > 0)
    out = sys.stdout
    for name, details in rows:
        out.write(name + "\n")
        for d in details:
            out.write(f"    {d}\n")
    return 0

