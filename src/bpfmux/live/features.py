"""Feature probes: what the running kernel supports, found by trying it.

Every answer comes from actually loading a minimal program, creating a
minimal map or creating a link, never from a version number:

- **program types**: load ``r0 = 0; exit`` (with the attach type, BTF id or
  flags the type needs). Unknown types fail ``EINVAL`` before the verifier
  runs (no log); a type the kernel knows either loads or reaches the verifier.
- **map types**: create the smallest valid map of the type (a tiny BTF for the
  local-storage maps, an inner map for maps of maps).
- **helpers per program type**: load a program that calls the helper; the
  verifier answers "unknown func"/"invalid func" when the helper is not
  available to that program type (any other rejection means it is).
- **attach types**: load a program with that expected attach type.
- **link types**: create a real link of the kind (raw tracepoint, perf event,
  tracing via tp_btf, kprobe_multi, uprobe_multi, tracing_multi, iter, cgroup,
  netns); kinds that would change the machine's networking (xdp, tcx, netkit,
  netfilter, sockmap, struct_ops) are reported from their attach type's load
  probe and say so.

Results are cached per process (and on disk per kernel boot in
``$XDG_CACHE_HOME/bpfmux``). Code that needs a feature calls
:meth:`Features.require`, which raises :class:`NotSupportedError` naming it.
"""

from __future__ import annotations

import errno as _errno
import functools
import os
import struct
import threading
from pathlib import Path
from typing import Any

from ..errors import ENOTSUPP, BpfError, BpfmuxError, NotSupportedError
from ..host.cache import boot_id, cache_dir, read_json, write_json
from ..host.files import MiB, read_text
from ..record import Frozen
from ..record import set_field as _set
from ..uapi import AttachType, HelperId, LinkType, MapFlags, MapType, ProgFlags, ProgType
from . import sys as _sys

_RET0 = bytes([0xB7, 0, 0, 0, 0, 0, 0, 0, 0x95, 0, 0, 0, 0, 0, 0, 0])


class Probe(Frozen):
    """One probe's answer.

    :ivar supported: the kernel has it.
    :ivar detail: how it was decided, or why not (errno name, verifier line).
    :ivar method: ``load``, ``create`` or ``link``.
    """

    __slots__ = ("supported", "detail", "method")

    supported: bool
    detail: str
    method: str

    def __init__(self, supported: bool, detail: str = "", method: str = "load") -> None:
        _set(self, "supported", supported)
        _set(self, "detail", detail)
        _set(self, "method", method)

    def as_dict(self) -> dict[str, Any]:
        """The fields by name (what the on-disk cache and :meth:`Features.table` hold)."""
        return {"supported": self.supported, "detail": self.detail, "method": self.method}


def _reason(log: str) -> str:
    """The verifier's own complaint: the last log line that is not a statistic."""
    lines = [ln for ln in log.strip().splitlines()
             if ln and not ln.startswith(("processed ", "verification time", "stack depth", "Func#"))]
    return lines[-1] if lines else ""


def _verified_insns(log: str) -> int:
    for ln in log.splitlines():
        if ln.startswith("processed "):
            try:
                return int(ln.split()[1])
            except (IndexError, ValueError):
                return 0
    return 0


def _ename(e: int) -> str:
    return "ENOTSUPP" if e == ENOTSUPP else _errno.errorcode.get(e, str(e))


# --- what each program type needs to load ------------------------------------

_PROG_ATTACH: dict[ProgType, AttachType] = {
    ProgType.CGROUP_SOCK_ADDR: AttachType.CGROUP_INET4_CONNECT,
    ProgType.CGROUP_SOCKOPT: AttachType.CGROUP_GETSOCKOPT,
    ProgType.SK_LOOKUP: AttachType.SK_LOOKUP,
    ProgType.NETFILTER: AttachType.NETFILTER,
    ProgType.CGROUP_SOCK: AttachType.CGROUP_INET_SOCK_CREATE,
}

