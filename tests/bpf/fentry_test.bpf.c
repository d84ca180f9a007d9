// SPDX-License-Identifier: MIT
/* fentry programs on the kernel's BPF test functions bpf_fentry_test1..8
 * (net/bpf/test_run.c, run by BPF_PROG_TEST_RUN of any tracing program).
 * Each stores the arguments it sees and counts its calls, so a test can check
 * them against the values test_run passes (1; 2,3; 4,5,6; ...). */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

__u64 entry_args[8][6];
__u32 entry_calls[8];

SEC("fentry/bpf_fentry_test1")
int BPF_PROG(entry1, int a)
{
	entry_args[0][0] = a;
	entry_calls[0]++;
	return 0;
}

SEC("fentry/bpf_fentry_test2")
int BPF_PROG(entry2, int a, __u64 b)
{
	entry_args[1][0] = a;
	entry_args[1][1] = b;
	entry_calls[1]++;
	return 0;
}

SEC("fentry/bpf_fentry_test3")
int BPF_PROG(entry3, char a, int b, __u64 c)
{
	entry_args[2][0] = a;
	entry_args[2][1] = b;
	entry_args[2][2] = c;
	entry_calls[2]++;
	return 0;
}

SEC("fentry/bpf_fentry_test4")
int BPF_PROG(entry4, void *a, char b, int c, __u64 d)
{
	entry_args[3][0] = (__u64)a;
	entry_args[3][1] = b;
	entry_args[3][2] = c;
	entry_args[3][3] = d;
	entry_calls[3]++;
	return 0;
}

SEC("fentry/bpf_fentry_test5")
int BPF_PROG(entry5, __u64 a, void *b, short c, int d, __u64 e)
{
	entry_args[4][0] = a;
	entry_args[4][1] = (__u64)b;
	entry_args[4][2] = c;
	entry_args[4][3] = d;
	entry_args[4][4] = e;
	entry_calls[4]++;
	return 0;
}

SEC("fentry/bpf_fentry_test6")
int BPF_PROG(entry6, __u64 a, void *b, short c, int d, void *e, __u64 f)
{
	entry_args[5][0] = a;
	entry_args[5][1] = (__u64)b;
	entry_args[5][2] = c;
	entry_args[5][3] = d;
	entry_args[5][4] = (__u64)e;
	entry_args[5][5] = f;
	entry_calls[5]++;
	return 0;
}

SEC("fentry/bpf_fentry_test7")
int BPF_PROG(entry7, struct bpf_fentry_test_t *arg)
{
	entry_args[6][0] = (__u64)arg;
	entry_calls[6]++;
	return 0;
}

SEC("fentry/bpf_fentry_test8")
int BPF_PROG(entry8, struct bpf_fentry_test_t *arg)
{
	entry_args[7][0] = (__u64)arg->a;
	entry_calls[7]++;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
