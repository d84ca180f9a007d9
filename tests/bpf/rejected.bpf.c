// SPDX-License-Identifier: MIT
/* A program the verifier must reject (for the live backend's VerifierError
 * test): it reads a map value without checking the lookup result for NULL.
 * The accepted sibling shows the same object otherwise loads. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} values SEC(".maps");

SEC("raw_tp/sys_enter")
int accepted(void *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&values, &k);

	if (v)
		*v += 1;
	return 0;
}

SEC("?raw_tp/sys_enter")
int unchecked_lookup(void *ctx)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&values, &k);

	return *v == 42; /* bpfmux: missing NULL check */
}

char LICENSE[] SEC("license") = "GPL";
