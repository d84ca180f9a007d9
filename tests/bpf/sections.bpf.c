// SPDX-License-Identifier: MIT
/* One small program per section kind the loader must understand, including
 * sleepable ".s" variants, the "?" (no autoload) prefix, targetless sections
 * (attached by hand), the 2026 mainline tracing-multi sections and the seed's
 * multi-function sections "fentry.multi_func/<glob>" / "fexit.multi_func/<glob>". */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

__u64 hits;

#define BODY { __sync_fetch_and_add(&hits, 1); return 0; }

SEC("tracepoint/syscalls/sys_enter_getpid") int s_tracepoint(void *ctx) BODY
SEC("tp/sched/sched_switch") int s_tp(void *ctx) BODY
SEC("raw_tp/sys_enter") int s_raw_tp(void *ctx) BODY
SEC("raw_tracepoint/sys_exit") int s_raw_tracepoint(void *ctx) BODY
SEC("raw_tp") int s_raw_tp_manual(void *ctx) BODY
SEC("raw_tp.w/bpf_test_finish") int s_raw_tp_writable(void *ctx) BODY
SEC("tp_btf/sched_switch") int s_tp_btf(void *ctx) BODY
SEC("kprobe/do_nanosleep") int s_kprobe(struct pt_regs *ctx) BODY
SEC("kretprobe/do_nanosleep") int s_kretprobe(struct pt_regs *ctx) BODY
SEC("kprobe") int s_kprobe_manual(struct pt_regs *ctx) BODY
SEC("kprobe.multi/bpf_fentry_test*") int s_kprobe_multi(struct pt_regs *ctx) BODY
SEC("kretprobe.multi/bpf_fentry_test*") int s_kretprobe_multi(struct pt_regs *ctx) BODY
SEC("kprobe.session/bpf_fentry_test1") int s_kprobe_session(struct pt_regs *ctx) BODY
SEC("ksyscall/getpid") int s_ksyscall(struct pt_regs *ctx) BODY
SEC("uprobe//proc/self/exe:main") int s_uprobe(struct pt_regs *ctx) BODY
SEC("uretprobe//proc/self/exe:main") int s_uretprobe(struct pt_regs *ctx) BODY
SEC("uprobe.s//proc/self/exe:main") int s_uprobe_sleepable(struct pt_regs *ctx) BODY
SEC("uprobe") int s_uprobe_manual(struct pt_regs *ctx) BODY
SEC("uprobe.multi//proc/self/exe:bpfmux_*") int s_uprobe_multi(struct pt_regs *ctx) BODY
SEC("uretprobe.multi//proc/self/exe:bpfmux_*") int s_uretprobe_multi(struct pt_regs *ctx) BODY
SEC("uprobe.session//proc/self/exe:main") int s_uprobe_session(struct pt_regs *ctx) BODY
SEC("usdt") int s_usdt_manual(struct pt_regs *ctx) BODY
SEC("fentry/bpf_fentry_test1") int s_fentry(void *ctx) BODY
SEC("fexit/bpf_fentry_test1") int s_fexit(void *ctx) BODY
SEC("fmod_ret/bpf_modify_return_test") int s_fmod_ret(void *ctx) BODY
SEC("fentry.s/bpf_fentry_test1") int s_fentry_sleepable(void *ctx) BODY
SEC("fentry.multi/bpf_fentry_test*") int s_fentry_multi(void *ctx) BODY
SEC("fexit.multi/bpf_fentry_test*") int s_fexit_multi(void *ctx) BODY
SEC("fsession.multi/bpf_fentry_test*") int s_fsession_multi(void *ctx) BODY
SEC("fentry.multi_func/bpf_fentry_test*") int s_seed_fentry_multi(void *ctx) BODY
SEC("fexit.multi_func/bpf_fentry_test*") int s_seed_fexit_multi(void *ctx) BODY
SEC("perf_event") int s_perf_event(void *ctx) BODY
SEC("socket") int s_socket(struct __sk_buff *skb) BODY
SEC("syscall") int s_syscall(void *ctx) BODY
SEC("xdp") int s_xdp(struct xdp_md *ctx) { return XDP_PASS; }
SEC("tc") int s_tc(struct __sk_buff *skb) BODY
SEC("lsm/bpf") int s_lsm(void *ctx) BODY
SEC("?raw_tp/sys_enter") int s_no_autoload(void *ctx) BODY

char LICENSE[] SEC("license") = "GPL";
