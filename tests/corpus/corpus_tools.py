"""What each tool of bcc's libbpf-tools sets before it loads its object, and
how it attaches — one table, read from the tools' user space (``src/*.c`` of
the corpus) with their default options.

Each :class:`Tool` holds the fixed settings (``.rodata``/``.bss`` values,
map sizes, programs always left out, manual attaches, perf events) and, for
what the tool decides from its kernel (``probe_tp_btf``,
``fentry_can_attach``, ``kprobe_exists``, ``tracepoint_exists``, kallsyms,
BTF), a ``decide`` function over a :class:`Probe` of that kernel.
:meth:`Tool.settings` evaluates both into :class:`Settings` for one kernel:
the live kernel here, the VM tier's guest, or the emulated kernel.

Read facts only: the conditions and values mirror the C code, the code is ours.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

U64_MAX = (1 << 64) - 1
#: ``env.perf_max_stack_depth`` (127) frames of 8 bytes: the stack maps' value size
STACK_VALUE = 127 * 8
#: ``env.stack_storage_size``
STACK_ENTRIES = 1024


class Probe(Protocol):
    """What a tool asks its kernel before load."""

    def tp_btf(self, name: str) -> bool:
        """``probe_tp_btf(name)``: a tp_btf program on raw tracepoint ``name`` loads."""

    def fentry(self, func: str) -> bool:
        """``fentry_can_attach(func)``: fentry works and ``func`` is in the kernel's BTF."""

    def btf_func(self, func: str) -> bool:
        """``func`` is a FUNC of the kernel's BTF (``bpf_program__set_attach_target`` succeeds)."""

    def kprobe(self, func: str) -> bool:
        """``kprobe_exists(func)``: ``func`` is in ``available_filter_functions``."""

    def tracepoint(self, category: str, name: str) -> bool:
        """``tracepoint_exists(category, name)``."""

    def ksym(self, name: str) -> bool:
        """``ksyms__get_symbol(name)``: ``/proc/kallsyms`` has it."""

    def raw_tp_nargs(self, name: str) -> int | None:
        """Arguments of raw tracepoint ``name`` from BTF (``None``: unknown)."""


@dataclass(frozen=True)
class PerfEvent:
    """A sampling perf event a tool opens on every CPU for a perf_event program.

    :ivar event: software or hardware event name (``cpu_clock``, ``cache_misses``).
    :ivar hardware: a hardware event.
    :ivar freq: / :ivar period: sampling frequency (Hz) or period.
    """

    event: str = "cpu_clock"
    hardware: bool = False
    freq: int | None = None
    period: int | None = None


@dataclass
class Settings:
    """What one tool sets on one kernel.

    :ivar globals: variable → value (``skel->rodata->x = …``, ``skel->bss->y = …``).
    :ivar map_sizes: / :ivar value_sizes: ``bpf_map__set_max_entries`` / ``bpf_map__set_value_size``.
    :ivar off: programs with autoload turned off.
    :ivar targets: ``bpf_program__set_attach_target`` (fentry/fexit).
    :ivar attach: programs the tool attaches by hand: program → targets
        (``BINARY:FUNCTION`` for uprobes, a function for kprobes).
    :ivar perf: perf_event programs → their event.
    :ivar skip_attach: loaded but not attached by the tool (why).
    """

    globals: dict[str, object] = field(default_factory=dict)
    map_sizes: dict[str, int] = field(default_factory=dict)
    value_sizes: dict[str, int] = field(default_factory=dict)
    off: set[str] = field(default_factory=set)
    targets: dict[str, str] = field(default_factory=dict)
    attach: dict[str, list[str]] = field(default_factory=dict)
    perf: dict[str, PerfEvent] = field(default_factory=dict)
    skip_attach: dict[str, str] = field(default_factory=dict)


Decide = Callable[[Probe, Settings], None]


