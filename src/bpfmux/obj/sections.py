"""ELF section names → what a program is, as libbpf defines it.

A program's ELF section name (``SEC("kprobe/do_nanosleep")``) decides its
program type, its expected attach type, load flags (sleepable, XDP frags, the
seed's multi-function flag), its attach target and whether it can be attached
automatically. :data:`SECTION_DEFS` is that table, in libbpf's order and with
libbpf's matching rules:

* ``exact``: the name must equal the prefix;
* ``plus`` (libbpf's ``"type+"``): the name equals the prefix, or is
  ``prefix/<target>``;
* ``slash`` (libbpf's ``"type/"``): the name must be ``prefix/<target>``.

A leading ``?`` (``SEC("?raw_tp/x")``) means "do not load automatically";
it is stripped before matching.

Two groups are this project's own: the 2026 mainline tracing-multi sections
(``fentry.multi``, ``fexit.multi``, ``fsession.multi`` and their ``.s``
variants, attach types ``TRACE_*_MULTI``) and the seed's multi-function
sections ``fentry.multi_func/<glob>`` and ``fexit.multi_func/<glob>``
(``BPF_PROG_TYPE_TRACING``, attach type ``TRACE_FENTRY``/``TRACE_FEXIT``,
prog flag :attr:`~bpfmux.uapi.ProgFlags.MULTI_FUNC`, target = the glob).
"""

from __future__ import annotations

import enum

from ..errors import NotFoundError
from ..record import Frozen
from ..record import set_field as _set
from ..uapi import AttachType, BtfKind, ProgFlags, ProgType

__all__ = [
    "SECTION_DEFS",
    "AttachKind",
    "SecFlags",
    "SectionDef",
    "SectionInfo",
    "attach_kind_of",
    "match_section",
    "parse_section",
]


class SecFlags(enum.IntFlag):
    """Properties of a section kind (libbpf's ``SEC_*`` flags plus ours)."""

    NONE = 0
    #: expected attach type may be dropped on kernels that do not know it
    EXP_ATTACH_OPT = 1 << 0
    #: attachable through ``BPF_PROG_ATTACH`` to a cgroup/socket/…
    ATTACHABLE = 1 << 1
    #: the target is a BTF id found by name at load time (fentry, tp_btf, lsm, …)
    ATTACH_BTF = 1 << 2
    #: loaded with ``BPF_F_SLEEPABLE``
    SLEEPABLE = 1 << 3
    #: XDP program loaded with ``BPF_F_XDP_HAS_FRAGS``
    XDP_FRAGS = 1 << 4
    #: USDT: loaded as uprobe_multi when the kernel has it
    USDT = 1 << 5
    #: the seed's multi-function program (``BPF_F_MULTI_FUNC``)
    MULTI_FUNC = 1 << 6
    #: return probe (kretprobe, uretprobe, … ``.multi``)
    RETPROBE = 1 << 7
    #: session program (entry and exit, kprobe/uprobe/fsession)
    SESSION = 1 << 8
    #: one program on many BTF functions (mainline tracing multi)
    ATTACH_BTF_MULTI = 1 << 9

    ATTACHABLE_OPT = ATTACHABLE | EXP_ATTACH_OPT


class AttachKind(enum.Enum):
    """How a program attaches: the one enum both kernels dispatch on
    (:mod:`bpfmux.attach`). Derived from the section name when there is one,
    else from the program's type and attach type (:func:`attach_kind_of`)."""

    KPROBE = "kprobe"
    KPROBE_MULTI = "kprobe_multi"
    KPROBE_SESSION = "kprobe_session"
    KSYSCALL = "ksyscall"
    UPROBE = "uprobe"
    UPROBE_MULTI = "uprobe_multi"
    USDT = "usdt"
    TRACEPOINT = "tracepoint"
    RAW_TRACEPOINT = "raw_tracepoint"
    TP_BTF = "tp_btf"
    TRAMPOLINE = "trampoline"  # fentry, fexit, fmod_ret, fsession: one function, a BPF trampoline
    TRACE_MULTI = "trace_multi"  # mainline tracing multi (fentry.multi, …)
    MULTI_FUNC = "multi_func"  # the seed's tracing multi (BPF_F_MULTI_FUNC)
    PERF_EVENT = "perf_event"  # a sampling perf event per CPU
    FREPLACE = "freplace"
    LSM = "lsm"
    ITER = "iter"


