// SPDX-License-Identifier: MIT
/* CO-RE relocations of every kind, against the project's own header (not a
 * vmlinux.h): field offsets through BPF_CORE_READ chains, field existence,
 * field size, type existence/size, enum value existence/value. A test
 * resolves them against the running kernel's BTF and compares with what the
 * kernel itself reports. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

__u64 core_out[16];

SEC("raw_tp/sys_enter")
int core_reads(void *ctx)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();

	core_out[0] = BPF_CORE_READ(task, pid);
	core_out[1] = BPF_CORE_READ(task, tgid);
	core_out[2] = BPF_CORE_READ(task, real_parent, tgid);
	core_out[3] = BPF_CORE_READ(task, group_leader, mm, total_vm);
	core_out[4] = bpf_core_field_exists(task->pid);
	core_out[5] = bpf_core_field_exists(task->bpfmux_no_such_field);
	core_out[6] = bpf_core_field_size(task->comm);
	core_out[7] = bpf_core_type_exists(struct task_struct);
	core_out[8] = bpf_core_type_exists(struct bpfmux_no_such_type);
	core_out[9] = bpf_core_type_size(struct task_struct);
	core_out[10] = bpf_core_enum_value_exists(enum pid_type, PIDTYPE_TGID);
	core_out[11] = bpf_core_enum_value(enum pid_type, PIDTYPE_SID);
	core_out[12] = bpf_core_field_offset(task->comm);
	core_out[13] = bpf_core_type_id_kernel(struct task_struct);
	bpf_core_read_str(&core_out[14], 16, &task->comm);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
