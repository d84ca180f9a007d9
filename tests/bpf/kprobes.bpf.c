// SPDX-License-Identifier: MIT
/* Kprobe programs for the VM tier (tests/guest; the host kernel has no
 * kprobes): a kprobe and a kretprobe, kprobe_multi entry and return programs
 * and a kprobe session, all on the kernel's BPF test functions that
 * BPF_PROG_TEST_RUN of a tracing program calls (bpf_fentry_test1..9). Each
 * records, per function ip (bpf_get_func_ip), its calls, first two arguments,
 * return value and attach cookie, so a test can check which functions fired
 * with what. Two targetless kprobe programs count into own_a/own_b for the
 * ownership case (many programs on one kprobe event). */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

struct hit {
	__u64 calls;
	__u64 arg1;
	__u64 arg2;
	__u64 ret;
	__u64 cookie;
};

#define HITS(name)                                   \
	struct {                                     \
		__uint(type, BPF_MAP_TYPE_HASH);     \
		__uint(max_entries, 64);             \
		__type(key, __u64);                  \
		__type(value, struct hit);           \
	} name SEC(".maps")

HITS(kprobe_hits);
HITS(kretprobe_hits);
HITS(multi_entry_hits);
HITS(multi_exit_hits);
HITS(session_entry_hits);
HITS(session_exit_hits);

__u64 own_a, own_b;

extern bool bpf_session_is_return(void) __ksym __weak;
extern __u64 *bpf_session_cookie(void) __ksym __weak;

static __attribute__((noinline)) int record(void *map, __u64 ip, struct hit *h)
{
	struct hit *v = bpf_map_lookup_elem(map, &ip);

	if (v) {
		__sync_fetch_and_add(&v->calls, 1);
		v->arg1 = h->arg1;
		v->arg2 = h->arg2;
		v->ret = h->ret;
		v->cookie = h->cookie;
		return 0;
	}
	h->calls = 1;
	bpf_map_update_elem(map, &ip, h, BPF_ANY);
	return 0;
}

SEC("kprobe/bpf_fentry_test2")
int kp_entry(struct pt_regs *ctx)
{
	struct hit h = { .arg1 = PT_REGS_PARM1(ctx), .arg2 = PT_REGS_PARM2(ctx), .cookie = bpf_get_attach_cookie(ctx) };

	return record(&kprobe_hits, bpf_get_func_ip(ctx), &h);
}

SEC("kretprobe/bpf_fentry_test2")
int kp_exit(struct pt_regs *ctx)
{
	struct hit h = { .ret = PT_REGS_RC(ctx), .cookie = bpf_get_attach_cookie(ctx) };

	return record(&kretprobe_hits, bpf_get_func_ip(ctx), &h);
}

SEC("kprobe.multi/bpf_fentry_test*")
int multi_entry(struct pt_regs *ctx)
{
	struct hit h = { .arg1 = PT_REGS_PARM1(ctx), .arg2 = PT_REGS_PARM2(ctx), .cookie = bpf_get_attach_cookie(ctx) };

	return record(&multi_entry_hits, bpf_get_func_ip(ctx), &h);
}

SEC("kretprobe.multi/bpf_fentry_test*")
int multi_exit(struct pt_regs *ctx)
{
	struct hit h = { .ret = PT_REGS_RC(ctx), .cookie = bpf_get_attach_cookie(ctx) };

	return record(&multi_exit_hits, bpf_get_func_ip(ctx), &h);
}

/* Entry stores arg1 * 1000 + 7 in the session cookie and returns 1 (no
 * return probe) for arg1 == 2, i.e. for bpf_fentry_test2(2, 3); the return
 * half records the session cookie it finds as arg1. */
SEC("kprobe.session/bpf_fentry_test*")
int session(struct pt_regs *ctx)
{
	__u64 *sc = bpf_session_cookie();
	struct hit h = { .cookie = bpf_get_attach_cookie(ctx) };

	if (!bpf_session_is_return()) {
		h.arg1 = PT_REGS_PARM1(ctx);
		h.arg2 = PT_REGS_PARM2(ctx);
		*sc = h.arg1 * 1000 + 7;
		record(&session_entry_hits, bpf_get_func_ip(ctx), &h);
		return h.arg1 == 2;
	}
	h.arg1 = *sc;
	h.ret = PT_REGS_RC(ctx);
	return record(&session_exit_hits, bpf_get_func_ip(ctx), &h);
}

SEC("kprobe")
int own_prog_a(struct pt_regs *ctx)
{
	__sync_fetch_and_add(&own_a, 1);
	return 0;
}

SEC("kprobe")
int own_prog_b(struct pt_regs *ctx)
{
	__sync_fetch_and_add(&own_b, 1);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
