// SPDX-License-Identifier: MIT
/* Every BTF kind clang 14 emits, for the BTF parser, the raw and C dumps and
 * the codec: bitfields (kind_flag), a packed and an over-aligned struct,
 * anonymous unions/structs, multi-dimensional and flexible arrays, function
 * pointers, cv-qualifiers, restrict, type and declaration tags, float,
 * _Bool, __int128, signed/unsigned/64-bit enums, forward declarations,
 * typedefs, static/global/extern variables and functions. */
#include "include/bpfmux_test.h"
#include <bpf/bpf_helpers.h>

typedef unsigned long long u64t;
struct bits {
	unsigned int a:3, b:5;
	int c:7;
	unsigned long long d:40;
	char e;
} __attribute__((packed));
struct __attribute__((aligned(16))) over_aligned {
	char c;
};
struct kinds {
	int x;
	union {
		long l;
		struct {
			short s1, s2;
		};
	};
	float f;
	double d;
	_Bool ok;
	char name[16];
	int mat[2][3];
	int (*cb)(int, char *);
	void (*cbs[4])(void);
	const volatile int *restrict p;
	int __attribute__((btf_type_tag("user"))) *up;
	struct bits bf;
	struct over_aligned al;
	unsigned __int128 big;
	u64t tail;
	int flex[];
};
enum signed_enum { NEG = -1, TWO = 2 };
enum big_unsigned { BIG = 0xefffffff, ONE = 1 };
enum wide { WIDE = 0x1ffffffffULL, SMALL = 3 };
struct fwd_only;
union ufwd;
typedef int (*fnptr_t)(void);

int glob __attribute__((btf_decl_tag("tagged_var")));
static volatile int st;
extern int ext_var __attribute__((weak));
struct kinds sv;
enum signed_enum e1;
enum big_unsigned e2;
enum wide e3;
struct fwd_only *fo;
union ufwd *uf;
fnptr_t fp;
const int ro = 7;
int data_var = 3;

__attribute__((noinline)) int use_kinds(struct kinds *s __attribute__((btf_decl_tag("arg_tag"))), int n)
{
	return s->x + n + st + (&ext_var ? ext_var : 0);
}

SEC("raw_tp/sys_enter")
int kinds_entry(void *ctx)
{
	return use_kinds(&sv, ro + data_var);
}

char LICENSE[] SEC("license") = "GPL";
