// SPDX-License-Identifier: MIT
/* fentry, fmod_ret and fexit on bpf_modify_return_test(int a, int *b), the
 * kernel function that returns a + ++*b. fmod_ret returns override_ret (0
 * keeps the original function; non-zero skips it and becomes its result).
 * seq records the order the three programs ran in. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

int override_ret;
__u32 seq;
__u32 entry_seq, modret_seq, exit_seq;
int entry_a, entry_b, modret_ret_in, exit_ret, exit_b;

SEC("fentry/bpf_modify_return_test")
int BPF_PROG(mr_entry, int a, int *b)
{
	entry_seq = ++seq;
	entry_a = a;
	bpf_probe_read_kernel(&entry_b, sizeof(entry_b), b);
	return 0;
}

SEC("fmod_ret/bpf_modify_return_test")
int BPF_PROG(mr_modret, int a, int *b, int ret)
{
	modret_seq = ++seq;
	modret_ret_in = ret;
	return override_ret;
}

SEC("fexit/bpf_modify_return_test")
int BPF_PROG(mr_exit, int a, int *b, int ret)
{
	exit_seq = ++seq;
	exit_ret = ret;
	bpf_probe_read_kernel(&exit_b, sizeof(exit_b), b);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