@dataclass(frozen=True)
class Tool:
    """One tool (module doc).

    :ivar kinds: the probe kinds it attaches with its default settings on a
        kernel that has everything (tracepoint, raw_tp, tp_btf, perf_event,
        uprobe, usdt, kprobe, fentry).
    :ivar runs_here: what the tool needs that a kernel without kprobes and
        fentry has (``False``: only the guest runs it).
    :ivar needs: what else it needs to start (a JVM, a filesystem type, …).
    """

    name: str
    kinds: frozenset[str]
    globals: Mapping[str, object] = field(default_factory=dict)
    map_sizes: Mapping[str, int] = field(default_factory=dict)
    value_sizes: Mapping[str, int] = field(default_factory=dict)
    off: tuple[str, ...] = ()
    attach: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    perf: Mapping[str, PerfEvent] = field(default_factory=dict)
    skip_attach: Mapping[str, str] = field(default_factory=dict)
    decide: Decide | None = None
    needs: str = ""

    @property
    def runs_here(self) -> bool:
        return not self.kinds & {"kprobe", "fentry"}

    def settings(self, probe: Probe) -> Settings:
        """The settings on the kernel ``probe`` answers for."""
        s = Settings(dict(self.globals), dict(self.map_sizes), dict(self.value_sizes), set(self.off), {},
                     {k: list(v) for k, v in self.attach.items()}, dict(self.perf), dict(self.skip_attach))
        if self.decide is not None:
            self.decide(probe, s)
        return s


# --- small building blocks of the decisions -----------------------------------------------------------

def _twins(btf: tuple[str, ...], raw: tuple[str, ...], probe_name: str) -> Decide:
    """``if (probe_tp_btf(name)) autoload off raw; else off btf`` (biolatency, runqlat, …)."""

    def decide(p: Probe, s: Settings) -> None:
        s.off.update(raw if p.tp_btf(probe_name) else btf)

    return decide


def _fentry_or_kprobe(fentry: tuple[str, ...], kprobes: tuple[str, ...], func: str) -> Decide:
    """``if (fentry_can_attach(func)) off kprobes; else off fentry programs`` (vfsstat, tcprtt, …)."""

    def decide(p: Probe, s: Settings) -> None:
        s.off.update(kprobes if p.fentry(func) else fentry)

    return decide


def _need_tracepoints(pairs: Mapping[str, tuple[str, ...]]) -> Decide:
    """``if (!tracepoint_exists("syscalls", tp)) off programs`` (opensnoop, statsnoop, …)."""

    def decide(p: Probe, s: Settings) -> None:
        for tp, progs in pairs.items():
            cat, name = tp.split("/")
            if not p.tracepoint(cat, name):
                s.off.update(progs)

    return decide


def _all(*fns: Decide) -> Decide:
    def decide(p: Probe, s: Settings) -> None:
        for fn in fns:
            fn(p, s)

    return decide


def _readline_binary() -> str:
    """bashreadline's choice: /bin/bash when it has the readline function (its own copy, as on Debian);
    ``readline_internal_teardown`` when bash has that symbol, else ``readline``."""
    from bpfmux.host.elfsyms import ElfSymbols

    try:
        syms = ElfSymbols.cached("/bin/bash")
        name = "readline_internal_teardown" if "readline_internal_teardown" in syms else "readline"
    except Exception:  # no bash here: the tool's ldd fallback is not modelled
        name = "readline"
    return f"/bin/bash:{name}"


def _libc(func: str) -> str:
    return f"libc:{func}"


# --- tools with decisions of their own ---------------------------------------------------------------

def _biolatency(p: Probe, s: Settings) -> None:
    s.globals["targ_single"] = p.raw_tp_nargs("block_rq_issue") in (None, 1)  # assumes recent when unknown
    if p.tp_btf("block_rq_insert"):
        s.off.update(("block_rq_insert", "block_rq_issue", "block_rq_complete", "block_rq_insert_btf"))
    else:
        s.off.update(("block_rq_insert_btf", "block_rq_issue_btf", "block_rq_complete_btf", "block_rq_insert"))


def _blk_targets(p: Probe, s: Settings, progs: Mapping[str, str]) -> None:
    plain = p.fentry("blk_account_io_start")
    for prog, func in progs.items():
        s.targets[prog] = func if plain else f"__{func}"


