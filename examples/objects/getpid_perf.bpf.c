// SPDX-License-Identifier: MIT
/* Like getpid_events.bpf.c, through a perf event array (bpf_perf_event_output)
 * instead of a ring buffer: 'bpfmux run' reads one perf ring per CPU. */
#include "../../tests/bpf/include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

struct getpid_sample {
	__u32 pid;
	__u32 cpu;
	__u64 seq;
};

const volatile __u32 target_tgid = 0;
__u64 samples_sent;
struct getpid_sample *sample_type_for_btf __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_PERF_EVENT_ARRAY);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(__u32));
} samples SEC(".maps");

SEC("raw_tp/sys_enter")
int on_sys_enter(__u64 *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct getpid_sample s = {};

	if (ctx[1] != 39 /* getpid on x86-64 */)
		return 0;
	if (target_tgid && (pid_tgid >> 32) != target_tgid)
		return 0;
	s.pid = pid_tgid >> 32;
	s.cpu = bpf_get_smp_processor_id();
	s.seq = __sync_fetch_and_add(&samples_sent, 1);
	bpf_perf_event_output(ctx, &samples, BPF_F_CURRENT_CPU, &s, sizeof(s));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
