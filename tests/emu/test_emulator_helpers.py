"""The tracing helpers work the same for single and multi programs (multi-attach.md §2, "Helpers")."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

OBJ = Path(__file__).resolve().parents[1] / "bpf" / "tracing_helpers.bpf.o"


@pytest.mark.parametrize("policy", ["clone", "filter", "per-function"])
def test_helpers_in_every_kind_of_tracing_program(emulator_factory, policy):
    with emulator_factory(btf=None, policy=policy) as emu:
        coll = emu.load(OBJ)
        p = coll.programs
        p["fentry3"].attach(cookie=11)
        p["fexit3"].attach(cookie=12)
        p["modret"].attach(cookie=13)
        f3 = emu.function("bpf_fentry_test3")
        emu.link_tracing_multi(p["seed_exit3"], [f3], cookies=[14])
        emu.link_tracing_multi(p["mainline_exit3"], [f3], cookies=[15])
        emu.test_run_tracing(p["fentry3"])
        emu.test_run_tracing(p["modret"])
        bss = coll.maps[".bss"]
        for name, cookie, has_ret in [("fentry_seen", 11, False), ("fexit_seen", 12, True),
                                      ("seed_seen", 14, True), ("mainline_seen", 15, True)]:
            s = bss[name]
            assert s.calls == 1 and s.ip == f3.addr and s.arg_cnt == 3, name
            assert s.args[:3] == [4, 5, 6] and s.arg_err == [0, 0, 0, -errno.EINVAL], name
            assert s.cookie == cookie, name
            if has_ret:
                assert s.ret_err == 0 and s.ret == 15, name
            else:  # no return value before the function ran
                assert s.ret_err == -errno.EOPNOTSUPP and s.ret == 0, name
        m = bss["fmod_ret_seen"]
        assert m.calls == 1 and m.arg_cnt == 2 and m.ip == emu.function("bpf_modify_return_test").addr
        assert m.ret_err == 0 and m.ret == 0 and m.cookie == 13  # fmod_ret sees the current ret (0)