def _biosnoop(p: Probe, s: Settings) -> None:
    if p.tracepoint("block", "block_io_start"):
        s.off.add("blk_account_io_start")
    else:
        s.off.add("block_io_start")
        _blk_targets(p, s, {"blk_account_io_start": "blk_account_io_start"})
    if not p.ksym("blk_account_io_merge_bio"):
        s.off.add("blk_account_io_merge_bio")
    s.off.add("block_rq_insert")  # not -Q


def _biostacks(p: Probe, s: Settings) -> None:
    if p.tracepoint("block", "block_io_start") and p.tracepoint("block", "block_io_done"):
        s.off.update(("blk_account_io_start", "blk_account_io_done"))
    else:
        s.off.update(("block_io_start", "block_io_done"))
        _blk_targets(p, s, {"blk_account_io_start": "blk_account_io_start",
                            "blk_account_io_done": "blk_account_io_done"})
    if not p.ksym("blk_account_io_merge_bio"):
        s.off.add("blk_account_io_merge_bio")


def _biotop(p: Probe, s: Settings) -> None:
    if p.tracepoint("block", "block_io_start") and p.tracepoint("block", "block_io_done"):
        s.off.update(("blk_account_io_start", "blk_account_io_done", "__blk_account_io_start",
                      "__blk_account_io_done"))
    else:
        s.off.update(("block_io_start", "block_io_done"))
        if not p.ksym("__blk_account_io_start"):
            s.off.update(("__blk_account_io_start", "__blk_account_io_done"))
        else:
            s.off.update(("blk_account_io_start", "blk_account_io_done"))


def _cachestat(p: Probe, s: Settings) -> None:
    if p.fentry("folio_account_dirtied"):
        s.targets["fentry_account_page_dirtied"] = "folio_account_dirtied"
    tps = ("tracepoint__writeback_dirty_folio", "tracepoint__writeback_dirty_page")
    if p.kprobe("folio_account_dirtied"):
        s.off.update(("kprobe_account_page_dirtied", *tps))
    elif p.kprobe("account_page_dirtied"):
        s.off.update(("kprobe_folio_account_dirtied", *tps))
    elif p.tracepoint("writeback", "writeback_dirty_folio"):
        s.off.update(("kprobe_account_page_dirtied", "kprobe_folio_account_dirtied", tps[1]))
    elif p.tracepoint("writeback", "writeback_dirty_page"):
        s.off.update(("kprobe_account_page_dirtied", "kprobe_folio_account_dirtied", tps[0]))
    if p.fentry("folio_account_dirtied") or p.fentry("account_page_dirtied"):
        s.off.add("kprobe_account_page_dirtied")
    else:
        s.off.add("fentry_account_page_dirtied")
    for func in ("add_to_page_cache_lru", "mark_page_accessed", "mark_buffer_dirty"):
        s.off.add(f"kprobe_{func}" if p.fentry(func) else f"fentry_{func}")


def _pid_max() -> int:
    try:
        with open("/proc/sys/kernel/pid_max") as f:
            return int(f.read())
    except OSError:
        return 32768


def _fs_decide(with_getattr: bool) -> Decide:
    """fsdist/fsslower -t ext4: fentry on ext4's file operations when all can take it, else kprobes."""
    ops = {"file_read": "ext4_file_read_iter", "file_write": "ext4_file_write_iter",
           "file_open": "ext4_file_open", "file_sync": "ext4_sync_file"}
    if with_getattr:
        ops["getattr"] = "ext4_file_getattr"

    def decide(p: Probe, s: Settings) -> None:
        if all(p.fentry(f) for f in ops.values()):
            for op, func in ops.items():
                s.targets[f"{op}_fentry"] = func
                s.targets[f"{op}_fexit"] = func
            s.off.update(f"{op}_{end}" for op in ops for end in ("entry", "exit"))
            if with_getattr:
                s.off.update(("getattr_entry", "getattr_exit"))
        else:
            s.off.update(f"{op}_{end}" for op in ops for end in ("fentry", "fexit"))
            if with_getattr:
                s.off.update(("getattr_fentry", "getattr_fexit"))
            for op, func in ops.items():
                s.attach[f"{op}_entry"] = [func]
                s.attach[f"{op}_exit"] = [func]

    return decide


