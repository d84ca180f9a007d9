// SPDX-License-Identifier: MIT
/* bpf-to-bpf calls: static and global subprograms in .text, shared by two
 * programs, a subprogram address load (bpf_loop callback) and a recursive
 * call chain three deep. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

__u64 results[4];

static __attribute__((noinline)) __u64 mix(__u64 a, __u64 b)
{
	return (a * 31) ^ (b + 7);
}

static __attribute__((noinline)) __u64 twice(__u64 a)
{
	return mix(a, a) + mix(a + 1, 3);
}

/* global function: verified on its own by the kernel */
__attribute__((noinline)) int global_add(int a, int b)
{
	return a + b;
}

struct loop_ctx {
	__u64 sum;
};

static int loop_body(__u32 index, void *data)
{
	struct loop_ctx *c = data;

	c->sum += index * index;
	return 0;
}

SEC("syscall")
int caller_one(void *ctx)
{
	struct loop_ctx c = { 0 };

	results[0] = twice(5);
	results[1] = global_add(40, 2);
	bpf_loop(10, loop_body, &c, 0);
	results[2] = c.sum;
	return 0;
}

SEC("raw_tp")
int caller_two(void *ctx)
{
	results[3] = mix(1, 2) + global_add(1, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
