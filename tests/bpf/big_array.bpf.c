// SPDX-License-Identifier: MIT
/* A 256 MiB ARRAY (2**25 entries of 8 bytes): within the emulated kernel's
 * default memory budget, too large to dump by building a dict of every
 * entry. tests/unit/test_hostile_inputs.py dumps it with bpfmux emulate. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 25);
	__type(key, __u32);
	__type(value, __u64);
} big SEC(".maps");

SEC("fentry/bpf_fentry_test1")
int BPF_PROG(mark_big, int a)
{
	__u32 key = (1 << 25) - 1;
	__u64 *v = bpf_map_lookup_elem(&big, &key);

	if (v)
		*v += a;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