class SectionDef(Frozen):
    """One row of the section table.

    :ivar prefix: the section name or prefix (without libbpf's ``+``/``/``).
    :ivar match: ``"exact"``, ``"plus"`` or ``"slash"`` (see module doc).
    :ivar prog_type: program type.
    :ivar attach_type: expected attach type, ``None`` for "0, none".
    :ivar flags: :class:`SecFlags`.
    :ivar attach: how it is auto-attached, ``None`` when it cannot be.
    """

    __slots__ = ("prefix", "match", "prog_type", "attach_type", "flags", "attach")

    prefix: str
    match: str
    prog_type: ProgType
    attach_type: AttachType | None
    flags: SecFlags
    attach: AttachKind | None

    def __init__(
        self,
        prefix: str,
        match: str,
        prog_type: ProgType,
        attach_type: AttachType | None,
        flags: SecFlags,
        attach: AttachKind | None,
    ) -> None:
        _set(self, "prefix", prefix)
        _set(self, "match", match)
        _set(self, "prog_type", prog_type)
        _set(self, "attach_type", attach_type)
        _set(self, "flags", flags)
        _set(self, "attach", attach)

    def matches(self, name: str) -> bool:
        """True when section ``name`` (without ``?``) is of this kind."""
        p = self.prefix
        if self.match == "exact":
            return name == p
        if self.match == "slash":
            return name.startswith(p + "/")
        return name == p or name.startswith(p + "/")


def _d(prefix: str, prog_type: ProgType, attach_type: AttachType | None, flags: SecFlags = SecFlags.NONE,
       attach: AttachKind | None = None) -> SectionDef:
    if prefix.endswith("+"):
        return SectionDef(prefix[:-1], "plus", prog_type, attach_type, flags, attach)
    if prefix.endswith("/"):
        return SectionDef(prefix[:-1], "slash", prog_type, attach_type, flags, attach)
    return SectionDef(prefix, "exact", prog_type, attach_type, flags, attach)


P, A, F, K = ProgType, AttachType, SecFlags, AttachKind
_S, _BTF, _RET, _SES = F.SLEEPABLE, F.ATTACH_BTF, F.RETPROBE, F.SESSION

