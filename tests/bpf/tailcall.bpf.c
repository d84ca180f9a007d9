// SPDX-License-Identifier: MIT
/* Tail calls through a statically initialised program array: the entry
 * program jumps to jump_table[args[0]]; slot 1 is left empty (the tail call
 * falls through). Runnable with BPF_PROG_TEST_RUN (raw_tp). */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

__u64 tail_trace[4];

SEC("raw_tp")
int tail_a(__u64 *args)
{
	tail_trace[1] = 0xa;
	return 10;
}

SEC("raw_tp")
int tail_b(__u64 *args)
{
	tail_trace[2] = 0xb;
	return 20;
}

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, int(__u64 *));
} jump_table SEC(".maps") = {
	.values = {
		[0] = (void *)&tail_a,
		[2] = (void *)&tail_b,
	},
};

SEC("raw_tp")
int tail_entry(__u64 *args)
{
	tail_trace[0]++;
	bpf_tail_call(args, &jump_table, (__u32)args[0]);
	tail_trace[3] = 0xfa11;
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
