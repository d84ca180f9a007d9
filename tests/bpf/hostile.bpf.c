// SPDX-License-Identifier: MIT
/* A program the verifier accepts that no emulator can finish: bpf_loop at
 * its largest count (2**23) inside a bpf_loop callback at its largest count,
 * 2**46 callback calls. The run budget must end it within seconds;
 * tests/unit/test_hostile_inputs.py runs it. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define MAX_LOOPS (1 << 23)

__u64 inner_calls;

static long inner(__u64 i, void *ctx)
{
	inner_calls++;
	return 0;
}

static long outer(__u64 i, void *ctx)
{
	bpf_loop(MAX_LOOPS, inner, 0, 0);
	return 0;
}

SEC("fentry/bpf_fentry_test1")
int BPF_PROG(nested_loops, int a)
{
	bpf_loop(MAX_LOOPS, outer, 0, 0);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
