// SPDX-License-Identifier: MIT
/* Global data of every kind: .data, .rodata, .bss, custom .data.* and
 * .rodata.* sections, and .kconfig externs. The syscall program can be run
 * with BPF_PROG_TEST_RUN; it copies what it reads into .bss so a test can
 * check that relocations and initial contents are right. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

/* .data */
__u64 data_counter = 42;
int data_array[4] = { 1, 2, 3, 4 };
/* .rodata (const volatile: the usual pattern for load-time configuration) */
const volatile __u32 ro_config = 7;
const volatile char ro_name[8] = "bpfmux";
/* .bss */
__u64 bss_out[8];
__u32 bss_seen;
/* custom sections: each is its own map */
__u32 foo_value SEC(".data.foo") = 0xf00;
__u64 foo_pair[2] SEC(".data.foo") = { 11, 22 };
const volatile __u64 bar_const SEC(".rodata.bar") = 0xba5;
/* static (file-local) data lands in the same sections */
static __u32 static_counter = 5;

/* kconfig externs, filled in by the loader */
extern unsigned int LINUX_KERNEL_VERSION __kconfig;
extern bool CONFIG_BPF_SYSCALL __kconfig;
extern int CONFIG_HZ __kconfig __weak;
extern bool CONFIG_BPFMUX_NOT_A_REAL_OPTION __kconfig __weak;

SEC("syscall")
int read_globals(void *ctx)
{
	bss_out[0] = data_counter;
	bss_out[1] = data_array[2];
	bss_out[2] = ro_config;
	bss_out[3] = ro_name[1];
	bss_out[4] = foo_value + foo_pair[1];
	bss_out[5] = bar_const;
	bss_out[6] = LINUX_KERNEL_VERSION;
	bss_out[7] = (CONFIG_BPF_SYSCALL ? 1 : 0) | (CONFIG_BPFMUX_NOT_A_REAL_OPTION ? 2 : 0) |
		     ((__u64)CONFIG_HZ << 8);
	data_counter += 1;
	static_counter += 1;
	bss_seen = static_counter;
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
