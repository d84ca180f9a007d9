/* SPDX-License-Identifier: MIT */
/*
 * bpfmux test header: the few kernel types and uapi constants the test
 * programs use, written for this project so that a rebuild gives the same
 * objects on any machine (no dependency on the build machine's vmlinux.h or
 * kernel headers). Kernel structs carry preserve_access_index, so every field
 * access through them is a CO-RE relocation, as with a generated vmlinux.h.
 */
#ifndef BPFMUX_TEST_H
#define BPFMUX_TEST_H

/* bpf_tracing.h picks the kernel's pt_regs field names when this is set. */
#define __VMLINUX_H__ 1

typedef unsigned char __u8;
typedef signed char __s8;
typedef unsigned short __u16;
typedef short __s16;
typedef unsigned int __u32;
typedef int __s32;
typedef unsigned long long __u64;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;
#define true 1
#define false 0
#define NULL ((void *)0)

/* enum bpf_map_type (uapi values) */
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_PROG_ARRAY 3
#define BPF_MAP_TYPE_PERF_EVENT_ARRAY 4
#define BPF_MAP_TYPE_PERCPU_HASH 5
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_STACK_TRACE 7
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_MAP_TYPE_LRU_PERCPU_HASH 10
#define BPF_MAP_TYPE_ARRAY_OF_MAPS 12
#define BPF_MAP_TYPE_HASH_OF_MAPS 13
#define BPF_MAP_TYPE_RINGBUF 27

/* map flags and helper flags */
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define BPF_EXIST 2
#define BPF_F_NO_PREALLOC (1U << 0)
#define BPF_F_NO_COMMON_LRU (1U << 1)
#define BPF_F_RDONLY_PROG (1U << 7)
#define BPF_F_MMAPABLE (1U << 10)
#define BPF_F_CURRENT_CPU 0xffffffffULL
#define BPF_F_USER_STACK (1ULL << 8)

/* x86-64 struct pt_regs, kernel field names */
struct pt_regs {
	unsigned long r15;
	unsigned long r14;
	unsigned long r13;
	unsigned long r12;
	unsigned long bp;
	unsigned long bx;
	unsigned long r11;
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long ax;
	unsigned long cx;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
	unsigned long ip;
	unsigned long cs;
	unsigned long flags;
	unsigned long sp;
	unsigned long ss;
};

typedef __u64 bpf_user_pt_regs_t;
struct bpf_perf_event_data {
	bpf_user_pt_regs_t regs[21];
	__u64 sample_period;
	__u64 addr;
};

struct __sk_buff {
	__u32 len;
	__u32 pkt_type;
	__u32 mark;
	__u32 queue_mapping;
	__u32 protocol;
};

struct xdp_md {
	__u32 data;
	__u32 data_end;
	__u32 data_meta;
	__u32 ingress_ifindex;
	__u32 rx_queue_index;
	__u32 egress_ifindex;
};

enum xdp_action { XDP_ABORTED = 0, XDP_DROP, XDP_PASS, XDP_TX, XDP_REDIRECT };

/* tracepoint records: 8-byte common header, then the fields of tracefs format */
struct trace_entry {
	unsigned short type;
	unsigned char flags;
	unsigned char preempt_count;
	int pid;
};

struct trace_event_raw_sys_enter {
	struct trace_entry ent;
	long id;
	unsigned long args[6];
};

struct trace_event_raw_sched_switch {
	struct trace_entry ent;
	char prev_comm[16];
	int prev_pid;
	int prev_prio;
	long prev_state;
	char next_comm[16];
	int next_pid;
	int next_prio;
};

/* kernel types, CO-RE relocatable (subsets of the real layouts) */
#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct list_head {
	struct list_head *next;
	struct list_head *prev;
};

struct mm_struct {
	unsigned long total_vm;
};

struct task_struct {
	unsigned int __state;
	int prio;
	struct mm_struct *mm;
	int pid;
	int tgid;
	struct task_struct *real_parent;
	struct task_struct *group_leader;
	char comm[16];
	/* not in any kernel: bpf_core_field_exists() must give 0 */
	int bpfmux_no_such_field;
};

struct bpf_fentry_test_t {
	struct bpf_fentry_test_t *a;
};

/* not in any kernel: bpf_core_type_exists() must give 0 */
struct bpfmux_no_such_type {
	int x;
};

#pragma clang attribute pop

enum pid_type {
	PIDTYPE_PID,
	PIDTYPE_TGID,
	PIDTYPE_PGID,
	PIDTYPE_SID,
	PIDTYPE_MAX,
};

#endif /* BPFMUX_TEST_H */
