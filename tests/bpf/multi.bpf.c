// SPDX-License-Identifier: MIT
/* One program on many functions, both ABIs:
 *  - the seed's (2021) multi-function programs, section prefix
 *    "fentry.multi_func/" and "fexit.multi_func/": BPF_PROG_TYPE_TRACING with
 *    BPF_F_MULTI_FUNC; ctx[0] is the traced function's ip, ctx[1..6] its
 *    arguments and ctx[7] its return value;
 *  - the 2026 mainline tracing-multi programs ("fentry.multi/",
 *    "fexit.multi/"): ctx points at arg1, ip/args/ret only through helpers.
 * Both count calls per ip and record the first argument per ip. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

struct per_ip {
	__u64 calls;
	__u64 arg1;
	__u64 ret;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u64);
	__type(value, struct per_ip);
} seed_entry_by_ip SEC(".maps"), seed_exit_by_ip SEC(".maps"),
  mainline_entry_by_ip SEC(".maps"), mainline_exit_by_ip SEC(".maps");

static __attribute__((noinline)) int record(void *map, __u64 ip, __u64 arg1, __u64 ret)
{
	struct per_ip init = { 1, arg1, ret }, *v;

	v = bpf_map_lookup_elem(map, &ip);
	if (v) {
		__sync_fetch_and_add(&v->calls, 1);
		v->arg1 = arg1;
		v->ret = ret;
		return 0;
	}
	bpf_map_update_elem(map, &ip, &init, BPF_ANY);
	return 0;
}

SEC("fentry.multi_func/bpf_fentry_test*")
int seed_entry(__u64 *ctx)
{
	return record(&seed_entry_by_ip, ctx[0], ctx[1], 0);
}

SEC("fexit.multi_func/bpf_fentry_test*")
int seed_exit(__u64 *ctx)
{
	return record(&seed_exit_by_ip, ctx[0], ctx[1], ctx[7]);
}

SEC("fentry.multi/bpf_fentry_test*")
int mainline_entry(void *ctx)
{
	__u64 arg1 = 0;

	bpf_get_func_arg(ctx, 0, &arg1);
	return record(&mainline_entry_by_ip, bpf_get_func_ip(ctx), arg1, 0);
}

SEC("fexit.multi/bpf_fentry_test*")
int mainline_exit(void *ctx)
{
	__u64 arg1 = 0, ret = 0;

	bpf_get_func_arg(ctx, 0, &arg1);
	bpf_get_func_ret(ctx, &ret);
	return record(&mainline_exit_by_ip, bpf_get_func_ip(ctx), arg1, ret);
}

char LICENSE[] SEC("license") = "GPL";
