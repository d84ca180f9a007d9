"""Running a script on the emulated kernel: ``bpfmux bpftrace --emulate`` and
the ``bpftrace_script`` pytest fixture.

The script runs exactly as on the live kernel (same programs, maps, output),
with a workload driving the emulated kernel in place of real activity:
``BEGIN`` runs, the probes attach, the workload's events happen
(:mod:`bpfmux.emu.kernel.replay`), every ``interval`` probe fires once, and
``END`` and the map dump follow.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import IO, Any, cast

from .runtime import Options, Session, compile_script

__all__ = ["run_emulated"]


def run_emulated(text: str, workload: str | list[Any] | Callable[[Any], object], *, emulator: Any | None = None,
                 options: Options | None = None, name: str = "stdin", out: IO[str] | None = None,
                 policy: str = "clone", maps_out: IO[str] | None = None) -> str:  # fmt: skip
    """Run ``text`` on an emulated kernel driven by ``workload`` (a workload
    spec such as ``"sys:openat*3"``, a call-stream file, a list of
    :class:`~bpfmux.emu.kernel.replay.Event`, or a function called with the
    emulator once the probes are attached); returns what bpftrace would have
    printed (also written to ``out`` when given).

    :param emulator: the :class:`~bpfmux.emu.Emulator` to use (default: a new one, closed afterwards).
    :param maps_out: where the ``\\n\\n`` before the exit map dump goes (default: with the rest).
    :raises ScriptError: the script does not compile.
    :raises ParseError: a malformed workload.
    :raises BpfmuxError: the emulated kernel refused something.
    """
    from ..emu import Emulator
    from ..emu.kernel.replay import apply, load_events

    events = load_events(workload) if isinstance(workload, str) else workload if callable(workload) else list(workload)
    own = emulator is None
    emu = emulator if emulator is not None else Emulator(policy=policy)
    buf = io.StringIO()
    sink = cast(IO[str], _Tee(buf, out)) if out is not None else buf
    try:
        opts = options or Options()
        script = compile_script(text, emu, opts, name=name)
        with Session(script, emu, opts, out=sink, maps_out=maps_out if maps_out is not None else sink) as session:
            session.start()
            if callable(events):
                events(emu)
            else:
                apply(emu, events)
            session.drain()
            if not session.exit_requested:
                session.fire_intervals(force=True)
            session.finish()
    finally:
        if own:
            emu.close()
    return buf.getvalue()


class _Tee(io.TextIOBase):
    def __init__(self, *streams: IO[str]) -> None:
        self.streams = streams

    def write(self, s: str) -> int:
        for st in self.streams:
            st.write(s)
        return len(s)

    def flush(self) -> None:
        for st in self.streams:
            st.flush()
