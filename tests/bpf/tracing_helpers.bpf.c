// SPDX-License-Identifier: MIT
/* The tracing helpers (bpf_get_func_ip, bpf_get_func_arg_cnt,
 * bpf_get_func_arg, bpf_get_func_ret, bpf_get_attach_cookie) in single and
 * multi programs, on bpf_fentry_test3(char a, int b, u64 c) (returns a+b+c).
 * Each program stores what the helpers returned, so the emulated kernel and a
 * real kernel can be compared value by value. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

struct seen {
	__u64 calls;
	__u64 ip;
	__s64 arg_cnt;
	__s64 arg_err[4];   /* return of bpf_get_func_arg(ctx, i, ...) */
	__u64 args[4];
	__s64 ret_err;      /* return of bpf_get_func_ret */
	__u64 ret;
	__u64 cookie;
};

struct seen fentry_seen, fexit_seen, fmod_ret_seen, seed_seen, mainline_seen;

static __always_inline void look(void *ctx, struct seen *s)
{
	int i;

	s->calls++;
	s->ip = bpf_get_func_ip(ctx);
	s->arg_cnt = bpf_get_func_arg_cnt(ctx);
	for (i = 0; i < 4; i++)
		s->arg_err[i] = bpf_get_func_arg(ctx, i, &s->args[i]);
	s->ret_err = bpf_get_func_ret(ctx, &s->ret);
	s->cookie = bpf_get_attach_cookie(ctx);
}

SEC("fentry/bpf_fentry_test3")
int fentry3(void *ctx)
{
	look(ctx, &fentry_seen);
	return 0;
}

SEC("fexit/bpf_fentry_test3")
int fexit3(void *ctx)
{
	look(ctx, &fexit_seen);
	return 0;
}

SEC("fmod_ret/bpf_modify_return_test")
int modret(void *ctx)
{
	look(ctx, &fmod_ret_seen);
	return 0;
}

SEC("fexit.multi_func/bpf_fentry_test3")
int seed_exit3(void *ctx)
{
	look(ctx, &seed_seen);
	return 0;
}

SEC("fexit.multi/bpf_fentry_test3")
int mainline_exit3(void *ctx)
{
	look(ctx, &mainline_seen);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
