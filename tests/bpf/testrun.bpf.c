// SPDX-License-Identifier: MIT
/* Programs for BPF_PROG_TEST_RUN that exercise the instruction set, memory,
 * maps and helpers; results are written to the context (syscall type: the
 * caller reads ctx_out) and to globals, and the return value is a checksum
 * the emulator and the kernel must agree on. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct tr_ctx {
	__u64 a;
	__u64 b;
	__s64 s;
	__u64 out[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} arr SEC(".maps");

__u64 atom_val = 100;
__u64 tr_seen[4];

static int sum_cb(__u32 index, void *data)
{
	*(__u64 *)data += index + 1;
	return 0;
}

SEC("syscall")
int exercise(struct tr_ctx *ctx)
{
	__u64 a = ctx->a, b = ctx->b | 1;
	__s64 s = ctx->s;
	__u32 a32 = (__u32)a, b32 = (__u32)b;
	__u8 buf[32];
	__u64 sum = 0, v = 0, *p;
	__u32 k;
	int i;

	/* ALU64 and ALU32 */
	ctx->out[0] = (a + b) * 3 - (a >> 3) + (b << 5);
	ctx->out[1] = a / b + a % b;
	ctx->out[2] = (a32 / b32) + (a32 % b32) + (a32 ^ b32) + (a32 & 0xff00) + (a32 | 7);
	ctx->out[3] = (__u64)(s >> 7) + (__u64)(-s);
	ctx->out[4] = bpf_htons((__u16)a) | ((__u64)bpf_htonl((__u32)b) << 16);
	ctx->out[5] = __builtin_bswap64(a);
	/* memory: a byte buffer on the stack */
	for (i = 0; i < 32; i++)
		buf[i] = (__u8)(a + i * 7);
	for (i = 0; i < 32; i += 4)
		sum += *(__u32 *)&buf[i];
	ctx->out[6] = sum;
	/* atomics on a global */
	ctx->out[7] = __sync_fetch_and_add(&atom_val, 5);
	ctx->out[8] = __sync_val_compare_and_swap(&atom_val, 105, 7);
	ctx->out[9] = __sync_lock_test_and_set(&atom_val, a);
	/* maps */
#pragma unroll
	for (i = 0; i < 4; i++) {
		k = i;
		v = a * i;
		bpf_map_update_elem(&scratch, &k, &v, BPF_ANY);
	}
	k = 2;
	p = bpf_map_lookup_elem(&scratch, &k);
	ctx->out[10] = p ? *p : 0xdead;
	bpf_map_delete_elem(&scratch, &k);
	p = bpf_map_lookup_elem(&scratch, &k);
	ctx->out[11] = p ? 1 : 0;
	k = 3;
	p = bpf_map_lookup_elem(&arr, &k);
	if (p) {
		*p += b;
		ctx->out[12] = *p;
	}
	/* helpers */
	sum = 0;
	bpf_loop(8, sum_cb, &sum, 0);
	ctx->out[13] = sum;
	v = 0;
	bpf_probe_read_kernel(&v, sizeof(v), &ctx->a);
	ctx->out[14] = v;
	ctx->out[15] = bpf_strncmp((const char *)buf, 4, "abc");
	tr_seen[0]++;
	return (int)(ctx->out[0] ^ ctx->out[1] ^ ctx->out[6] ^ ctx->out[13]);
}

/* raw_tp flavour: BPF_PROG_TEST_RUN passes ctx as an array of u64 arguments */
SEC("raw_tp")
int exercise_raw(__u64 *args)
{
	__u64 a = args[0], b = args[1];
	__u32 k = 0;
	__u64 *p;

	tr_seen[1] = a * b + (a ^ b);
	p = bpf_map_lookup_elem(&arr, &k);
	if (p)
		*p = a + b;
	tr_seen[2] = bpf_get_current_pid_tgid() ? 1 : 0;
	return (int)(a + b);
}

char LICENSE[] SEC("license") = "GPL";
