// SPDX-License-Identifier: MIT
/* Counts system calls per syscall number from the raw_syscalls:sys_enter
 * tracepoint (record layout of tracefs .../raw_syscalls/sys_enter/format),
 * optionally only for one process (target_tgid, 0 = every process). */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;
__u64 total_calls;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} syscall_counts SEC(".maps");

SEC("tracepoint/raw_syscalls/sys_enter")
int count_syscalls(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 id = ctx->id;
	__u64 one = 1, *count;

	if (target_tgid && tgid != target_tgid)
		return 0;
	__sync_fetch_and_add(&total_calls, 1);
	count = bpf_map_lookup_elem(&syscall_counts, &id);
	if (count)
		__sync_fetch_and_add(count, 1);
	else
		bpf_map_update_elem(&syscall_counts, &id, &one, BPF_NOEXIST);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
