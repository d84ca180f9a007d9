"""``bpfmux objdump`` shows every corpus object, and ``bpfmux emulate`` loads,
verifies and reports each one with no workload (in-process, no root)."""

from __future__ import annotations

import json

import pytest
from corpus_harness import object_path, tool_names
from test_corpus_emulator import KNOWN, KNOWN_EMULATED

from bpfmux.cli.main import main
from bpfmux.obj import load_object

pytestmark = pytest.mark.usefixtures("corpus")


@pytest.mark.parametrize("tool", tool_names())
def test_objdump_shows_the_object(tool: str, capsys) -> None:
    assert main(["objdump", str(object_path(tool))]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"object {tool}:") and "program " in out


@pytest.mark.parametrize("tool", ["runqlat", "execsnoop", "profile", "sigsnoop", "klockstat", "wakeuptime"])
def test_emulate_reports_any_object(tool: str, capsys) -> None:
    """No workload: every program is loaded or reported rejected (with the verifier's reason), maps dumped;
    zero-sized maps get the default size with a note."""
    status = main(["emulate", str(object_path(tool)), "--json"])
    cap = capsys.readouterr()
    rep = json.loads(cap.out)
    assert status == (3 if rep["failed"] else 0) and rep["events"] == 0
    known = {p for table in (KNOWN, KNOWN_EMULATED) for p in table.get(tool, {})}
    assert set(rep["rejected"]) <= known, rep["rejected"]
    assert {*rep["programs"], *rep["rejected"]} == set(load_object(object_path(tool)).programs)
    if tool in ("profile", "wakeuptime"):
        assert "max_entries 0" in cap.err  # the stack map got a size, and the note says so