#: The section table, in libbpf's order (first match wins), with this
#: project's tracing-multi rows placed after the single-function ones.
SECTION_DEFS: tuple[SectionDef, ...] = (
    _d("socket", P.SOCKET_FILTER, None),
    _d("sk_reuseport/migrate", P.SK_REUSEPORT, A.SK_REUSEPORT_SELECT_OR_MIGRATE, F.ATTACHABLE),
    _d("sk_reuseport", P.SK_REUSEPORT, A.SK_REUSEPORT_SELECT, F.ATTACHABLE),
    _d("kprobe+", P.KPROBE, None, F.NONE, K.KPROBE),
    _d("uprobe+", P.KPROBE, None, F.NONE, K.UPROBE),
    _d("uprobe.s+", P.KPROBE, None, _S, K.UPROBE),
    _d("kretprobe+", P.KPROBE, None, _RET, K.KPROBE),
    _d("uretprobe+", P.KPROBE, None, _RET, K.UPROBE),
    _d("uretprobe.s+", P.KPROBE, None, _RET | _S, K.UPROBE),
    _d("kprobe.multi+", P.KPROBE, A.TRACE_KPROBE_MULTI, F.NONE, K.KPROBE_MULTI),
    _d("kretprobe.multi+", P.KPROBE, A.TRACE_KPROBE_MULTI, _RET, K.KPROBE_MULTI),
    _d("kprobe.session+", P.KPROBE, A.TRACE_KPROBE_SESSION, _SES, K.KPROBE_SESSION),
    _d("uprobe.multi+", P.KPROBE, A.TRACE_UPROBE_MULTI, F.NONE, K.UPROBE_MULTI),
    _d("uretprobe.multi+", P.KPROBE, A.TRACE_UPROBE_MULTI, _RET, K.UPROBE_MULTI),
    _d("uprobe.session+", P.KPROBE, A.TRACE_UPROBE_SESSION, _SES, K.UPROBE_MULTI),
    _d("uprobe.multi.s+", P.KPROBE, A.TRACE_UPROBE_MULTI, _S, K.UPROBE_MULTI),
    _d("uretprobe.multi.s+", P.KPROBE, A.TRACE_UPROBE_MULTI, _RET | _S, K.UPROBE_MULTI),
    _d("uprobe.session.s+", P.KPROBE, A.TRACE_UPROBE_SESSION, _SES | _S, K.UPROBE_MULTI),
    _d("ksyscall+", P.KPROBE, None, F.NONE, K.KSYSCALL),
    _d("kretsyscall+", P.KPROBE, None, _RET, K.KSYSCALL),
    _d("usdt+", P.KPROBE, None, F.USDT, K.USDT),
    _d("usdt.s+", P.KPROBE, None, F.USDT | _S, K.USDT),
    _d("tc/ingress", P.SCHED_CLS, A.TCX_INGRESS),
    _d("tc/egress", P.SCHED_CLS, A.TCX_EGRESS),
    _d("tcx/ingress", P.SCHED_CLS, A.TCX_INGRESS),
    _d("tcx/egress", P.SCHED_CLS, A.TCX_EGRESS),
    _d("tc", P.SCHED_CLS, None),
    _d("classifier", P.SCHED_CLS, None),
    _d("action", P.SCHED_ACT, None),
    _d("netkit/primary", P.SCHED_CLS, A.NETKIT_PRIMARY),
    _d("netkit/peer", P.SCHED_CLS, A.NETKIT_PEER),
    _d("tracepoint+", P.TRACEPOINT, None, F.NONE, K.TRACEPOINT),
    _d("tp+", P.TRACEPOINT, None, F.NONE, K.TRACEPOINT),
    _d("raw_tracepoint+", P.RAW_TRACEPOINT, None, F.NONE, K.RAW_TRACEPOINT),
    _d("raw_tp+", P.RAW_TRACEPOINT, None, F.NONE, K.RAW_TRACEPOINT),
    _d("raw_tracepoint.w+", P.RAW_TRACEPOINT_WRITABLE, None, F.NONE, K.RAW_TRACEPOINT),
    _d("raw_tp.w+", P.RAW_TRACEPOINT_WRITABLE, None, F.NONE, K.RAW_TRACEPOINT),
    _d("tp_btf+", P.TRACING, A.TRACE_RAW_TP, _BTF, K.TP_BTF),
    _d("fentry+", P.TRACING, A.TRACE_FENTRY, _BTF, K.TRAMPOLINE),
    _d("fmod_ret+", P.TRACING, A.MODIFY_RETURN, _BTF, K.TRAMPOLINE),
    _d("fexit+", P.TRACING, A.TRACE_FEXIT, _BTF, K.TRAMPOLINE),
    _d("fentry.s+", P.TRACING, A.TRACE_FENTRY, _BTF | _S, K.TRAMPOLINE),
    _d("fmod_ret.s+", P.TRACING, A.MODIFY_RETURN, _BTF | _S, K.TRAMPOLINE),
    _d("fexit.s+", P.TRACING, A.TRACE_FEXIT, _BTF | _S, K.TRAMPOLINE),
    _d("fsession+", P.TRACING, A.TRACE_FSESSION, _BTF | _SES, K.TRAMPOLINE),
    _d("fsession.s+", P.TRACING, A.TRACE_FSESSION, _BTF | _SES | _S, K.TRAMPOLINE),
    # 2026 mainline tracing multi: one program, many BTF functions (glob target)
    _d("fentry.multi+", P.TRACING, A.TRACE_FENTRY_MULTI, F.ATTACH_BTF_MULTI, K.TRACE_MULTI),
    _d("fexit.multi+", P.TRACING, A.TRACE_FEXIT_MULTI, F.ATTACH_BTF_MULTI, K.TRACE_MULTI),
    _d("fsession.multi+", P.TRACING, A.TRACE_FSESSION_MULTI, F.ATTACH_BTF_MULTI | _SES, K.TRACE_MULTI),
    _d("fentry.multi.s+", P.TRACING, A.TRACE_FENTRY_MULTI, F.ATTACH_BTF_MULTI | _S, K.TRACE_MULTI),
    _d("fexit.multi.s+", P.TRACING, A.TRACE_FEXIT_MULTI, F.ATTACH_BTF_MULTI | _S, K.TRACE_MULTI),
    _d("fsession.multi.s+", P.TRACING, A.TRACE_FSESSION_MULTI, F.ATTACH_BTF_MULTI | _SES | _S, K.TRACE_MULTI),
    # the seed's (2021) multi-function programs: BPF_F_MULTI_FUNC, glob target
    _d("fentry.multi_func/", P.TRACING, A.TRACE_FENTRY, F.MULTI_FUNC, K.MULTI_FUNC),
    _d("fexit.multi_func/", P.TRACING, A.TRACE_FEXIT, F.MULTI_FUNC, K.MULTI_FUNC),
    _d("freplace+", P.EXT, None, _BTF, K.FREPLACE),
    _d("lsm+", P.LSM, A.LSM_MAC, _BTF, K.LSM),
    _d("lsm.s+", P.LSM, A.LSM_MAC, _BTF | _S, K.LSM),
    _d("lsm_cgroup+", P.LSM, A.LSM_CGROUP, _BTF),
    _d("iter+", P.TRACING, A.TRACE_ITER, _BTF, K.ITER),
    _d("iter.s+", P.TRACING, A.TRACE_ITER, _BTF | _S, K.ITER),
    _d("syscall", P.SYSCALL, None, _S),
    _d("xdp.frags/devmap", P.XDP, A.XDP_DEVMAP, F.XDP_FRAGS),
    _d("xdp/devmap", P.XDP, A.XDP_DEVMAP, F.ATTACHABLE),
    _d("xdp.frags/cpumap", P.XDP, A.XDP_CPUMAP, F.XDP_FRAGS),
    _d("xdp/cpumap", P.XDP, A.XDP_CPUMAP, F.ATTACHABLE),
    _d("xdp.frags", P.XDP, A.XDP, F.XDP_FRAGS),
    _d("xdp", P.XDP, A.XDP, F.ATTACHABLE_OPT),
    _d("perf_event", P.PERF_EVENT, None, F.NONE, K.PERF_EVENT),
    _d("lwt_in", P.LWT_IN, None),
    _d("lwt_out", P.LWT_OUT, None),
    _d("lwt_xmit", P.LWT_XMIT, None),
    _d("lwt_seg6local", P.LWT_SEG6LOCAL, None),
    _d("sockops", P.SOCK_OPS, A.CGROUP_SOCK_OPS, F.ATTACHABLE_OPT),
    _d("sk_skb/stream_parser", P.SK_SKB, A.SK_SKB_STREAM_PARSER, F.ATTACHABLE_OPT),
    _d("sk_skb/stream_verdict", P.SK_SKB, A.SK_SKB_STREAM_VERDICT, F.ATTACHABLE_OPT),
    _d("sk_skb/verdict", P.SK_SKB, A.SK_SKB_VERDICT, F.ATTACHABLE_OPT),
    _d("sk_skb", P.SK_SKB, None),
    _d("sk_msg", P.SK_MSG, A.SK_MSG_VERDICT, F.ATTACHABLE_OPT),
    _d("lirc_mode2", P.LIRC_MODE2, A.LIRC_MODE2, F.ATTACHABLE_OPT),
    _d("flow_dissector", P.FLOW_DISSECTOR, A.FLOW_DISSECTOR, F.ATTACHABLE_OPT),
    _d("cgroup_skb/ingress", P.CGROUP_SKB, A.CGROUP_INET_INGRESS, F.ATTACHABLE_OPT),
    _d("cgroup_skb/egress", P.CGROUP_SKB, A.CGROUP_INET_EGRESS, F.ATTACHABLE_OPT),
    _d("cgroup/skb", P.CGROUP_SKB, None),
    _d("cgroup/sock_create", P.CGROUP_SOCK, A.CGROUP_INET_SOCK_CREATE, F.ATTACHABLE),
    _d("cgroup/sock_release", P.CGROUP_SOCK, A.CGROUP_INET_SOCK_RELEASE, F.ATTACHABLE),
    _d("cgroup/sock", P.CGROUP_SOCK, A.CGROUP_INET_SOCK_CREATE, F.ATTACHABLE_OPT),
    _d("cgroup/post_bind4", P.CGROUP_SOCK, A.CGROUP_INET4_POST_BIND, F.ATTACHABLE),
    _d("cgroup/post_bind6", P.CGROUP_SOCK, A.CGROUP_INET6_POST_BIND, F.ATTACHABLE),
    _d("cgroup/bind4", P.CGROUP_SOCK_ADDR, A.CGROUP_INET4_BIND, F.ATTACHABLE),
    _d("cgroup/bind6", P.CGROUP_SOCK_ADDR, A.CGROUP_INET6_BIND, F.ATTACHABLE),
    _d("cgroup/connect4", P.CGROUP_SOCK_ADDR, A.CGROUP_INET4_CONNECT, F.ATTACHABLE),
    _d("cgroup/connect6", P.CGROUP_SOCK_ADDR, A.CGROUP_INET6_CONNECT, F.ATTACHABLE),
    _d("cgroup/connect_unix", P.CGROUP_SOCK_ADDR, A.CGROUP_UNIX_CONNECT, F.ATTACHABLE),
    _d("cgroup/sendmsg4", P.CGROUP_SOCK_ADDR, A.CGROUP_UDP4_SENDMSG, F.ATTACHABLE),
    _d("cgroup/sendmsg6", P.CGROUP_SOCK_ADDR, A.CGROUP_UDP6_SENDMSG, F.ATTACHABLE),
    _d("cgroup/sendmsg_unix", P.CGROUP_SOCK_ADDR, A.CGROUP_UNIX_SENDMSG, F.ATTACHABLE),
    _d("cgroup/recvmsg4", P.CGROUP_SOCK_ADDR, A.CGROUP_UDP4_RECVMSG, F.ATTACHABLE),
    _d("cgroup/recvmsg6", P.CGROUP_SOCK_ADDR, A.CGROUP_UDP6_RECVMSG, F.ATTACHABLE),
    _d("cgroup/recvmsg_unix", P.CGROUP_SOCK_ADDR, A.CGROUP_UNIX_RECVMSG, F.ATTACHABLE),
    _d("cgroup/getpeername4", P.CGROUP_SOCK_ADDR, A.CGROUP_INET4_GETPEERNAME, F.ATTACHABLE),
    _d("cgroup/getpeername6", P.CGROUP_SOCK_ADDR, A.CGROUP_INET6_GETPEERNAME, F.ATTACHABLE),
    _d("cgroup/getpeername_unix", P.CGROUP_SOCK_ADDR, A.CGROUP_UNIX_GETPEERNAME, F.ATTACHABLE),
    _d("cgroup/getsockname4", P.CGROUP_SOCK_ADDR, A.CGROUP_INET4_GETSOCKNAME, F.ATTACHABLE),
    _d("cgroup/getsockname6", P.CGROUP_SOCK_ADDR, A.CGROUP_INET6_GETSOCKNAME, F.ATTACHABLE),
    _d("cgroup/getsockname_unix", P.CGROUP_SOCK_ADDR, A.CGROUP_UNIX_GETSOCKNAME, F.ATTACHABLE),
    _d("cgroup/sysctl", P.CGROUP_SYSCTL, A.CGROUP_SYSCTL, F.ATTACHABLE),
    _d("cgroup/getsockopt", P.CGROUP_SOCKOPT, A.CGROUP_GETSOCKOPT, F.ATTACHABLE),
    _d("cgroup/setsockopt", P.CGROUP_SOCKOPT, A.CGROUP_SETSOCKOPT, F.ATTACHABLE),
    _d("cgroup/dev", P.CGROUP_DEVICE, A.CGROUP_DEVICE, F.ATTACHABLE_OPT),
    _d("struct_ops+", P.STRUCT_OPS, None),
    _d("struct_ops.s+", P.STRUCT_OPS, None, _S),
    _d("sk_lookup", P.SK_LOOKUP, A.SK_LOOKUP, F.ATTACHABLE),
    _d("netfilter", P.NETFILTER, A.NETFILTER),
)
del P, A, F, K, _S, _BTF, _RET, _SES