#: attach type → the program type it belongs to
_ATTACH_PROG: dict[AttachType, ProgType] = {}
for _t in AttachType:
    n = _t.name
    if n.startswith("CGROUP_INET") and ("INGRESS" in n or "EGRESS" in n):
        _ATTACH_PROG[_t] = ProgType.CGROUP_SKB
    elif n.startswith(("CGROUP_INET4_", "CGROUP_INET6_", "CGROUP_UDP", "CGROUP_UNIX")) and "POST_BIND" not in n:
        _ATTACH_PROG[_t] = ProgType.CGROUP_SOCK_ADDR
    elif n in ("CGROUP_INET_SOCK_CREATE", "CGROUP_INET_SOCK_RELEASE", "CGROUP_INET4_POST_BIND", "CGROUP_INET6_POST_BIND"):
        _ATTACH_PROG[_t] = ProgType.CGROUP_SOCK
    elif n in ("CGROUP_GETSOCKOPT", "CGROUP_SETSOCKOPT"):
        _ATTACH_PROG[_t] = ProgType.CGROUP_SOCKOPT
    elif n in ("TRACE_KPROBE_MULTI", "TRACE_KPROBE_SESSION", "TRACE_UPROBE_MULTI", "TRACE_UPROBE_SESSION"):
        _ATTACH_PROG[_t] = ProgType.KPROBE
    elif n.startswith("TRACE_") or n == "MODIFY_RETURN":
        _ATTACH_PROG[_t] = ProgType.TRACING
    elif n.startswith("LSM_"):
        _ATTACH_PROG[_t] = ProgType.LSM
    elif n.startswith(("XDP", "CPUMAP")):
        _ATTACH_PROG[_t] = ProgType.XDP
    elif n.startswith(("TCX_", "NETKIT_")):
        _ATTACH_PROG[_t] = ProgType.SCHED_CLS
    elif n.startswith("SK_SKB"):
        _ATTACH_PROG[_t] = ProgType.SK_SKB
    elif n.startswith("SK_REUSEPORT"):
        _ATTACH_PROG[_t] = ProgType.SK_REUSEPORT
    else:
        _ATTACH_PROG[_t] = {
            "CGROUP_SOCK_OPS": ProgType.SOCK_OPS, "CGROUP_DEVICE": ProgType.CGROUP_DEVICE,
            "SK_MSG_VERDICT": ProgType.SK_MSG, "LIRC_MODE2": ProgType.LIRC_MODE2,
            "FLOW_DISSECTOR": ProgType.FLOW_DISSECTOR, "CGROUP_SYSCTL": ProgType.CGROUP_SYSCTL,
            "SK_LOOKUP": ProgType.SK_LOOKUP, "PERF_EVENT": ProgType.PERF_EVENT,
            "STRUCT_OPS": ProgType.STRUCT_OPS, "NETFILTER": ProgType.NETFILTER,
        }.get(n, ProgType.UNSPEC)

#: BTF function a tracing attach type is probed against (bpf_fentry_test1 is
#: the kernel's own test target; iterators attach to bpf_iter_<name>).
_TRACE_TARGET = {
    AttachType.TRACE_FENTRY: "bpf_fentry_test1",
    AttachType.TRACE_FEXIT: "bpf_fentry_test1",
    AttachType.MODIFY_RETURN: "bpf_modify_return_test",
    AttachType.TRACE_FSESSION: "bpf_fentry_test1",
    AttachType.TRACE_FENTRY_MULTI: "bpf_fentry_test1",
    AttachType.TRACE_FEXIT_MULTI: "bpf_fentry_test1",
    AttachType.TRACE_FSESSION_MULTI: "bpf_fentry_test1",
    AttachType.TRACE_ITER: "bpf_iter_task",
    AttachType.LSM_MAC: "bpf_lsm_file_open",
    AttachType.LSM_CGROUP: "bpf_lsm_socket_create",
    AttachType.TRACE_RAW_TP: "btf_trace_sys_enter",
}


@functools.cache
def _vmlinux_id(name: str) -> int:
    from ..btf import Btf

    kind = "typedef" if name.startswith("btf_trace_") else "func"
    try:
        ids = Btf.vmlinux().find_ids(name, kind)
    except (OSError, BpfmuxError):  # no kernel BTF (or unreadable): probes that need it report unsupported
        return 0
    return ids[0] if ids else 0  # no such type: likewise


