"""Helper functions of the emulated kernel.

:class:`HelperTable` maps helper ids to Python callables
``fn(rs, r1, r2, r3, r4, r5) -> int`` (see :mod:`.table`). The default table
implements, with the kernel's semantics and return values:

* maps: ``map_lookup_elem``, ``map_update_elem``, ``map_delete_elem``,
  ``map_lookup_percpu_elem``, ``for_each_map_elem``;
* time, task, CPU: ``ktime_get_ns`` (and ``_boot``, ``_coarse``, ``_tai``),
  ``jiffies64``, ``get_current_pid_tgid``, ``get_current_uid_gid``,
  ``get_current_comm``, ``get_current_task`` and ``get_current_task_btf``
  (the ``task_struct`` a test placed, ``Task.task_struct``),
  ``get_smp_processor_id``, ``get_numa_node_id``, ``get_prandom_u32``;
* memory: ``probe_read_kernel``/``_user`` (and ``_str``), legacy
  ``probe_read``/``probe_read_str``;
* output: ``trace_printk``, ``trace_vprintk``, ``snprintf``,
  ``ringbuf_output``/``reserve``/``submit``/``discard``/``query``,
  ``perf_event_output``, ``get_stackid``;
* tracing: ``get_func_ip``, ``get_func_arg``, ``get_func_arg_cnt``,
  ``get_func_ret``, ``get_attach_cookie``;
* control: ``tail_call``, ``loop``, ``spin_lock``/``spin_unlock``,
  ``strncmp``.
"""

from .table import DEFAULT, Helper, HelperTable, helper

__all__ = ["DEFAULT", "Helper", "HelperTable", "helper"]