# kinds whose auto-attach needs "binary:function" after the prefix
_NEEDS_COLON = {AttachKind.UPROBE, AttachKind.UPROBE_MULTI, AttachKind.USDT}


class SectionInfo(Frozen):
    """What a section name says about its program.

    :ivar section: the section name as written (with any ``?``).
    :ivar name: the name without ``?``.
    :ivar kind: the matching :class:`SectionDef` (``None`` for an unknown name).
    :ivar prog_type: program type (``UNSPEC`` when unknown).
    :ivar expected_attach_type: expected attach type, ``None`` for 0.
    :ivar prog_flags: ``BPF_PROG_LOAD`` flags the section implies.
    :ivar target: text after ``prefix/`` (function, tracepoint ``cat/name``,
        ``binary:func``, glob, …), ``None`` when there is none.
    :ivar autoload: ``False`` when the name starts with ``?``.
    :ivar auto_attach: ``True`` when the section says enough to attach the
        program without further input.
    """

    __slots__ = (
        "section",
        "name",
        "kind",
        "prog_type",
        "expected_attach_type",
        "prog_flags",
        "target",
        "autoload",
        "auto_attach",
    )

    section: str
    name: str
    kind: SectionDef | None
    prog_type: ProgType
    expected_attach_type: AttachType | None
    prog_flags: ProgFlags
    target: str | None
    autoload: bool
    auto_attach: bool

    def __init__(
        self,
        section: str,
        name: str,
        kind: SectionDef | None,
        prog_type: ProgType,
        expected_attach_type: AttachType | None,
        prog_flags: ProgFlags,
        target: str | None,
        autoload: bool,
        auto_attach: bool,
    ) -> None:
        _set(self, "section", section)
        _set(self, "name", name)
        _set(self, "kind", kind)
        _set(self, "prog_type", prog_type)
        _set(self, "expected_attach_type", expected_attach_type)
        _set(self, "prog_flags", prog_flags)
        _set(self, "target", target)
        _set(self, "autoload", autoload)
        _set(self, "auto_attach", auto_attach)

    @property
    def flags(self) -> SecFlags:
        """The section kind's :class:`SecFlags` (``NONE`` when unknown)."""
        return self.kind.flags if self.kind else SecFlags.NONE

    @property
    def attach_kind(self) -> AttachKind | None:
        """How the program attaches automatically (``None``: it does not)."""
        return self.kind.attach if self.kind else None

    @property
    def sleepable(self) -> bool:
        return bool(self.flags & SecFlags.SLEEPABLE)

    @property
    def retprobe(self) -> bool:
        """Return probe: kretprobe, uretprobe, ``kretprobe.multi`` …"""
        return bool(self.flags & SecFlags.RETPROBE)

    @property
    def multi_func(self) -> bool:
        """The seed's multi-function program (``BPF_F_MULTI_FUNC``)."""
        return bool(self.flags & SecFlags.MULTI_FUNC)

    def btf_attach_name(self) -> tuple[str, BtfKind] | None:
        """Name and kind of the BTF type the kernel needs as attach target.

        ``tp_btf/x`` → typedef ``btf_trace_x``; ``lsm/x`` → func ``bpf_lsm_x``;
        ``iter/x`` → func ``bpf_iter_x``; fentry/fexit/fmod_ret/fsession/
        freplace → the function itself. ``None`` when the section kind has no
        single BTF target or the name gives none.
        """
        if self.kind is None or not (self.kind.flags & SecFlags.ATTACH_BTF) or not self.target:
            return None
        at = self.kind.attach_type
        if at == AttachType.TRACE_RAW_TP:
            return "btf_trace_" + self.target, BtfKind.TYPEDEF
        if at in (AttachType.LSM_MAC, AttachType.LSM_CGROUP):
            return "bpf_lsm_" + self.target, BtfKind.FUNC
        if at == AttachType.TRACE_ITER:
            return "bpf_iter_" + self.target, BtfKind.FUNC
        return self.target, BtfKind.FUNC


