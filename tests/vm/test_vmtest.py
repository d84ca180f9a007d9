"""The VM tier: boot Debian's 6.12 kernel under qemu and run the guest selection (tests/guest, …) inside it.

The guest runs once per session (fixture ``guest_run``); every in-guest test is
reported here as its own host test with the outcome it had in the guest.
"""

from __future__ import annotations

import pytest
import vmtest

_IDS, _COLLECT_OUTPUT = vmtest.host_collect()


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def test_guest_suite_completed(guest_run: vmtest.VmResult, guest_results: dict) -> None:
    """The guest booted, ran the selection, reported a status, and every test it ran passed or skipped with a reason."""
    assert not guest_run.timed_out, f"guest timed out after {guest_run.wall_time:.0f}s:\n{_tail(guest_run.console)}"
    assert guest_run.exit_status is not None, f"guest reported no exit status:\n{_tail(guest_run.console)}"
    assert guest_results, f"the in-guest pytest wrote no results:\n{_tail(guest_run.output)}"
    assert guest_run.exit_status == 0, f"in-guest pytest exited {guest_run.exit_status}:\n{_tail(guest_run.output)}"


def test_guest_ran_what_the_host_collects(guest_results: dict) -> None:
    """The guest ran exactly the tests the host collects from the selection (no silent drop-outs)."""
    assert _IDS, f"host collection of the guest selection failed:\n{_COLLECT_OUTPUT}"
    assert sorted(guest_results) == sorted(_IDS)


@pytest.mark.parametrize("nodeid", _IDS or ["<host collection of the guest selection failed>"])
def test_in_guest(nodeid: str, guest_run: vmtest.VmResult, guest_results: dict) -> None:
    """One in-guest test, with the outcome it had inside the guest."""
    if not _IDS:
        pytest.fail(f"host collection of the guest selection failed:\n{_COLLECT_OUTPUT}")
    entry = guest_results.get(nodeid)
    if entry is None:
        pytest.fail(f"{nodeid} did not run in the guest (exit status {guest_run.exit_status}):\n{_tail(guest_run.output)}")
    if entry["outcome"] == "skipped":
        pytest.skip(f"skipped in the guest: {entry['message']}")
    if entry["outcome"] != "passed":
        pytest.fail(f"{entry['outcome']} in the guest:\n{entry['message']}", pytrace=False)
