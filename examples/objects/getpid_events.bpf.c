// SPDX-License-Identifier: MIT
/* One ring buffer event per getpid() of the target process (set target_tgid,
 * or run with: bpfmux run getpid_events.bpf.o -c CMD --pid-var target_tgid).
 * The event struct is named in a global so the object's BTF describes it and
 * 'bpfmux run' decodes the events field by field. */
#include "../../tests/bpf/include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

struct getpid_event {
	__u32 pid;
	__u32 tid;
	__u64 seq;
	char comm[16];
};

const volatile __u32 target_tgid = 0;
__u64 events_sent;
struct getpid_event *event_type_for_btf __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

SEC("raw_tp/sys_enter")
int on_sys_enter(__u64 *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct getpid_event *e;

	if (ctx[1] != 39 /* getpid on x86-64 */)
		return 0;
	if (target_tgid && (pid_tgid >> 32) != target_tgid)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e)
		return 0;
	e->pid = pid_tgid >> 32;
	e->tid = (__u32)pid_tgid;
	e->seq = __sync_fetch_and_add(&events_sent, 1);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
