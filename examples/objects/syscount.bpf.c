// SPDX-License-Identifier: MIT
/* System calls per syscall number of one process (target_tgid; 0 = all),
 * from the sys_enter raw tracepoint; 'bpfmux run' dumps the hash map at exit. */
#include "../../tests/bpf/include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

const volatile __u32 target_tgid = 0;
__u64 total;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} calls_by_nr SEC(".maps");

SEC("raw_tp/sys_enter")
int count_syscalls(__u64 *ctx)
{
	__u32 nr = ctx[1];
	__u64 one = 1, *c;

	if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	__sync_fetch_and_add(&total, 1);
	c = bpf_map_lookup_elem(&calls_by_nr, &nr);
	if (c)
		__sync_fetch_and_add(c, 1);
	else
		bpf_map_update_elem(&calls_by_nr, &nr, &one, BPF_NOEXIST);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
