"""``struct __sk_buff`` (the subset socket filter programs may touch).

Offsets are facts of the Linux uapi (``include/uapi/linux/bpf.h``). The rules
are the kernel's ``sk_filter_is_valid_access``: socket filters may not read
``tc_classid``, the packet pointers, the socket addresses, ``tstamp``,
``wire_len`` or ``hwtstamp``, and may write only ``cb[0..4]``.
"""

from __future__ import annotations

from .context import ContextLayout, CtxField, LoadKind

#: ``sizeof(struct __sk_buff)`` on Linux 6.18.
SK_BUFF_SIZE = 192

#: (name, offset, size) of every ``__sk_buff`` member.
SK_BUFF_MEMBERS: tuple[tuple[str, int, int], ...] = (
    ("len", 0, 4), ("pkt_type", 4, 4), ("mark", 8, 4), ("queue_mapping", 12, 4),
    ("protocol", 16, 4), ("vlan_present", 20, 4), ("vlan_tci", 24, 4), ("vlan_proto", 28, 4),
    ("priority", 32, 4), ("ingress_ifindex", 36, 4), ("ifindex", 40, 4), ("tc_index", 44, 4),
    ("cb[0]", 48, 4), ("cb[1]", 52, 4), ("cb[2]", 56, 4), ("cb[3]", 60, 4), ("cb[4]", 64, 4),
    ("hash", 68, 4), ("tc_classid", 72, 4), ("data", 76, 4), ("data_end", 80, 4),
    ("napi_id", 84, 4), ("family", 88, 4), ("remote_ip4", 92, 4), ("local_ip4", 96, 4),
    ("remote_ip6", 100, 16), ("local_ip6", 116, 16), ("remote_port", 132, 4), ("local_port", 136, 4),
    ("data_meta", 140, 4), ("flow_keys", 144, 8), ("tstamp", 152, 8), ("wire_len", 160, 4),
    ("gso_segs", 164, 4), ("sk", 168, 8), ("gso_size", 176, 4), ("tstamp_type", 180, 1),
    ("hwtstamp", 184, 8),
)

_SOCKET_FILTER_HIDDEN = {
    "tc_classid", "data", "data_end", "data_meta", "family", "remote_ip4", "local_ip4",
    "remote_ip6", "local_ip6", "remote_port", "local_port", "tstamp", "wire_len", "hwtstamp",
    "flow_keys", "sk", "tstamp_type",
}


def socket_filter_layout() -> ContextLayout:
    """Context of ``BPF_PROG_TYPE_SOCKET_FILTER`` programs."""
    fields = []
    for name, off, size in SK_BUFF_MEMBERS:
        if name in _SOCKET_FILTER_HIDDEN:
            continue
        fields.append(CtxField(name, off, size, writable=name.startswith("cb[")))
    return ContextLayout("struct __sk_buff", SK_BUFF_SIZE, "fields", fields=tuple(fields))

_PACKET = {"data", "data_end", "data_meta"}
_TC_WRITABLE = {"mark", "priority", "tc_index", "tc_classid", "queue_mapping", "tstamp", "cb[0]", "cb[1]", "cb[2]",
                "cb[3]", "cb[4]"}


def tc_layout() -> ContextLayout:
    """Context of ``BPF_PROG_TYPE_SCHED_CLS``/``SCHED_ACT`` programs (``tc``).

    Packet pointers (``data``, ``data_end``, ``data_meta``) load as
    ``ptr_to_packet``, which the emulator's verifier does not model.
    """
    fields = []
    for name, off, size in SK_BUFF_MEMBERS:
        if name in ("flow_keys",):
            continue
        load: LoadKind = "ptr_to_packet" if name in _PACKET else "scalar"
        fields.append(CtxField(name, off, size, writable=name in _TC_WRITABLE, load=load))
    return ContextLayout("struct __sk_buff", SK_BUFF_SIZE, "fields", fields=tuple(fields))


#: ``struct xdp_md`` members: (name, offset, size).
XDP_MD_MEMBERS: tuple[tuple[str, int, int], ...] = (
    ("data", 0, 4), ("data_end", 4, 4), ("data_meta", 8, 4), ("ingress_ifindex", 12, 4),
    ("rx_queue_index", 16, 4), ("egress_ifindex", 20, 4),
)


def xdp_layout() -> ContextLayout:
    """Context of XDP programs (``struct xdp_md``, read-only; packet pointers not modelled)."""
    fields = tuple(
        CtxField(n, off, size, load="ptr_to_packet" if n in _PACKET else "scalar")
        for n, off, size in XDP_MD_MEMBERS
    )
    return ContextLayout("struct xdp_md", 24, "fields", fields=fields)
