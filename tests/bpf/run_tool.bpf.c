// SPDX-License-Identifier: MIT
/* A libbpf-tools-like object for `bpfmux run` and its output: what a tool's
 * user space sets before load (a .rodata filter, a .bss variable), twin
 * programs on one hook (tp_btf and raw_tp on sys_enter: only one may run),
 * a slots histogram in a map and in .bss, and ring-buffer events whose
 * struct is reached only through a reserved pointer (in DWARF, not BTF: this
 * object keeps its DWARF). */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define NR_GETPID 39
#define MAX_SLOTS 8

struct hist {
	__u32 slots[MAX_SLOTS];
};

struct dwarf_event {
	__u32 tgid;
	__u32 nr;
	__u64 seq;
	char comm[16];
};

const volatile __u32 target_tgid = 0;
__u64 seen_by_tp_btf, seen_by_raw_tp, sent;
__u32 slot = 2;
struct hist global_hist;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct hist);
} hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

static __always_inline int on_enter(long id, __u64 *seen)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32, s = slot & (MAX_SLOTS - 1);
	struct hist zero = {}, *h;
	struct dwarf_event *e;

	if (id != NR_GETPID || (target_tgid && tgid != target_tgid))
		return 0;
	__sync_fetch_and_add(seen, 1);
	__sync_fetch_and_add(&global_hist.slots[s], 1);
	h = bpf_map_lookup_elem(&hists, &tgid);
	if (!h) {
		bpf_map_update_elem(&hists, &tgid, &zero, BPF_NOEXIST);
		h = bpf_map_lookup_elem(&hists, &tgid);
	}
	if (h)
		__sync_fetch_and_add(&h->slots[s], 1);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->tgid = tgid;
	e->nr = id;
	e->seq = __sync_fetch_and_add(&sent, 1);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(enter_btf, struct pt_regs *regs, long id)
{
	return on_enter(id, &seen_by_tp_btf);
}

SEC("raw_tp/sys_enter")
int BPF_PROG(enter_raw, struct pt_regs *regs, long id)
{
	return on_enter(id, &seen_by_raw_tp);
}

char LICENSE[] SEC("license") = "GPL";
