// SPDX-License-Identifier: MIT
/* An ARRAY as large as the u32 index space allows (4G entries of 8 bytes,
 * 32 GiB): a kernel refuses it with ENOMEM, and so must the emulator,
 * before allocating anything. tests/unit/test_hostile_inputs.py loads it. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 0xffffffff);
	__type(key, __u32);
	__type(value, __u64);
} huge SEC(".maps");

SEC("fentry/bpf_fentry_test1")
int BPF_PROG(touch_huge, int a)
{
	__u32 key = 0xfffffffe;
	__u64 *v = bpf_map_lookup_elem(&huge, &key);

	if (v)
		*v += 1;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
