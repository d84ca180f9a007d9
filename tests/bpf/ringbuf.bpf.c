// SPDX-License-Identifier: MIT
/* Ring buffer producers: a tracepoint program that emits one event per
 * getpid() of the target process, and a syscall program (runnable with
 * BPF_PROG_TEST_RUN) that emits ctx->count events with reserve/submit, one
 * discarded record and one bpf_ringbuf_output record. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

struct event {
	__u32 pid;
	__u32 tgid;
	__u64 seq;
	char comm[16];
};

struct produce_args {
	__u32 count;
	__u32 base;
};

const volatile __u32 target_tgid = 0;
__u64 produced, dropped;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
} events SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getpid")
int on_getpid(void *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct event *e;

	if (target_tgid && (pid_tgid >> 32) != target_tgid)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		__sync_fetch_and_add(&dropped, 1);
		return 0;
	}
	e->pid = (__u32)pid_tgid;
	e->tgid = pid_tgid >> 32;
	e->seq = __sync_fetch_and_add(&produced, 1);
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("syscall")
int produce(struct produce_args *args)
{
	struct event *e, tail = {};
	__u32 i, n = args->count;

	if (n > 64)
		n = 64;
	for (i = 0; i < n; i++) {
		e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (!e) {
			dropped++;
			continue;
		}
		e->pid = 0;
		e->tgid = 0;
		e->seq = args->base + i;
		__builtin_memset(e->comm, 0, sizeof(e->comm));
		bpf_ringbuf_submit(e, 0);
		produced++;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (e)
		bpf_ringbuf_discard(e, 0);
	tail.seq = 0xffffffff;
	bpf_ringbuf_output(&events, &tail, sizeof(tail), 0);
	return n;
}

char LICENSE[] SEC("license") = "GPL";
