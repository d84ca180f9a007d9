// SPDX-License-Identifier: MIT
/* fexit programs on bpf_fentry_test1..8: each stores the arguments and the
 * return value it sees (the return value is the last BPF_PROG argument). */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

__u64 exit_args[8][6];
__u64 exit_ret[8];
__u32 exit_calls[8];

SEC("fexit/bpf_fentry_test1")
int BPF_PROG(exit1, int a, int ret)
{
	exit_args[0][0] = a;
	exit_ret[0] = ret;
	exit_calls[0]++;
	return 0;
}

SEC("fexit/bpf_fentry_test2")
int BPF_PROG(exit2, int a, __u64 b, int ret)
{
	exit_args[1][0] = a;
	exit_args[1][1] = b;
	exit_ret[1] = ret;
	exit_calls[1]++;
	return 0;
}

SEC("fexit/bpf_fentry_test3")
int BPF_PROG(exit3, char a, int b, __u64 c, int ret)
{
	exit_args[2][0] = a;
	exit_args[2][1] = b;
	exit_args[2][2] = c;
	exit_ret[2] = ret;
	exit_calls[2]++;
	return 0;
}

SEC("fexit/bpf_fentry_test4")
int BPF_PROG(exit4, void *a, char b, int c, __u64 d, int ret)
{
	exit_args[3][0] = (__u64)a;
	exit_args[3][1] = b;
	exit_args[3][2] = c;
	exit_args[3][3] = d;
	exit_ret[3] = ret;
	exit_calls[3]++;
	return 0;
}

SEC("fexit/bpf_fentry_test5")
int BPF_PROG(exit5, __u64 a, void *b, short c, int d, __u64 e, int ret)
{
	exit_args[4][0] = a;
	exit_args[4][1] = (__u64)b;
	exit_args[4][2] = c;
	exit_args[4][3] = d;
	exit_args[4][4] = e;
	exit_ret[4] = ret;
	exit_calls[4]++;
	return 0;
}

SEC("fexit/bpf_fentry_test6")
int BPF_PROG(exit6, __u64 a, void *b, short c, int d, void *e, __u64 f, int ret)
{
	exit_args[5][0] = a;
	exit_args[5][1] = (__u64)b;
	exit_args[5][2] = c;
	exit_args[5][3] = d;
	exit_args[5][4] = (__u64)e;
	exit_args[5][5] = f;
	exit_ret[5] = ret;
	exit_calls[5]++;
	return 0;
}

SEC("fexit/bpf_fentry_test7")
int BPF_PROG(exit7, struct bpf_fentry_test_t *arg, int ret)
{
	exit_args[6][0] = (__u64)arg;
	exit_ret[6] = ret;
	exit_calls[6]++;
	return 0;
}

SEC("fexit/bpf_fentry_test8")
int BPF_PROG(exit8, struct bpf_fentry_test_t *arg, int ret)
{
	exit_args[7][0] = (__u64)arg;
	exit_ret[7] = ret;
	exit_calls[7]++;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
