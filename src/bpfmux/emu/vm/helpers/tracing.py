"""Tracing helpers: function ip, arguments, return value, attach cookie.

They read the :class:`~bpfmux.emu.vm.runtime.RunContext` of the run: its
``tracing`` object (the trampoline layer's ``CallInfo``, or a
:class:`~bpfmux.emu.vm.runtime.FuncCall`) and ``cookie``.
"""

from __future__ import annotations

import errno
import struct

from ....uapi import HelperId as H
from ..runtime import RunState
from .table import helper

_U64 = struct.Struct("<Q")


@helper(H.get_func_ip, "get_func_ip")
def get_func_ip(rs: RunState, *_: int) -> int:
    """``u64 bpf_get_func_ip(ctx)``: address of the traced function (0 when
    the run has no tracing context)."""
    t = rs.context.tracing
    return 0 if t is None else t.ip


@helper(H.get_func_arg_cnt, "get_func_arg_cnt")
def get_func_arg_cnt(rs: RunState, *_: int) -> int:
    """``long bpf_get_func_arg_cnt(ctx)``."""
    t = rs.context.tracing
    return 0 if t is None else t.nargs


@helper(H.get_func_arg, "get_func_arg")
def get_func_arg(rs: RunState, ctx: int, n: int, value: int, *_: int) -> int:
    """``long bpf_get_func_arg(ctx, n, *value)``: ``-EINVAL`` (value left
    alone) when ``n`` is not below the argument count."""
    t = rs.context.tracing
    n &= 0xFFFFFFFF
    if t is None or n >= t.nargs:
        return -errno.EINVAL
    rs.write(value, _U64.pack(t.arg(n) & 0xFFFFFFFFFFFFFFFF))
    return 0


@helper(H.get_func_ret, "get_func_ret")
def get_func_ret(rs: RunState, ctx: int, value: int, *_: int) -> int:
    """``long bpf_get_func_ret(ctx, *value)``: ``-EOPNOTSUPP`` outside
    fexit / fmod_ret / multi-exit programs."""
    t = rs.context.tracing
    if t is None or not t.has_ret:
        return -errno.EOPNOTSUPP
    rs.write(value, _U64.pack(t.ret & 0xFFFFFFFFFFFFFFFF))
    return 0


@helper(H.get_attach_cookie, "get_attach_cookie")
def get_attach_cookie(rs: RunState, *_: int) -> int:
    """``u64 bpf_get_attach_cookie(ctx)``: the run's cookie, else the
    tracing context's, else 0."""
    ctx = rs.context
    if ctx.cookie is not None:
        return ctx.cookie
    t = ctx.tracing
    return 0 if t is None else t.cookie


# -- kfuncs (registered by BTF id by whoever knows the ids: VM.register_kfunc) --


def session_is_return(rs: RunState, *_: int) -> int:
    """kfunc ``bool bpf_session_is_return(void)``: true in the return run of
    a session program (``RunContext.session_is_return``)."""
    return int(bool(rs.context.session_is_return))


def session_cookie(rs: RunState, *_: int) -> int:
    """kfunc ``__u64 *bpf_session_cookie(void)``: address of the session's
    cookie slot (``RunContext.session_cookie``)."""
    return rs.context.session_cookie


def rcu_read_lock(rs: RunState, *_: int) -> int:
    """kfuncs ``bpf_rcu_read_lock``/``unlock``: nothing to do in one emulated CPU."""
    return 0


#: kfunc name → implementation, for ``VM.register_kfunc(btf_id_of(name), fn)``.
KFUNCS = {
    "bpf_session_is_return": session_is_return,
    "bpf_session_cookie": session_cookie,
    "bpf_rcu_read_lock": rcu_read_lock,
    "bpf_rcu_read_unlock": rcu_read_lock,
}
