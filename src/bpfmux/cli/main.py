"""Entry point of the ``bpfmux`` command line.

Each subcommand lives in its own module under :mod:`bpfmux.cli` and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a
callable taking the parsed arguments and returning an exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import BpfmuxError

#: Subcommand modules, in the order ``--help`` lists them.
SUBCOMMANDS = [
    "btf",
    "conformance",
    "features",
    "objdump",
    "trace",
    "run",
    "emulate",
]


EPILOG = """\
examples:
  sudo bpfmux trace 'tracepoint:syscalls:sys_enter_*'        live table of syscall counts
  sudo bpfmux trace 'uprobe:libc:str*' --latency -c 'ls /'   latency histograms of one command
  sudo bpfmux run examples/objects/syscount.bpf.o -d 2       load an object, attach, dump its maps
  bpfmux COMMAND --help                                      each command's options and examples
"""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the top-level parser with every available subcommand (or just
    ``only``, so running one subcommand does not import the others)."""
    parser = argparse.ArgumentParser(
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

    Errors bpfmux raises on purpose are printed as one line without a
    traceback; Ctrl-C exits with status 130 after cleanup.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv[0] if argv and argv[0] in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except (BpfmuxError, OSError) as err:
        print(f"bpfmux: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
