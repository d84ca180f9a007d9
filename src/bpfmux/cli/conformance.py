"""``bpfmux conformance DIR``: run the bpf_conformance suite in the emulator.

Every ``*.data`` case of DIR runs on the checked and the fast tier (or the
ones given with ``--tier``); a case passes when ``r0`` equals its expected
result on each. Failures are listed, then a per-tier tally and finally
``N passed, M failed``.

Exit status: 0 when every case passed, 1 when one failed or on an error, 2 on
bad usage (DIR is not a directory of *.data cases, an unknown --tier), 130 on
Ctrl-C.
"""

from __future__ import annotations

import argparse
from contextlib import closing
from pathlib import Path

from ..emu.vm.conformance import run_suite
from ..emu.vm.machine import TIERS
from ._common import UsageError

__all__ = ["register"]


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``conformance`` subcommand."""
    p = subparsers.add_parser("conformance", help="run the eBPF conformance suite on the emulator's tiers",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("directory", type=Path, help="directory of bpf_conformance *.data cases")
    p.add_argument("--tier", action="append", choices=TIERS,
                   help="run only this tier (repeatable; default: checked and fast)")
    p.add_argument("-v", "--verbose", action="store_true", help="list every case, not only failures")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    """Run ``bpfmux conformance`` (errors are reported by the caller's guard).

    :raises UsageError: the directory is not a directory of ``*.data`` cases.
    :raises OSError: the directory cannot be read.
    """
    if not args.directory.is_dir():
        raise UsageError(f"{args.directory} is not a directory of conformance cases")
    tiers = args.tier or list(TIERS)
    passed = failed = 0
    per_tier = dict.fromkeys(tiers, 0)
    with closing(run_suite(args.directory, tiers)) as results:  # Ctrl-C: the suite's VM is closed at once
        for res in results:
            for t in tiers:
                per_tier[t] += res.passed_on(t)
            if res.passed:
                passed += 1
                if args.verbose:
                    print(f"PASS {res.name}")
            else:
                failed += 1
                print(f"FAIL {res.name}: {res.reason()}")
    total = passed + failed
    if total == 0:
        raise UsageError(f"no *.data cases in {args.directory}")
    for t in tiers:
        print(f"{t} tier: {per_tier[t]} of {total} passed")
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1
