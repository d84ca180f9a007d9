// SPDX-License-Identifier: MIT
/* BTF-defined maps of every type the project uses, with pinning, flags and a
 * map-in-map with its inner map; one program that references each of them. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

struct val {
	__u64 count;
	__u32 flags;
	char tag[4];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, struct val);
} array_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 128);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, __u64);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} hash_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} percpu_array_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u32);
} percpu_hash_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32);
	__type(key, __u32);
	__type(value, struct val);
} lru_hash_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} ringbuf_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} perf_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 64);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 127 * sizeof(__u64));
} stack_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} prog_array_map SEC(".maps");

struct inner {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} inner_a SEC(".maps"), inner_b SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 2);
	__type(key, __u32);
	__array(values, struct inner);
} array_of_maps SEC(".maps") = {
	.values = { &inner_a, &inner_b },
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH_OF_MAPS);
	__uint(max_entries, 4);
	__type(key, __u32);
	__array(values, struct {
		__uint(type, BPF_MAP_TYPE_HASH);
		__uint(max_entries, 8);
		__type(key, __u32);
		__type(value, __u64);
	});
} hash_of_maps SEC(".maps");

SEC("raw_tp/sys_enter")
int use_maps(void *ctx)
{
	__u32 k = 0;
	__u64 k64 = 1, one = 1;
	struct val *v;
	__u64 *c;
	void *inner;
	__u32 *ic;

	v = bpf_map_lookup_elem(&array_map, &k);
	if (v)
		__sync_fetch_and_add(&v->count, 1);
	bpf_map_update_elem(&hash_map, &k64, &one, BPF_ANY);
	c = bpf_map_lookup_elem(&percpu_array_map, &k);
	if (c)
		*c += 1;
	bpf_map_update_elem(&percpu_hash_map, &k, &k, BPF_ANY);
	v = bpf_map_lookup_elem(&lru_hash_map, &k);
	if (v)
		v->flags |= 1;
	bpf_ringbuf_output(&ringbuf_map, &k64, sizeof(k64), 0);
	bpf_perf_event_output(ctx, &perf_map, BPF_F_CURRENT_CPU, &k64, sizeof(k64));
	bpf_get_stackid(ctx, &stack_map, 0);
	inner = bpf_map_lookup_elem(&array_of_maps, &k);
	if (inner) {
		ic = bpf_map_lookup_elem(inner, &k);
		if (ic)
			*ic += 1;
	}
	inner = bpf_map_lookup_elem(&hash_of_maps, &k);
	if (inner)
		bpf_map_update_elem(inner, &k, &one, BPF_ANY);
	bpf_tail_call(ctx, &prog_array_map, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