def _funclatency(p: Probe, s: Settings) -> None:
    func = "vfs_read"  # funclatency vfs_read
    if p.fentry(func):
        s.targets.update({"dummy_fentry": func, "dummy_fexit": func})
        s.off.update(("dummy_kprobe", "dummy_kretprobe"))
    else:
        s.off.update(("dummy_fentry", "dummy_fexit"))
        s.attach.update({"dummy_kprobe": [func], "dummy_kretprobe": [func]})


_KLOCK_LOCKS = ("mutex_lock", "mutex_lock_interruptible", "mutex_lock_killable", "down_read", "down_read_killable",
                "down_write", "down_write_killable")
_KLOCK_FENTRY = tuple(x for b in (*_KLOCK_LOCKS[:3], "down_read", "down_read_interruptible", *_KLOCK_LOCKS[4:])
                      for x in (b, f"{b}_exit")) + (
    "mutex_trylock_exit", "down_read_trylock_exit", "down_write_trylock_exit", "mutex_unlock", "up_read", "up_write")
_KLOCK_KPROBE = tuple(x for b in (*_KLOCK_LOCKS, "mutex_trylock", "down_read_trylock", "down_read_interruptible",
                                  "down_write_trylock")
                      for x in (f"kprobe_{b}", f"kprobe_{b}_exit")) + (
    "kprobe_mutex_unlock", "kprobe_up_read", "kprobe_up_write")
_KLOCK_NESTED = tuple(x for b in _KLOCK_LOCKS for x in (f"kprobe_{b}_nested", f"kprobe_{b}_exit_nested"))
_KLOCK_NL = ("rtnetlink_rcv_msg", "netlink_dump", "sock_do_ioctl")


def _klockstat(p: Probe, s: Settings) -> None:
    nl_fentry = tuple(x for n in _KLOCK_NL for x in (n, f"{n}_exit"))
    nl_kprobe = tuple(x for n in _KLOCK_NL for x in (f"kprobe_{n}", f"kprobe_{n}_exit"))
    if p.fentry("mutex_lock") or p.fentry("mutex_lock_nested"):  # enable_fentry()
        s.off.update(_KLOCK_KPROBE + _KLOCK_NESTED + nl_kprobe)
        if p.fentry("mutex_lock_nested"):  # CONFIG_DEBUG_LOCK_ALLOC
            for lock in _KLOCK_LOCKS:
                s.targets[lock] = s.targets[f"{lock}_exit"] = f"{lock}_nested"
    else:  # enable_kprobes()
        s.off.update(_KLOCK_FENTRY + nl_fentry)
        if p.kprobe("mutex_lock_nested"):
            s.off.update(x for b in _KLOCK_LOCKS for x in (f"kprobe_{b}", f"kprobe_{b}_exit"))
        else:
            s.off.update(_KLOCK_NESTED)
    s.off.update(nl_fentry + nl_kprobe)  # nr_stack_entries == 1: no netlink/ioctl probes


def _memleak(p: Probe, s: Settings) -> None:
    if not (p.tracepoint("kmem", "kmalloc_node") and p.tracepoint("kmem", "kmem_cache_alloc_node")):
        s.off.update(("memleak__kmalloc_node", "memleak__kmem_cache_alloc_node"))


def _numamove(p: Probe, s: Settings) -> None:
    if p.fentry("migrate_misplaced_folio"):
        fentry, folio = True, True
    elif p.kprobe("migrate_misplaced_folio"):
        fentry, folio = False, True
    elif p.fentry("migrate_misplaced_page"):
        fentry, folio = True, False
    else:
        fentry, folio = False, False
    for thing in ("folio", "page"):
        want_thing = (thing == "folio") == folio
        for prog, is_fentry in ((f"fentry_migrate_misplaced_{thing}", True),
                                (f"fexit_migrate_misplaced_{thing}_exit", True),
                                (f"kprobe_migrate_misplaced_{thing}", False),
                                (f"kretprobe_migrate_misplaced_{thing}_exit", False)):
            if not (want_thing and is_fentry == fentry):
                s.off.add(prog)