def match_section(section: str) -> SectionInfo:
    """Describe the program in ELF section ``section``.

    Unknown names give ``prog_type == ProgType.UNSPEC`` and ``kind is None``
    (such a program can still be loaded once its type is set by hand).
    """
    autoload = not section.startswith("?")
    name = section[1:] if not autoload else section
    for d in SECTION_DEFS:
        if d.matches(name):
            break
    else:
        return SectionInfo(section, name, None, ProgType.UNSPEC, None, ProgFlags(0), None, autoload, False)
    target = name[len(d.prefix) + 1:] if len(name) > len(d.prefix) and d.match != "exact" else None
    flags = ProgFlags(0)
    if d.flags & SecFlags.SLEEPABLE:
        flags |= ProgFlags.SLEEPABLE
    if d.flags & SecFlags.XDP_FRAGS:
        flags |= ProgFlags.XDP_HAS_FRAGS
    if d.flags & SecFlags.MULTI_FUNC:
        flags |= ProgFlags.MULTI_FUNC
    auto = d.attach is not None and bool(target)
    if auto and d.attach in _NEEDS_COLON:
        auto = ":" in (target or "")
    return SectionInfo(section, name, d, d.prog_type, d.attach_type, flags, target or None, autoload, auto)


def parse_section(section: str) -> SectionInfo:
    """Like :func:`match_section`, but an unknown name is an error.

    :raises NotFoundError: no section kind matches ``section``.
    """
    info = match_section(section)
    if info.kind is None:
        raise NotFoundError(
            "section kind", section,
            "use a libbpf section name such as 'kprobe/<func>', 'tracepoint/<cat>/<name>', "
            "'raw_tp/<name>', 'fentry/<func>', 'uprobe/<binary>:<func>', 'socket' or 'syscall'",
        )
    return info


