// SPDX-License-Identifier: MIT
/*
 * The reference loader of bench/compat.py: loads one BPF object with the
 * system's libbpf (Debian 12: 1.1) the way a libbpf-tools tool does — the
 * settings its user space applies between open and load, then its attaches —
 * and reports each step as one JSON line on stdout.
 *
 * Built at run time by bench/compat.py (cc ... -lbpf -lelf -lz); never
 * committed as a binary. Reads its plan from stdin, one command a line:
 *
 *   object PATH
 *   global SECTION OFFSET HEXBYTES        bytes of a .rodata/.data/.bss variable
 *   max_entries MAP N | value_size MAP N
 *   autoload PROG 0|1 | target PROG FUNCTION
 *   load
 *   auto PROG                              what a skeleton's attach does
 *   uprobe PROG RETPROBE PID BINARY FUNCTION
 *   kprobe PROG RETPROBE FUNCTION
 *   perf PROG TYPE CONFIG freq|period N    one event per possible CPU
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

static char last_warning[512];

static int on_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char buf[512];

	if (level == LIBBPF_DEBUG)
		return 0;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = 0;
	if (buf[0])
		snprintf(last_warning, sizeof(last_warning), "%s", buf);
	return 0;
}

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			printf("\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			printf("\\u%04x", *s);
		else
			putchar(*s);
	}
	putchar('"');
}

static void report(const char *step, const char *name, int err)
{
	printf("{\"step\": ");
	json_str(step);
	printf(", \"name\": ");
	json_str(name ? name : "");
	printf(", \"ok\": %s", err ? "false" : "true");
	if (err) {
		printf(", \"errno\": %d, \"error\": ", err);
		json_str(last_warning[0] ? last_warning : strerror(err));
	}
	printf("}\n");
	fflush(stdout);
	last_warning[0] = 0;
}

static int hexbytes(const char *hex, unsigned char *out, size_t max)
{
	size_t n = strlen(hex) / 2, i;

	if (n > max)
		return -1;
	for (i = 0; i < n; i++) {
		unsigned int b;

		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			return -1;
		out[i] = (unsigned char)b;
	}
	return (int)n;
}

static struct bpf_program *prog_or_report(struct bpf_object *obj, const char *step, const char *name)
{
	struct bpf_program *prog = bpf_object__find_program_by_name(obj, name);

	if (!prog)
		report(step, name, ENOENT);
	return prog;
}

static int attach_perf(struct bpf_program *prog, unsigned int type, unsigned long long config, int freq,
		       unsigned long long n)
{
	int cpus = libbpf_num_possible_cpus(), cpu, made = 0;

	for (cpu = 0; cpu < cpus; cpu++) {
		struct perf_event_attr attr = {
			.type = type, .size = sizeof(attr), .config = config, .freq = freq,
		};
		struct bpf_link *link;
		int fd;

		if (freq)
			attr.sample_freq = n;
		else
			attr.sample_period = n;
		fd = (int)syscall(__NR_perf_event_open, &attr, -1, cpu, -1, 0);
		if (fd < 0) {
			if (errno == ENODEV)
				continue; /* an offline CPU, as the tools skip it */
			return errno;
		}
		link = bpf_program__attach_perf_event(prog, fd);
		if (!link) {
			int err = errno;

			close(fd);
			return err ? err : EINVAL;
		}
		made++;
	}
	return made ? 0 : ENODEV;
}