def _readahead(p: Probe, s: Settings) -> None:
    s.off.update(("folio_mark_accessed", "mark_page_accessed"))
    for func in ("folio_mark_accessed", "mark_page_accessed"):
        if p.fentry(func):
            s.off.discard(func)
            break
    allocs = {"filemap_alloc_folio_noprof": "filemap_alloc_folio_noprof_ret",
              "filemap_alloc_folio": "filemap_alloc_folio_ret", "__page_cache_alloc": "page_cache_alloc_ret"}
    s.off.update(allocs.values())
    for func, prog in allocs.items():
        if p.fentry(func):
            s.off.discard(prog)
            break
    for func in ("page_cache_ra_order", "do_page_cache_ra", "__do_page_cache_readahead"):
        if p.btf_func(func):
            s.targets["do_page_cache_ra"] = s.targets["do_page_cache_ra_ret"] = func
            break


def _slabratetop(p: Probe, s: Settings) -> None:
    if p.kprobe("kmem_cache_alloc"):
        s.off.add("kmem_cache_alloc_noprof")
    elif p.kprobe("kmem_cache_alloc_noprof"):
        s.off.add("kmem_cache_alloc")


def _tcpconnlat(p: Probe, s: Settings) -> None:
    if p.fentry("tcp_v4_connect"):
        for f in ("tcp_v4_connect", "tcp_v6_connect", "tcp_rcv_state_process"):
            s.targets[f"fentry_{f}"] = f
            s.off.add(f)
    else:
        s.off.update(("fentry_tcp_v4_connect", "fentry_tcp_v6_connect", "fentry_tcp_rcv_state_process"))


def _tcpsynbl(p: Probe, s: Settings) -> None:
    for v in ("4", "6"):
        s.off.add(f"tcp_v{v}_syn_recv_kprobe" if p.fentry(f"tcp_v{v}_syn_recv_sock") else f"tcp_v{v}_syn_recv")


def _filelife(p: Probe, s: Settings) -> None:
    if not p.kprobe("security_inode_create"):
        s.off.add("security_inode_create")


_SIGSNOOP_KILL = ("kill_entry", "kill_exit", "tkill_entry", "tkill_exit", "tgkill_entry", "tgkill_exit")
_MEMLEAK_PERCPU = ("memleak__percpu_alloc_percpu", "memleak__percpu_free_percpu")
_STACKMAP = {"stackmap": STACK_ENTRIES}
_STACKVAL = {"stackmap": STACK_VALUE}