_BY_ATTACH_TYPE: dict[AttachType, AttachKind] = {
    AttachType.TRACE_RAW_TP: AttachKind.TP_BTF,
    AttachType.TRACE_FENTRY: AttachKind.TRAMPOLINE,
    AttachType.TRACE_FEXIT: AttachKind.TRAMPOLINE,
    AttachType.MODIFY_RETURN: AttachKind.TRAMPOLINE,
    AttachType.TRACE_FSESSION: AttachKind.TRAMPOLINE,
    AttachType.TRACE_FENTRY_MULTI: AttachKind.TRACE_MULTI,
    AttachType.TRACE_FEXIT_MULTI: AttachKind.TRACE_MULTI,
    AttachType.TRACE_FSESSION_MULTI: AttachKind.TRACE_MULTI,
    AttachType.TRACE_KPROBE_MULTI: AttachKind.KPROBE_MULTI,
    AttachType.TRACE_KPROBE_SESSION: AttachKind.KPROBE_SESSION,
    AttachType.TRACE_UPROBE_MULTI: AttachKind.UPROBE_MULTI,
    AttachType.TRACE_UPROBE_SESSION: AttachKind.UPROBE_MULTI,
    AttachType.TRACE_ITER: AttachKind.ITER,
    AttachType.LSM_MAC: AttachKind.LSM,
}
_BY_PROG_TYPE: dict[ProgType, AttachKind] = {
    ProgType.TRACEPOINT: AttachKind.TRACEPOINT,
    ProgType.RAW_TRACEPOINT: AttachKind.RAW_TRACEPOINT,
    ProgType.RAW_TRACEPOINT_WRITABLE: AttachKind.RAW_TRACEPOINT,
    ProgType.KPROBE: AttachKind.KPROBE,
    ProgType.PERF_EVENT: AttachKind.PERF_EVENT,
    ProgType.EXT: AttachKind.FREPLACE,
}


def attach_kind_of(prog_type: ProgType | int, attach_type: AttachType | int | None = None,
                   flags: ProgFlags | int = 0, section: str = "") -> AttachKind | None:
    """How a program attaches: what its section says when the section is
    known and agrees with the program's type, else what its type and attach
    type say (a plain kprobe-type program is a kprobe; give ``BIN:SYM``
    targets to attach it as a uprobe). ``None``: it does not attach to a
    tracing hook (socket filters, XDP, cgroup programs, syscall programs, …).
    """
    ptype = ProgType(int(prog_type))
    if section:
        info = match_section(section)
        if info.kind is not None and info.kind.attach is not None and info.prog_type == ptype:
            return info.kind.attach
    if ptype == ProgType.TRACING and ProgFlags.MULTI_FUNC in ProgFlags(int(flags)):
        return AttachKind.MULTI_FUNC
    if attach_type is not None and int(attach_type) in _BY_ATTACH_TYPE.keys():
        return _BY_ATTACH_TYPE[AttachType(int(attach_type))]
    return _BY_PROG_TYPE.get(ptype)
