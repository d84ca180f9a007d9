// SPDX-License-Identifier: MIT
/* The legacy "maps" section (struct bpf_map_def, no BTF for the map), which
 * libbpf >= 1.0 no longer loads but old objects still contain. The struct is
 * declared here because libbpf 1.x headers dropped it. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

struct legacy_map_def {
	unsigned int type;
	unsigned int key_size;
	unsigned int value_size;
	unsigned int max_entries;
	unsigned int map_flags;
};

struct legacy_map_def legacy_hash SEC("maps") = {
	.type = BPF_MAP_TYPE_HASH,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u64),
	.max_entries = 64,
	.map_flags = 0,
};

struct legacy_map_def legacy_array SEC("maps") = {
	.type = BPF_MAP_TYPE_ARRAY,
	.key_size = sizeof(__u32),
	.value_size = sizeof(__u32),
	.max_entries = 2,
	.map_flags = 0,
};

SEC("kprobe/do_sys_openat2")
int legacy_prog(void *ctx)
{
	__u32 k = 0;
	__u64 one = 1;
	__u32 *v;

	bpf_map_update_elem(&legacy_hash, &k, &one, BPF_ANY);
	v = bpf_map_lookup_elem(&legacy_array, &k);
	if (v)
		*v += 1;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
__u32 _version SEC("version") = 0x060c00;