def _tools() -> dict[str, Tool]:
    t = [
        Tool("bashreadline", frozenset({"uprobe"}), attach={"printret": (_readline_binary(),)}),
        Tool("bindsnoop", frozenset({"kprobe"}),
             {"filter_cg": False, "target_pid": 0, "ignore_errors": True, "filter_by_port": False}),
        Tool("biolatency", frozenset({"tp_btf"}),
             {"targ_per_disk": False, "targ_per_flag": False, "targ_ms": False, "targ_queued": False,
              "filter_cg": False}, decide=_biolatency),
        Tool("biopattern", frozenset({"tracepoint"})),
        Tool("biosnoop", frozenset({"tp_btf", "kprobe"}), {"targ_queued": False, "filter_cg": False, "min_ns": 0},
             decide=_biosnoop),
        Tool("biostacks", frozenset({"tp_btf", "kprobe"}), {"targ_ms": False}, decide=_biostacks),
        Tool("biotop", frozenset({"tp_btf", "kprobe"}), {"target_pid": 0}, decide=_biotop),
        Tool("bitesize", frozenset({"tp_btf"})),
        Tool("cachestat", frozenset({"fentry", "kprobe", "tracepoint"}), decide=_cachestat),
        Tool("capable", frozenset({"kprobe"}),
             {"targ_pid": -1, "filter_cg": False, "user_stack": False, "kernel_stack": False, "unique_type": 0,
              "my_pid": os.getpid()}, _STACKMAP, _STACKVAL),
        Tool("cpudist", frozenset({"tp_btf"}),
             {"filter_cg": False, "targ_per_process": False, "targ_per_thread": False, "targ_ms": False,
              "targ_offcpu": False, "targ_tgid": -1}, {"start": _pid_max(), "hists": 1},
             decide=_twins(("sched_switch_btf",), ("sched_switch_tp",), "sched_switch")),
        Tool("cpufreq", frozenset({"tp_btf", "perf_event"}), perf={"do_sample": PerfEvent(freq=99)},
             needs="CPU frequency scaling: its user space reads /sys/devices/system/cpu/cpu*/cpufreq after load"),
        Tool("drsnoop", frozenset({"tp_btf"}), {"targ_tgid": 0, "targ_pid": 0},
             decide=_twins(("direct_reclaim_begin_btf", "direct_reclaim_end_btf"),
                           ("direct_reclaim_begin", "direct_reclaim_end"), "mm_vmscan_direct_reclaim_begin")),
        Tool("execsnoop", frozenset({"tracepoint"}),
             {"ignore_failed": True, "targ_uid": U64_MAX & 0xFFFFFFFF, "max_args": 20, "filter_cg": False}),
        Tool("exitsnoop", frozenset({"tracepoint"}),
             {"target_pid": 0, "trace_failed_only": False, "trace_by_process": True, "filter_cg": False}),
        Tool("filelife", frozenset({"kprobe"}), {"targ_tgid": 0, "full_path": False}, decide=_filelife),
        Tool("filetop", frozenset({"kprobe"}), {"target_pid": 0, "regular_file_only": True}),
        Tool("fsdist", frozenset({"fentry", "kprobe"}), {"target_pid": 0, "in_ms": False},
             decide=_fs_decide(with_getattr=True), needs="-t ext4"),
        Tool("fsslower", frozenset({"fentry", "kprobe"}), {"target_pid": 0, "min_lat_ns": 10 * 1000 * 1000},
             decide=_fs_decide(with_getattr=False), needs="-t ext4"),
        Tool("funclatency", frozenset({"fentry", "kprobe"}), {"units": 1, "targ_tgid": 0, "filter_cg": False},
             decide=_funclatency, needs="a function: vfs_read"),
        Tool("futexctn", frozenset({"tracepoint"}),
             {"targ_pid": 0, "targ_tid": 0, "targ_lock": 0, "targ_ms": False, "targ_summary": False},
             _STACKMAP, _STACKVAL),
        Tool("gethostlatency", frozenset({"uprobe"}), {"target_pid": 0},
             attach={"handle_entry": tuple(_libc(f) for f in ("getaddrinfo", "gethostbyname", "gethostbyname2")),
                     "handle_return": tuple(_libc(f) for f in ("getaddrinfo", "gethostbyname", "gethostbyname2"))}),
        Tool("hardirqs", frozenset({"tp_btf"}),
             {"filter_cg": False, "cpu": False, "targ_cpu": -1, "targ_dist": False, "targ_ns": False},
             decide=_twins(("irq_handler_entry_btf", "irq_handler_exit_btf"), ("irq_handler_entry", "irq_handler_exit"),
                           "irq_handler_entry")),
        Tool("javagc", frozenset({"usdt"}), {"time": 1000 * 1000},
             skip_attach={p: "attached to a running JVM's hotspot USDT probes (javagc -p PID)"
                          for p in ("handle_gc_start", "handle_gc_end", "handle_mem_pool_gc_start",
                                    "handle_mem_pool_gc_end")},
             needs="a running JVM (-p PID)"),
        Tool("klockstat", frozenset({"fentry", "kprobe"}),
             {"targ_tgid": 0, "targ_pid": 0, "targ_lock": 0, "per_thread": False}, decide=_klockstat),
        Tool("ksnoop", frozenset({"kprobe"}),
             skip_attach={"kprobe_entry": "attached to the functions named on its command line",
                          "kprobe_return": "attached to the functions named on its command line"},
             needs="functions to trace"),
        Tool("llcstat", frozenset({"perf_event"}), {"targ_per_thread": False},
             perf={"on_cache_miss": PerfEvent("cache_misses", hardware=True, period=100),
                   "on_cache_ref": PerfEvent("cache_references", hardware=True, period=100)},
             needs="a hardware PMU (cache-miss and cache-reference events)"),
        Tool("mdflush", frozenset({"fentry", "kprobe"}),
             decide=_fentry_or_kprobe(("md_flush_request",), ("kprobe_md_flush_request",), "md_flush_request")),
        Tool("memleak", frozenset({"tracepoint"}),
             {"min_size": 0, "max_size": U64_MAX, "page_size": os.sysconf("SC_PAGE_SIZE"), "sample_rate": 1,
              "trace_all": False, "stack_flags": 0, "wa_missing_free": False},
             {"stack_traces": 10240}, {"stack_traces": STACK_VALUE}, off=_MEMLEAK_PERCPU,
             skip_attach={p: "kernel mode (no -p/-c): user-space allocators are not traced"
                          for p in ("malloc_enter", "free_enter", "calloc_enter", "realloc_enter", "mmap_enter",
                                    "munmap_enter", "mremap_enter", "posix_memalign_enter", "aligned_alloc_enter",
                                    "valloc_enter", "memalign_enter", "pvalloc_enter", "malloc_exit", "calloc_exit",
                                    "realloc_exit", "mmap_exit", "mremap_exit", "posix_memalign_exit",
                                    "aligned_alloc_exit", "valloc_exit", "memalign_exit", "pvalloc_exit")},
             decide=_memleak),
        Tool("mountsnoop", frozenset({"tracepoint"}), {"target_pid": 0},
             decide=_need_tracepoints({f"syscalls/sys_enter_{n}": (f"{n}_entry", f"{n}_exit")
                                       for n in ("fsopen", "fsconfig", "fsmount", "move_mount")})),
        Tool("numamove", frozenset({"fentry", "kprobe"}), decide=_numamove),
        Tool("offcputime", frozenset({"tp_btf"}),
             {"user_threads_only": False, "kernel_threads_only": False, "state": -1, "min_block_us": 1,
              "max_block_us": U64_MAX, "filter_by_tgid": False, "filter_by_pid": False}, _STACKMAP, _STACKVAL,
             decide=_twins(("sched_switch",), ("sched_switch_raw",), "sched_switch")),
        Tool("oomkill", frozenset({"kprobe"})),
        Tool("opensnoop", frozenset({"tracepoint"}),
             {"targ_tgid": 0, "targ_pid": 0, "targ_uid": 0xFFFFFFFF, "targ_failed": False, "full_path": False},
             decide=_need_tracepoints({
                 "syscalls/sys_enter_open": ("tracepoint__syscalls__sys_enter_open",
                                             "tracepoint__syscalls__sys_exit_open"),
                 "syscalls/sys_enter_openat2": ("tracepoint__syscalls__sys_enter_openat2",
                                                "tracepoint__syscalls__sys_exit_openat2")})),
        Tool("profile", frozenset({"perf_event"}),
             {"user_stacks_only": False, "kernel_stacks_only": False, "include_idle": False, "filter_by_pid": False,
              "filter_by_tid": False}, _STACKMAP, _STACKVAL, perf={"do_perf_event": PerfEvent(freq=49)}),
        Tool("readahead", frozenset({"fentry"}), decide=_readahead),
        Tool("runqlat", frozenset({"tp_btf"}),
             {"targ_per_process": False, "targ_per_thread": False, "targ_per_pidns": False, "targ_ms": False,
              "targ_tgid": 0, "filter_cg": False},
             decide=_twins(("sched_wakeup", "sched_wakeup_new", "sched_switch"),
                           ("handle_sched_wakeup", "handle_sched_wakeup_new", "handle_sched_switch"), "sched_wakeup")),
        Tool("runqlen", frozenset({"perf_event"}), {"targ_per_cpu": False, "targ_host": False},
             perf={"do_sample": PerfEvent(freq=99)}),
        Tool("runqslower", frozenset({"tp_btf"}), {"targ_tgid": 0, "targ_pid": 0, "min_us": 10000},
             decide=_twins(("sched_wakeup", "sched_wakeup_new", "sched_switch"),
                           ("handle_sched_wakeup", "handle_sched_wakeup_new", "handle_sched_switch"), "sched_wakeup")),
        Tool("sigsnoop", frozenset({"tracepoint"}), {"filtered_pid": 0, "target_signals": 0, "failed_only": False},
             off=_SIGSNOOP_KILL),
        Tool("slabratetop", frozenset({"kprobe"}), {"target_pid": 0}, decide=_slabratetop),
        Tool("softirqs", frozenset({"tp_btf"}), {"targ_dist": False, "targ_ns": False, "targ_cpu": -1},
             decide=_twins(("softirq_entry_btf", "softirq_exit_btf"), ("softirq_entry", "softirq_exit"),
                           "softirq_entry")),
        Tool("softirqslower", frozenset({"tp_btf"}), {"min_us": 10000, "targ_cpu": -1},
             decide=_twins(("softirq_raise_btf", "softirq_entry_btf", "softirq_exit_btf"),
                           ("softirq_raise_raw", "softirq_entry_raw", "softirq_exit_raw"), "softirq_raise")),
        Tool("solisten", frozenset({"fentry", "kprobe"}), {"target_pid": 0},
             decide=_fentry_or_kprobe(("inet_listen_fexit",), ("inet_listen_entry", "inet_listen_exit"),
                                      "inet_listen")),
        Tool("statsnoop", frozenset({"tracepoint"}), {"target_pid": 0, "trace_failed_only": False},
             decide=_need_tracepoints({f"syscalls/sys_enter_{n}": (f"handle_{n}_entry", f"handle_{n}_return")
                                       for n in ("statfs", "statx", "newstat", "newfstatat", "newfstat",
                                                 "newlstat")})),
        Tool("syncsnoop", frozenset({"tracepoint"}),
             decide=_need_tracepoints({f"syscalls/sys_enter_{n}": (f"tracepoint__syscalls__sys_enter_{n}",)
                                       for n in ("sync_file_range", "sync_file_range2", "arm_sync_file_range")})),
        Tool("syscount", frozenset({"tracepoint"})),
        Tool("tcpconnect", frozenset({"kprobe"})),
        Tool("tcpconnlat", frozenset({"fentry", "kprobe", "tracepoint"}), {"targ_min_us": 0, "targ_tgid": 0},
             decide=_tcpconnlat),
        Tool("tcplife", frozenset({"tracepoint"}), {"target_pid": 0, "target_family": 0}),
        Tool("tcppktlat", frozenset({"tp_btf"}),
             {"targ_pid": 0, "targ_tid": 0, "targ_sport": 0, "targ_dport": 0, "targ_min_us": 0},
             decide=_twins(("tcp_probe_btf", "tcp_rcv_space_adjust_btf", "tcp_destroy_sock_btf"),
                           ("tcp_probe", "tcp_rcv_space_adjust", "tcp_destroy_sock"), "tcp_probe")),
        Tool("tcprtt", frozenset({"fentry", "kprobe"}),
             {"targ_laddr_hist": False, "targ_raddr_hist": False, "targ_show_ext": False, "targ_sport": 0,
              "targ_dport": 0, "targ_saddr": 0, "targ_daddr": 0, "targ_ms": False},
             decide=_fentry_or_kprobe(("tcp_rcv",), ("tcp_rcv_kprobe",), "tcp_rcv_established")),
        Tool("tcpstates", frozenset({"tracepoint"}),
             {"filter_by_sport": False, "filter_by_dport": False, "target_family": 0}),
        Tool("tcpsynbl", frozenset({"fentry", "kprobe"}), decide=_tcpsynbl),
        Tool("tcptop", frozenset({"kprobe"}), {"target_pid": -1, "target_family": -1, "filter_cg": False}),
        Tool("tcptracer", frozenset({"kprobe"})),
        Tool("vfsstat", frozenset({"fentry", "kprobe"}),
             decide=_fentry_or_kprobe(tuple(f"fentry_vfs_{n}" for n in ("read", "write", "fsync", "open", "create",
                                                                         "unlink", "mkdir", "rmdir")),
                                      tuple(f"kprobe_vfs_{n}" for n in ("read", "write", "fsync", "open", "create",
                                                                         "unlink", "mkdir", "rmdir")), "vfs_read")),
        Tool("wakeuptime", frozenset({"tp_btf"}),
             {"targ_pid": 0, "min_block_ns": 1000, "max_block_ns": (U64_MAX * 1000) & U64_MAX,
              "user_threads_only": False}, _STACKMAP, _STACKVAL),
    ]
    return {tool.name: tool for tool in t}


#: tool name → :class:`Tool`, one per object of the corpus
TOOLS: dict[str, Tool] = _tools()
