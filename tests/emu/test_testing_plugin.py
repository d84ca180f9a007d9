"""The pytest plugin (bpfmux.testing): users test their programs in the emulator."""

from __future__ import annotations

from pathlib import Path

pytest_plugins = ["pytester"]

OBJ = Path(__file__).resolve().parents[1] / "bpf" / "fentry_test.bpf.o"


def test_plugin_fixtures_run_a_users_test(pytester):
    pytester.makepyfile(
        f"""
        import pytest

        def test_entry_sees_args(emulator, bpf_object):
            coll = bpf_object({str(OBJ)!r})
            coll.attach_all()
            emulator.call("bpf_fentry_test2", 40, 2)
            assert coll.maps[".bss"]["entry_args"][1][:2] == [40, 2]
            assert emulator.policy.name == "clone"

        @pytest.mark.bpfmux(policy="filter", btf=None)
        def test_marker_picks_policy(emulator):
            assert emulator.policy.name == "filter" and emulator.btf is None

        def test_a_wrong_expectation_fails(emulator, bpf_object):
            coll = bpf_object({str(OBJ)!r})
            coll.attach_all()
            emulator.call("bpf_fentry_test1", 5)
            assert coll.maps[".bss"]["entry_args"][0][0] == 6
        """
    )
    result = pytester.runpytest("-q", "--bpfmux-btf", "none")
    result.assert_outcomes(passed=2, failed=1)


def test_policy_option(pytester):
    pytester.makepyfile(
        """
        def test_policy(emulator):
            assert emulator.policy.name == "per-function"
        """
    )
    pytester.runpytest("-q", "--bpfmux-policy", "per-function", "--bpfmux-btf", "none").assert_outcomes(passed=1)


def test_factory_closes_every_emulator_when_one_close_fails(pytester):
    pytester.makepyfile(
        """
        made = []

        def test_make_three(emulator_factory):
            first = emulator_factory()
            real_close = first.close

            def failing_close():
                real_close()
                raise RuntimeError("first close failed")

            first.close = failing_close
            made.extend([first, emulator_factory(), emulator_factory()])

        def test_all_were_closed():
            assert [e.closed for e in made] == [True, True, True]
        """
    )
    result = pytester.runpytest("-q", "--bpfmux-btf", "none")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*RuntimeError: first close failed*"])


def test_bpf_object_closes_every_collection_when_one_close_fails(pytester):
    pytester.makepyfile(
        f"""
        loaded = []

        def test_load_twice(bpf_object):
            first = bpf_object({str(OBJ)!r})
            real_close = first.close

            def failing_close():
                real_close()
                raise RuntimeError("collection close failed")

            first.close = failing_close
            loaded.extend([first, bpf_object({str(OBJ)!r})])

        def test_both_were_closed():
            assert [c.closed for c in loaded] == [True, True]
        """
    )
    result = pytester.runpytest("-q", "--bpfmux-btf", "none")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*RuntimeError: collection close failed*"])
