// SPDX-License-Identifier: MIT
/* kfunc and ksym externs: a kfunc call, a weak kfunc that does not exist,
 * a typed per-cpu ksym variable and an untyped ksym address (_stext:
 * kallsyms of a kernel without CONFIG_KALLSYMS_ALL has no data symbols). */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

extern void bpf_rcu_read_lock(void) __ksym;
extern void bpf_rcu_read_unlock(void) __ksym;
extern void bpfmux_no_such_kfunc(void) __ksym __weak;
extern const int bpf_prog_active __ksym;
extern const void _stext __ksym;

__u64 ksym_out[4];

SEC("tp_btf/sys_enter")
int use_kfuncs(void *ctx)
{
	bpf_rcu_read_lock();
	bpf_rcu_read_unlock();
	if (bpfmux_no_such_kfunc)
		bpfmux_no_such_kfunc();
	ksym_out[1] = (__u64)&_stext;
	ksym_out[2] = bpfmux_no_such_kfunc ? 1 : 0;
	return 0;
}

/* Not autoloaded ("?"): the kernel resolves a typed ksym variable through
 * kallsyms, which on kernels without CONFIG_KALLSYMS_ALL lacks it. */
SEC("?tp_btf/sys_enter")
int use_typed_ksym(void *ctx)
{
	const int *active = bpf_this_cpu_ptr(&bpf_prog_active);

	ksym_out[0] = *active;
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
