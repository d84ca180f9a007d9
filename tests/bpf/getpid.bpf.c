// SPDX-License-Identifier: MIT
/* Counts getpid() calls (x86-64 syscall 39) of one process through the
 * sys_enter raw tracepoint, whose arguments are (struct pt_regs *, long id). */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

#define NR_GETPID 39

const volatile __u32 target_tgid = 0;
__u64 getpid_calls;
__u32 last_tid;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} getpid_percpu SEC(".maps");

SEC("raw_tp/sys_enter")
int count_getpid(__u64 *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 zero = 0;
	__u64 *c;

	if (ctx[1] != NR_GETPID)
		return 0;
	if (target_tgid && (pid_tgid >> 32) != target_tgid)
		return 0;
	__sync_fetch_and_add(&getpid_calls, 1);
	last_tid = (__u32)pid_tgid;
	c = bpf_map_lookup_elem(&getpid_percpu, &zero);
	if (c)
		*c += 1;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