int main(void)
{
	char line[4096], a[512], b[512], c[1024], d[512];
	struct bpf_object *obj = NULL;
	int links = 0, failures = 0;

	libbpf_set_print(on_print);
	while (fgets(line, sizeof(line), stdin)) {
		char cmd[32];
		long long x, y;

		line[strcspn(line, "\n")] = 0;
		if (sscanf(line, "%31s", cmd) != 1)
			continue;
		if (!strcmp(cmd, "object") && sscanf(line, "%*s %511s", a) == 1) {
			obj = bpf_object__open_file(a, NULL);
			if (!obj) {
				report("open", a, errno ? errno : EINVAL);
				return 1;
			}
			report("open", a, 0);
		} else if (!obj) {
			fprintf(stderr, "compat_loader: 'object PATH' must come first\n");
			return 2;
		} else if (!strcmp(cmd, "global") && sscanf(line, "%*s %511s %lld %1023s", a, &x, c) == 3) {
			struct bpf_map *map = bpf_object__find_map_by_name(obj, a);
			unsigned char bytes[512];
			size_t size = 0;
			char *data = map ? (char *)bpf_map__initial_value(map, &size) : NULL;
			int n = hexbytes(c, bytes, sizeof(bytes));

			if (!data || n < 0 || (size_t)x + (size_t)n > size) {
				report("global", a, ENOENT);
				failures++;
				continue;
			}
			memcpy(data + x, bytes, (size_t)n);
		} else if ((!strcmp(cmd, "max_entries") || !strcmp(cmd, "value_size")) &&
			   sscanf(line, "%*s %511s %lld", a, &x) == 2) {
			struct bpf_map *map = bpf_object__find_map_by_name(obj, a);
			int err = !map ? ENOENT :
				  -(cmd[0] == 'm' ? bpf_map__set_max_entries(map, (__u32)x)
						  : bpf_map__set_value_size(map, (__u32)x));

			if (err) {
				report(cmd, a, err);
				failures++;
			}
		} else if (!strcmp(cmd, "autoload") && sscanf(line, "%*s %511s %lld", a, &x) == 2) {
			struct bpf_program *prog = prog_or_report(obj, cmd, a);

			if (prog)
				bpf_program__set_autoload(prog, x != 0);
		} else if (!strcmp(cmd, "target") && sscanf(line, "%*s %511s %511s", a, b) == 2) {
			struct bpf_program *prog = prog_or_report(obj, cmd, a);
			int err = prog ? -bpf_program__set_attach_target(prog, 0, b) : 0;

			if (err) {
				report(cmd, a, err);
				failures++;
			}
		} else if (!strcmp(cmd, "load")) {
			int err = bpf_object__load(obj);

			report("load", "", err ? -err : 0);
			if (err) {
				printf("{\"step\": \"done\", \"started\": false, \"links\": 0}\n");
				return 0;
			}
		} else if (!strcmp(cmd, "auto") && sscanf(line, "%*s %511s", a) == 1) {
			struct bpf_program *prog = prog_or_report(obj, cmd, a);
			struct bpf_link *link;

			if (!prog)
				continue;
			link = bpf_program__attach(prog);
			if (!link && errno == EOPNOTSUPP)
				continue; /* the skeleton skips programs it cannot auto-attach */
			report("attach", a, link ? 0 : errno);
			link ? links++ : failures++;
		} else if (!strcmp(cmd, "uprobe") &&
			   sscanf(line, "%*s %511s %lld %lld %1023s %511s", a, &x, &y, c, d) == 5) {
			LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = x != 0, .func_name = d);
			struct bpf_program *prog = prog_or_report(obj, cmd, a);
			struct bpf_link *link;

			if (!prog)
				continue;
			link = bpf_program__attach_uprobe_opts(prog, (pid_t)y, c, 0, &opts);
			report("attach", a, link ? 0 : errno);
			link ? links++ : failures++;
		} else if (!strcmp(cmd, "kprobe") && sscanf(line, "%*s %511s %lld %511s", a, &x, b) == 3) {
			struct bpf_program *prog = prog_or_report(obj, cmd, a);
			struct bpf_link *link;

			if (!prog)
				continue;
			link = bpf_program__attach_kprobe(prog, x != 0, b);
			report("attach", a, link ? 0 : errno);
			link ? links++ : failures++;
		} else if (!strcmp(cmd, "perf") && sscanf(line, "%*s %511s %lld %511s %511s %1023s", a, &x, b, d, c) == 5) {
			struct bpf_program *prog = prog_or_report(obj, cmd, a);
			int err;

			if (!prog)
				continue;
			err = attach_perf(prog, (unsigned int)x, strtoull(b, NULL, 0), !strcmp(d, "freq"),
					  strtoull(c, NULL, 0));
			report("attach", a, err);
			err ? failures++ : links++;
		} else {
			fprintf(stderr, "compat_loader: cannot read %s\n", line);
			return 2;
		}
	}
	printf("{\"step\": \"done\", \"started\": %s, \"links\": %d}\n", failures || !links ? "false" : "true", links);
	return 0;
}