def _tiny_btf() -> bytes:
    """A BTF blob with one type, ``int`` (id 1), for storage-map probes."""
    strings = b"\0int\0"
    types = struct.pack("<III", 1, 1 << 24, 4) + struct.pack("<I", (1 << 24) | 32)
    return struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strings)) + types + strings


class Features:
    """Probed kernel features, cached (use :func:`features` for the shared one)."""

    def __init__(self, cache_dir: str | os.PathLike[str] | None = None) -> None:
        self._lock = threading.RLock()
        self._saving_later = 0  # inside table(): one save at its end instead of one per new probe
        self._mem: dict[str, Probe] = {}
        self._cache_path = self._cache_file(cache_dir)
        self._load_cache()

    # --- cache -----------------------------------------------------------------

    @staticmethod
    def _cache_file(base: str | os.PathLike[str] | None) -> Path | None:
        boot = boot_id()
        root = cache_dir(base)
        if boot is None or root is None:
            return None
        return root / f"features-{os.uname().release}-{boot}.json"

    def _load_cache(self) -> None:
        if self._cache_path is None:
            return
        data = read_json(self._cache_path)
        if not isinstance(data, dict):
            return
        try:
            self._mem.update({k: Probe(**v) for k, v in data.items()})
        except TypeError:
            self._mem.clear()  # a cache of another layout is rebuilt

    def save(self) -> None:
        """Write the probes done so far to the on-disk cache (best effort)."""
        if self._cache_path is not None:
            write_json(self._cache_path, {k: v.as_dict() for k, v in self._mem.items()})

    def _cached(self, key: str, fn: Any) -> Probe:
        with self._lock:
            p = self._mem.get(key)
            if p is None:
                p = fn()
                self._mem[key] = p
                if not self._saving_later:  # valid until the next boot: the next run need not probe again
                    self.save()  # (a link probe costs ~30 ms, its close waiting for the kernel)
            return p

    # --- program types ---------------------------------------------------------

    def _load(self, prog_type: ProgType, insns: bytes = _RET0, attach: AttachType | int = 0, btf_id: int = 0,
              flags: int = 0) -> tuple[int, str]:
        """(errno or 0, verifier log) of loading a program."""
        log: list[str] = []
        try:
            fd = _sys.prog_load(prog_type, insns, "GPL", name="bpfmux_probe", expected_attach_type=int(attach),
                                attach_btf_id=btf_id, prog_flags=flags, log_level=1, log_size=1 << 16,
                                retry_with_log=False, log_out=log)
        except BpfError as err:
            return err.errno or _errno.EINVAL, (err.log or "".join(log))
        fd.close()
        return 0, ""

    def _prog_args(self, t: ProgType) -> dict[str, Any]:
        if t == ProgType.TRACING:
            return {"attach": AttachType.TRACE_RAW_TP, "btf_id": _vmlinux_id("btf_trace_sys_enter")}
        if t == ProgType.LSM:
            return {"attach": AttachType.LSM_MAC, "btf_id": _vmlinux_id("bpf_lsm_file_open")}
        if t == ProgType.SYSCALL:
            return {"flags": ProgFlags.SLEEPABLE}
        if t in _PROG_ATTACH:
            return {"attach": _PROG_ATTACH[t]}
        return {}

    def prog_type(self, t: ProgType) -> Probe:
        """Can programs of type ``t`` be loaded?"""

        def probe() -> Probe:
            err, log = self._load(t, **self._prog_args(t))
            if err == 0:
                return Probe(True, "loads")
            last = _reason(log)
            if err == _errno.EINVAL and not log.strip():
                return Probe(False, "EINVAL: unknown program type")
            if err in (_errno.EPERM, _errno.EACCES) and not log.strip():
                return Probe(False, f"{_ename(err)}: not permitted")
            # the verifier ran: the kernel knows the type (it wanted more setup)
            return Probe(True, f"known; minimal load says: {last or _ename(err)}")

        return self._cached(f"prog:{int(t)}", probe)

    # --- map types -----------------------------------------------------------------

    def map_type(self, t: MapType) -> Probe:
        """Can maps of type ``t`` be created?"""

        def probe() -> Probe:
            if t == MapType.STRUCT_OPS:
                p = self.prog_type(ProgType.STRUCT_OPS)
                return Probe(p.supported, "inferred from the struct_ops program type (a struct_ops map needs a "
                             "kernel struct_ops value type)", "inferred")
            try:
                self._create_map(t)
            except BpfError as err:
                return Probe(False, _ename(err.errno or 0), "create")
            return Probe(True, "created", "create")

        return self._cached(f"map:{int(t)}", probe)

    def _create_map(self, t: MapType) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        ks, vs, n, flags, extra = 4, 4, 1, 0, 0
        inner = btf = None
        kid = vid = 0
        try:
            if t in (MapType.RINGBUF, MapType.USER_RINGBUF):
                ks, vs, n = 0, 0, page
            elif t in (MapType.QUEUE, MapType.STACK, MapType.BLOOM_FILTER):
                ks = 0
            elif t == MapType.LPM_TRIE:
                ks, vs, flags = 8, 8, MapFlags.NO_PREALLOC
            elif t in (MapType.CGROUP_STORAGE, MapType.PERCPU_CGROUP_STORAGE):
                ks, vs, n = 16, 8, 0  # struct bpf_cgroup_storage_key
            elif t in (MapType.SK_STORAGE, MapType.INODE_STORAGE, MapType.TASK_STORAGE, MapType.CGRP_STORAGE):
                n, flags = 0, MapFlags.NO_PREALLOC
                btf, kid, vid = _sys.btf_load(_tiny_btf(), retry_with_log=False), 1, 1
            elif t in (MapType.ARRAY_OF_MAPS, MapType.HASH_OF_MAPS):
                inner = _sys.map_create(MapType.ARRAY, 4, 4, 1, name="probe_inner")
            elif t == MapType.ARENA:
                ks, vs, n, flags = 0, 0, 1, MapFlags.MMAPABLE
            elif t in (MapType.REUSEPORT_SOCKARRAY, MapType.SOCKMAP, MapType.SOCKHASH, MapType.XSKMAP,
                       MapType.DEVMAP, MapType.DEVMAP_HASH, MapType.CPUMAP, MapType.CGROUP_ARRAY):
                vs = 4
            elif t == MapType.STACK_TRACE:
                vs = 8
            fd = _sys.map_create(t, ks, vs, n, flags=flags, name="bpfmux_probe", inner_map_fd=inner, btf_fd=btf,
                                 btf_key_type_id=kid, btf_value_type_id=vid, map_extra=extra)
            fd.close()
        finally:
            for f in (inner, btf):
                if f is not None:
                    f.close()

    # --- helpers ---------------------------------------------------------------------

    def helper(self, prog_type: ProgType, helper: HelperId | int) -> Probe:
        """Is ``helper`` callable from programs of ``prog_type``?"""

        def probe() -> Probe:
            if not self.prog_type(prog_type).supported:
                return Probe(False, f"program type {prog_type.name.lower()} unsupported")
            call = bytes([0x85, 0, 0, 0]) + int(helper).to_bytes(4, "little", signed=True)
            err, log = self._load(prog_type, call + _RET0, **self._prog_args(prog_type))
            if err == 0:
                return Probe(True, "loads")
            if any(m in log for m in ("invalid func ", "unknown func ", "cannot use helper")):
                return Probe(False, "unknown func for this program type")
            if not log.strip():
                return Probe(False, _ename(err))
            return Probe(True, "known (call reached argument checks)")

        return self._cached(f"helper:{int(prog_type)}:{int(helper)}", probe)

    def helpers(self, prog_type: ProgType) -> list[HelperId]:
        """Every helper available to ``prog_type``."""
        out: list[HelperId] = [h for h in HelperId if h != HelperId.unspec and self.helper(prog_type, h).supported]
        self.save()
        return out

    # --- attach types --------------------------------------------------------------------

    def attach_type(self, t: AttachType) -> Probe:
        """Does the kernel accept programs with expected attach type ``t``?"""

        def probe() -> Probe:
            pt = _ATTACH_PROG.get(t, ProgType.UNSPEC)
            if pt == ProgType.UNSPEC:
                return Probe(False, "no program type known for it")
            if not self.prog_type(pt).supported:
                return Probe(False, f"program type {pt.name.lower()} unsupported")
            btf_id = _vmlinux_id(_TRACE_TARGET[t]) if t in _TRACE_TARGET else 0
            err, log = self._load(pt, attach=t, btf_id=btf_id)
            if err == 0:
                return Probe(True, "loads")
            last = _reason(log)
            if _verified_insns(log) > 0:
                # accepted as attach type; the verifier then judged the probe's body
                return Probe(True, f"known; minimal load says: {last}")
            return Probe(False, f"{_ename(err)}" + (f": {last}" if last else ": rejected before verification"))

        return self._cached(f"attach:{int(t)}", probe)

    # --- link types -------------------------------------------------------------------------

    def link_type(self, t: LinkType) -> Probe:
        """Can links of kind ``t`` be created here?"""
        return self._cached(f"link:{int(t)}", lambda: _probe_link(self, t))

    # --- requiring ------------------------------------------------------------------------

    def require(self, kind: str, value: Any, prog_type: ProgType | None = None) -> None:
        """Raise :class:`NotSupportedError` unless the feature is there.

        ``kind`` is ``"prog_type"``, ``"map_type"``, ``"attach_type"``,
        ``"link_type"`` or ``"helper"`` (with ``prog_type``).

        :raises NotSupportedError: the kernel lacks it (the message says why).
        """
        if kind == "helper":
            p = self.helper(prog_type or ProgType.KPROBE, value)
            name = f"helper {HelperId(value).name} in {(prog_type or ProgType.KPROBE).name.lower()} programs"
        else:
            p = getattr(self, kind)(value)
            name = f"{kind.replace('_', ' ')} {value.name.lower()}"
        if not p.supported:
            raise NotSupportedError(value.name.lower() if hasattr(value, "name") else str(value),
                                    f"{name} is not supported by this kernel ({p.detail})")

    # --- the table ------------------------------------------------------------------------

    def table(self, helpers: bool = False) -> dict[str, dict[str, dict[str, Any]]]:
        """Every probe, grouped: ``{"program_types": {name: {...}}, ...}``.

        :param helpers: include helpers per supported program type (slow the
            first time: one load per helper and type; cached afterwards).
        """
        with self._lock:
            self._saving_later += 1
            try:
                out: dict[str, dict[str, dict[str, Any]]] = {
                    "program_types": {t.name.lower(): self.prog_type(t).as_dict() for t in ProgType
                                      if t != ProgType.UNSPEC},
                    "map_types": {t.name.lower(): self.map_type(t).as_dict() for t in MapType if t != MapType.UNSPEC},
                    "attach_types": {t.name.lower(): self.attach_type(t).as_dict() for t in AttachType},
                    "link_types": {t.name.lower(): self.link_type(t).as_dict() for t in LinkType
                                   if t != LinkType.UNSPEC},
                }  # fmt: skip
                if helpers:
                    out["helpers"] = {
                        t.name.lower(): {"supported": True, "detail": " ".join(h.name for h in self.helpers(t)),
                                         "method": "load"}
                        for t in ProgType if t != ProgType.UNSPEC and self.prog_type(t).supported
                    }  # fmt: skip
            finally:
                self._saving_later -= 1
            self.save()
        return out


