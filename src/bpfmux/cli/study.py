"""``bpfmux study``: the trampoline-policy study on the emulated kernel, drawn."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ._common import EXIT_STATUS_HELP, UsageError, console

DESCRIPTION = """\
Run the three trampoline policies (clone, filter, per-function) over a range
of functions with programs of their own, on the emulated kernel (no root),
and draw what each costs: time per call with and without own programs,
attach time, images built and their bytes, call-site patches, grace periods
and dispatch steps per call. Prints terminal charts and a short reading;
writes study.json, study.png and study.svg into --out (PNG/SVG need
matplotlib: pip install bpfmux[study]).
"""

EPILOG = """\
examples:
  bpfmux study                                   2,000 functions; 1, 10, 100, 1,000 with own programs
  bpfmux study --functions 20000 --counts 1,10,100,1000,10000 --out docs/study
  bpfmux study --from bench/results/emu_dispatch.json   draw bench/emu_dispatch.py's numbers

""" + EXIT_STATUS_HELP


def register(sub: Any) -> None:
    """Add ``study`` to the subcommand parsers."""
    p = sub.add_parser("study", help="the trampoline-policy study on the emulated kernel, as plots",
                       description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--functions", type=int, default=2000, help="functions under the multi program (default 2000)")
    p.add_argument("--counts", default="1,10,100,1000",
                   help="comma-separated numbers of functions with own programs (default 1,10,100,1000)")
    p.add_argument("--calls", type=int, default=300, help="timed calls per measurement (default 300)")
    p.add_argument("--tier", default="fast", choices=["fast", "checked", "native"], help="VM tier (default fast)")
    p.add_argument("--from", dest="source", metavar="JSON", help="draw this data instead of measuring")
    p.add_argument("--out", default="study", metavar="DIR", help="where study.json/png/svg go (default ./study)")
    p.add_argument("--no-plots", action="store_true", help="only the terminal charts and the reading")
    p.set_defaults(func=_run)


def _counts(text: str) -> list[int]:
    """:raises UsageError: not a comma-separated list of integers."""
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"--counts: {text!r} is not a comma-separated list of integers") from None


def _run(args: argparse.Namespace) -> int:
    """Run ``bpfmux study``.

    :raises UsageError: malformed --counts.
    :raises BpfmuxError: unreadable --from data, matplotlib missing.
    """
    from ..emu import study

    out = console()
    if args.source:
        data = study.load(args.source)
    else:
        data = study.measure(args.functions, _counts(args.counts), calls=args.calls, tier=args.tier)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "study.json").write_text(json.dumps(data, indent=2) + "\n")
    study.terminal(data, out)
    out.print(study.reading(data))
    if not args.no_plots:
        for path in study.draw(data, args.out):
            out.print(f"wrote {path}")
    return 0
