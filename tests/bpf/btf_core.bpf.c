// SPDX-License-Identifier: MIT
/* CO-RE relocations for the BTF package's resolver, compared with what libbpf
 * computes for the same object: ___flavor types, bitfields (byte offset,
 * byte size, signedness, left/right shifts), array element access, fields in
 * anonymous members, a field no kernel has (poisoned when not guarded), local
 * and target type ids, type existence/size (clang 14 cannot emit type_matches), enum values of a flavored
 * enum and a 64-bit enum. Local layouts deliberately differ from the kernel's. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

struct mm_struct___mine {
	unsigned long total_vm;
} __attribute__((preserve_access_index));

struct task_struct___mine {
	char comm[16];
	int tgid;
	int pid;
	struct mm_struct___mine *mm;
	unsigned int sched_reset_on_fork:1;
	unsigned int sched_contributes_to_load:1;
	unsigned int init_private_fork_class:4;
	int bpfmux_missing;
} __attribute__((preserve_access_index));

struct sk_buff___mine {
	__u8 pkt_type:3;
	__u8 cloned:1;
	__u8 fclone:2;
	unsigned int len;
} __attribute__((preserve_access_index));

enum pid_type___mine { PIDTYPE_PID___mine = 9, PIDTYPE_SID___mine = 7 };
enum perf_callchain_context___mine { PERF_CONTEXT_USER___mine = 1 };

__u64 out[32];

SEC("raw_tp/sys_enter")
int core_flavors(void *ctx)
{
	struct task_struct___mine *t = (void *)bpf_get_current_task();
	struct sk_buff___mine *skb = (void *)ctx;

	out[0] = BPF_CORE_READ(t, pid);
	out[1] = BPF_CORE_READ(t, mm, total_vm);
	out[2] = BPF_CORE_READ_BITFIELD_PROBED(t, sched_contributes_to_load);
	out[3] = BPF_CORE_READ_BITFIELD_PROBED(t, init_private_fork_class);
	out[4] = BPF_CORE_READ_BITFIELD_PROBED(skb, pkt_type);
	out[5] = BPF_CORE_READ_BITFIELD_PROBED(skb, fclone);
	out[6] = __builtin_preserve_field_info(t->pid, BPF_FIELD_SIGNED);
	out[7] = bpf_core_field_size(t->comm[3]);
	out[8] = bpf_core_field_offset(t->comm[5]);
	out[9] = bpf_core_type_id_local(struct task_struct___mine);
	out[10] = bpf_core_type_id_kernel(struct sk_buff___mine);
	out[11] = bpf_core_type_size(struct sk_buff___mine);
	out[13] = bpf_core_enum_value(enum pid_type___mine, PIDTYPE_SID___mine);
	out[14] = bpf_core_enum_value_exists(enum pid_type___mine, PIDTYPE_PID___mine);
	out[15] = bpf_core_enum_value(enum perf_callchain_context___mine, PERF_CONTEXT_USER___mine);
	if (bpf_core_field_exists(t->bpfmux_missing))
		out[16] = BPF_CORE_READ(t, bpfmux_missing);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