def _probe_link(f: Features, t: LinkType) -> Probe:
    """Create a real link of kind ``t`` (or say why not)."""
    from contextlib import ExitStack

    def load(pt: ProgType, attach: AttachType | int = 0, btf_id: int = 0) -> _sys.Fd:
        return _sys.prog_load(pt, _RET0, name="bpfmux_probe", expected_attach_type=int(attach), attach_btf_id=btf_id,
                              retry_with_log=False)

    try:
        with ExitStack() as st:
            if t == LinkType.RAW_TRACEPOINT:
                p = st.enter_context(load(ProgType.RAW_TRACEPOINT))
                st.enter_context(_sys.raw_tracepoint_open("sys_enter", p))
            elif t == LinkType.TRACING:
                p = st.enter_context(load(ProgType.TRACING, AttachType.TRACE_FENTRY, _vmlinux_id("bpf_fentry_test1")))
                st.enter_context(_sys.link_create_tracing(p, AttachType.TRACE_FENTRY))
            elif t == LinkType.PERF_EVENT:
                tp = int(read_text("/sys/kernel/tracing/events/syscalls/sys_enter_getpid/id", 4096, "tracepoint id"))
                p = st.enter_context(load(ProgType.TRACEPOINT))
                ev = st.enter_context(_sys.perf_event_open(_sys.PerfEventAttr(type=2, config=tp), pid=-1, cpu=0))
                st.enter_context(_sys.link_create_perf_event(p, ev))
            elif t == LinkType.KPROBE_MULTI:
                p = st.enter_context(load(ProgType.KPROBE, AttachType.TRACE_KPROBE_MULTI))
                st.enter_context(_sys.link_create_kprobe_multi(p, syms=["bpf_fentry_test1"]))
            elif t == LinkType.UPROBE_MULTI:
                import sys as _pysys

                p = st.enter_context(load(ProgType.KPROBE, AttachType.TRACE_UPROBE_MULTI))
                # offset 0 of the interpreter: accepted by a kernel with uprobe_multi (no code runs there)
                st.enter_context(_sys.link_create_uprobe_multi(p, os.path.realpath(_pysys.executable), [0],
                                                               pid=os.getpid()))
            elif t == LinkType.TRACING_MULTI:
                p = st.enter_context(load(ProgType.TRACING, AttachType.TRACE_FENTRY_MULTI))
                st.enter_context(_sys.link_create_tracing_multi(p, AttachType.TRACE_FENTRY_MULTI,
                                                                [_vmlinux_id("bpf_fentry_test1")]))
            elif t == LinkType.ITER:
                p = st.enter_context(load(ProgType.TRACING, AttachType.TRACE_ITER, _vmlinux_id("bpf_iter_task")))
                st.enter_context(_sys.link_create(p, None, AttachType.TRACE_ITER))
            elif t == LinkType.NETNS:
                p = st.enter_context(load(ProgType.FLOW_DISSECTOR, AttachType.FLOW_DISSECTOR))
                ns = os.open("/proc/self/ns/net", os.O_RDONLY)
                st.callback(os.close, ns)
                st.enter_context(_sys.link_create(p, ns, AttachType.FLOW_DISSECTOR))
            elif t == LinkType.CGROUP:
                cg = _cgroup2_dir()
                if cg is None:
                    return Probe(False, "no cgroup2 hierarchy mounted to probe with", "link")
                p = st.enter_context(load(ProgType.CGROUP_SKB, AttachType.CGROUP_INET_INGRESS))
                cfd = os.open(cg, os.O_RDONLY | os.O_DIRECTORY)
                st.callback(os.close, cfd)
                st.enter_context(_sys.link_create(p, cfd, AttachType.CGROUP_INET_INGRESS))
            else:
                attach = {LinkType.XDP: AttachType.XDP, LinkType.TCX: AttachType.TCX_INGRESS,
                          LinkType.NETKIT: AttachType.NETKIT_PRIMARY, LinkType.NETFILTER: AttachType.NETFILTER,
                          LinkType.SOCKMAP: AttachType.SK_SKB_VERDICT, LinkType.STRUCT_OPS: AttachType.STRUCT_OPS}.get(t)
                if attach is None:
                    return Probe(False, "unknown link kind", "link")
                loads = f.attach_type(attach)
                note = "attach type loads; link not created (it would change the machine's networking)"
                return Probe(loads.supported, note if loads.supported else loads.detail, "load")
    except BpfError as err:
        stage = "the probe program's load was refused" if "loading program" in (err.strerror or "") else \
            "link creation was refused"
        return Probe(False, f"{_ename(err.errno or 0)}: {stage}", "link")
    except OSError as err:
        return Probe(False, f"{_ename(err.errno or 0)}: {err.strerror}", "link")
    return Probe(True, "link created", "link")


def _cgroup2_dir() -> str | None:
    try:
        for line in read_text("/proc/self/mounts", 16 * MiB, "mount table").splitlines():
            parts = line.split()
            if len(parts) > 2 and parts[2] == "cgroup2":
                return parts[1]
    except OSError:
        return None
    return None


_shared: Features | None = None
_shared_lock = threading.Lock()


def features() -> Features:
    """The process-wide :class:`Features` (probes run on first use)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Features()
        return _shared
