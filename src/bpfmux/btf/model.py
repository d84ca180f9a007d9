"""The :class:`Btf` container: parsing raw BTF lazily, lookups, and edits.

Parsing only checks the header and indexes where each type record starts (one
pass over the type section as 32-bit words); a type object is built the first
time its id is asked for, and the name index the first time a name is looked
up. That keeps loading the kernel's ~130k types well under a second.
"""

from __future__ import annotations

import functools
import os
import struct
import sys
from array import array
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import NotFoundError, ParseError
from ..uapi import BtfKind
from .types import (
    Array,
    Composite,
    Const,
    Datasec,
    DeclTag,
    Enum,
    Enum64,
    EnumValue,
    Float,
    Func,
    FuncProto,
    Fwd,
    Int,
    Member,
    Param,
    Ptr,
    Restrict,
    Struct,
    Type,
    Typedef,
    TypeTag,
    Union,
    Var,
    VarSecinfo,
    Void,
    Volatile,
    _Ref,
)

if TYPE_CHECKING:
    from .funcs import FuncSignature
    from .layout import FieldInfo

__all__ = ["BTF_MAGIC", "Btf", "TypeRef", "VMLINUX_PATH"]

BTF_MAGIC = 0xEB9F
VMLINUX_PATH = "/sys/kernel/btf/vmlinux"
_HDR = {"little": struct.Struct("<HBBIIIII"), "big": struct.Struct(">HBBIIIII")}
_HDR_LEN = 24
#: per kind: extra words after the 3-word common header, and words per vlen entry
_FIXED = (0, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, 0, 0)
_PER_VLEN = (0, 0, 0, 0, 3, 3, 2, 0, 0, 0, 0, 0, 0, 2, 0, 3, 0, 0, 0, 3)
_MAX_KIND = 19
_NATIVE_LITTLE = sys.byteorder == "little"

#: A type given by object, id, or (for lookups) name.
TypeRef = Type | int | str

_KIND_NAMES = {k.name.lower(): k for k in BtfKind}
#: the one-reference kinds _materialize builds without their __init__ (what KIND_CLASSES says for them)
_REF_CLASSES: dict[int, type[_Ref]] = {2: Ptr, 8: Typedef, 9: Volatile, 10: Const, 11: Restrict}
_C_PREFIX = {"struct": BtfKind.STRUCT, "union": BtfKind.UNION, "enum": BtfKind.ENUM}


def _kind_arg(kind: BtfKind | str | int | None) -> BtfKind | None:
    if kind is None or isinstance(kind, BtfKind):
        return kind
    if isinstance(kind, str):
        k = _KIND_NAMES.get(kind.lower())
        if k is None:
            raise NotFoundError("BTF kind", kind, f"use one of {', '.join(sorted(_KIND_NAMES))}")
        return k
    return BtfKind(kind)


class Btf:
    """A set of BTF types: parsed from a blob (kernel, module, object) or built up.

    Type ids run from 0 (``void``) to ``len(btf) - 1``. A *split* BTF (a
    kernel module's) continues the ids and strings of its ``base``; lookups
    see the base's types too.

    :ivar base: the base BTF of a split BTF, else ``None``.
    :ivar source: where it came from (a path or description), for messages.
    :ivar byteorder: ``"little"`` or ``"big"``, the parsed blob's byte order.
    """

    #: the CO-RE candidate index of :mod:`bpfmux.btf.core` (essential name → ids), cached on first use and
    #: dropped when types are added or replaced; absent until then
    _core_flavored: dict[str, list[int]]

    def __init__(self, base: Btf | None = None, source: str | None = None) -> None:
        """An empty BTF (just ``void``, or continuing ``base``) to add types to."""
        self.base = base
        self.source = source
        self.byteorder = "little"
        self.flags = 0
        self.start_id = len(base) if base is not None else 1
        self.str_start = base._str_total if base is not None else 0
        self._pad = 1 if base is None else 0  # _types[0] is void when there is no base
        self._first = self.start_id - self._pad  # type id of _types[0]
        self._words: array = array("I")
        self._offsets: array = array("I")
        self._strs = b"\0" if base is None else b""
        self._types: list[Type | None] = [Void()] if base is None else []
        self._names: dict[bytes, int | list[int]] | None = None
        self._str_cache: dict[int, str] = {}

    # ------------------------------------------------------------------ parse
    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview, base: Btf | None = None, source: str | None = None) -> Btf:
        """Parse a raw BTF blob (the ``.BTF`` section, or ``/sys/kernel/btf/*``).

        Little- and big-endian blobs are accepted. Types are built on demand.

        :param base: the base BTF when ``data`` is split BTF (a module's).
        :param source: a name for the input, used in error messages.
        :raises ParseError: the blob is truncated or malformed.
        """
        data = bytes(data)
        self = cls(base, source)
        if len(data) < _HDR_LEN:
            raise ParseError(f"BTF is {len(data)} bytes, shorter than its 24-byte header", 0, source)
        magic = int.from_bytes(data[:2], "little")
        if magic == BTF_MAGIC:
            order = "little"
        elif magic == 0x9FEB:
            order = "big"
        else:
            raise ParseError(f"bad BTF magic {magic:#06x} (expected 0xeb9f): this is not BTF", 0, source)
        self.byteorder = order
        _, version, flags, hdr_len, type_off, type_len, str_off, str_len = _HDR[order].unpack_from(data)
        if version != 1:
            raise ParseError(f"unsupported BTF version {version} (only version 1 exists)", 2, source)
        self.flags = flags
        if hdr_len < _HDR_LEN or hdr_len > len(data):
            raise ParseError(f"BTF header length {hdr_len} is out of range", 4, source)
        if any(data[_HDR_LEN:hdr_len]):
            raise ParseError("BTF header has non-zero bytes past the fields this parser knows", _HDR_LEN, source)
        end = len(data) - hdr_len
        if type_off % 4 or type_len % 4:
            raise ParseError(f"BTF type section (offset {type_off}, length {type_len}) is not 4-byte aligned", 8, source)
        if type_off + type_len > end or str_off + str_len > end:
            raise ParseError(
                f"BTF sections (types {type_off}+{type_len}, strings {str_off}+{str_len}) run past the data ({end} bytes)",
                8,
                source,
            )
        if type_off < str_off < type_off + type_len or str_off < type_off < str_off + str_len:
            raise ParseError("BTF type and string sections overlap", 8, source)
        strs = data[hdr_len + str_off : hdr_len + str_off + str_len]
        if base is None and (not strs or strs[0] != 0):
            raise ParseError("BTF string section must start with an empty string", hdr_len + str_off, source)
        if strs and strs[-1] != 0:
            raise ParseError("BTF string section is not NUL-terminated", hdr_len + str_off + str_len - 1, source)
        self._strs = strs
        words = array("I")
        words.frombytes(data[hdr_len + type_off : hdr_len + type_off + type_len])
        if (order == "little") != _NATIVE_LITTLE:
            words.byteswap()
        self._words = words
        self._offsets = self._scan(words, hdr_len + type_off)
        self._types.extend([None] * len(self._offsets))
        return self

    def _scan(self, words: array, pos: int) -> array:
        offsets = array("I")
        append = offsets.append
        fixed, per = _FIXED, _PER_VLEN
        n = len(words)
        i = 0
        try:
            while i < n:
                info = words[i + 1]
                k = (info >> 24) & 0x1F
                if k > _MAX_KIND or k == 0:
                    raise ParseError(f"type [{self.start_id + len(offsets)}] has unknown kind {k}", pos + 4 * i + 4, self.source)
                append(i)
                i += 3 + fixed[k] + (info & 0xFFFF) * per[k]
        except IndexError:
            raise ParseError(f"type [{self.start_id + len(offsets)}] is truncated", pos + 4 * i, self.source) from None
        if i != n:
            raise ParseError(f"type [{self.start_id + len(offsets) - 1}] runs past the type section", pos + 4 * i, self.source)
        return offsets

    @classmethod
    def load(cls, path: str | os.PathLike[str], base: Btf | None = None) -> Btf:
        """Read BTF from a file: a raw blob, or an ELF object's ``.BTF`` section.

        :raises ParseError: the file is not BTF, or the object has no ``.BTF``.
        :raises OSError: the file cannot be read.
        """
        with open(path, "rb") as f:
            data = f.read()
        if data[:4] == b"\x7fELF":
            from .elf import btf_section

            data = btf_section(data, str(path))
        return cls.parse(data, base=base, source=str(path))

    @classmethod
    def vmlinux(cls, path: str = VMLINUX_PATH) -> Btf:
        """The running kernel's BTF (parsed once, then cached).

        :raises FileNotFoundError: the kernel has no BTF (CONFIG_DEBUG_INFO_BTF off).
        :raises ParseError: the file is not BTF.
        """
        return _vmlinux_cached(path)

    @classmethod
    def module(cls, name: str, directory: str = "/sys/kernel/btf") -> Btf:
        """A kernel module's split BTF, on top of :meth:`vmlinux`.

        :raises NotFoundError: no BTF for that module (not loaded, or built without BTF).
        :raises ParseError: the file is not BTF.
        """
        path = os.path.join(directory, name)
        if name in ("", ".", "..") or "/" in name or not os.path.exists(path):
            avail = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
            raise NotFoundError("kernel module BTF", name, f"load the module first; available: {', '.join(avail[:20]) or 'none'}")
        return _module_cached(path, os.path.join(directory, "vmlinux"))

    # --------------------------------------------------------------- strings
    @property
    def _str_total(self) -> int:
        return self.str_start + len(self._strs)

    def string(self, offset: int) -> str:
        """The string at ``offset`` of the string section (base's included).

        :raises ParseError: the offset is outside the string section.
        """
        s = self._str_cache.get(offset)
        if s is not None:
            return s
        if offset < self.str_start:
            assert self.base is not None
            return self.base.string(offset)
        rel = offset - self.str_start
        strs = self._strs
        if not 0 <= rel < len(strs):
            raise ParseError(f"string offset {offset} is outside the string section", None, self.source)
        end = strs.find(b"\0", rel)
        s = strs[rel:end].decode("utf-8", "surrogateescape")
        self._str_cache[offset] = s
        return s

    @property
    def strings(self) -> bytes:
        """This BTF's own raw string section (without the base's)."""
        return self._strs

    # ----------------------------------------------------------- type access
    def __len__(self) -> int:
        """Number of valid type ids (``void`` and the base's types included)."""
        return self._first + len(self._types)

    def __getitem__(self, type_id: int) -> Type:
        """The type with ``type_id``.

        :raises NotFoundError: no such id.
        :raises ParseError: its record is malformed.
        """
        rel = type_id - self._first
        if rel < 0:
            if self.base is not None and type_id >= 0:
                return self.base[type_id]
            raise NotFoundError("type id", str(type_id), f"ids run from 0 to {len(self) - 1}")
        types = self._types
        try:
            t = types[rel]
        except (IndexError, TypeError):
            raise NotFoundError("type id", str(type_id), f"ids run from 0 to {len(self) - 1}") from None
        if t is None:
            t = types[rel] = self._materialize(type_id, self._offsets[rel - self._pad])
        return t

    def get(self, type_id: int) -> Type | None:
        """The type with ``type_id``, or ``None`` when there is none."""
        try:
            return self[type_id]
        except NotFoundError:
            return None

    def __iter__(self) -> Iterator[Type]:
        """Every type except ``void``, the base's first, in id order."""
        for i in range(1, len(self)):
            yield self[i]

    def own_types(self) -> Iterator[Type]:
        """This BTF's own types (a split BTF's, without the base's), in id order."""
        for i in range(self.start_id, len(self)):
            yield self[i]

    def __contains__(self, type_id: object) -> bool:
        return isinstance(type_id, int) and 0 <= type_id < len(self)

    def __repr__(self) -> str:
        split = f" split on {self.base.source or 'base'}" if self.base is not None else ""
        return f"<Btf {self.source or '(built)'}: {len(self) - 1} types{split}>"

    def kind_of(self, type_id: int) -> BtfKind:
        """The kind of ``type_id`` without building the type object.

        :raises NotFoundError: no such id.
        """
        if type_id < self.start_id:
            if type_id == 0:
                return BtfKind.UNKN
            if self.base is not None and type_id > 0:
                return self.base.kind_of(type_id)
        rel = type_id - self.start_id
        if 0 <= rel < len(self._offsets) and self._types[rel + self._pad] is None:
            return BtfKind((self._words[self._offsets[rel] + 1] >> 24) & 0x1F)
        return self[type_id].kind

    def _ref(self, tid: int, type_id: int, what: str) -> int:
        if tid >= len(self):
            raise ParseError(f"type [{type_id}] refers to {what} type [{tid}], past the last type [{len(self) - 1}]", None, self.source)
        return tid

    def _materialize(self, type_id: int, o: int) -> Type:
        w = self._words
        s = self.string
        info = w[o + 1]
        kind = (info >> 24) & 0x1F
        vlen = info & 0xFFFF
        kflag = info >> 31
        size_type = w[o + 2]
        name = s(w[o]) if w[o] else ""
        ref = self._ref
        t: Type
        if kind == 1:  # INT
            enc = w[o + 3]
            t = Int(name, size_type, (enc >> 24) & 0x0F, enc & 0xFF, (enc >> 16) & 0xFF)
        elif kind in (2, 8, 9, 10, 11):  # PTR TYPEDEF VOLATILE CONST RESTRICT
            rcls = _REF_CLASSES[kind]
            r = rcls.__new__(rcls)
            Type.__init__(r, name)
            r.type_id = ref(size_type, type_id, "referenced")
            t = r
        elif kind == 3:  # ARRAY
            t = Array(ref(w[o + 3], type_id, "element"), ref(w[o + 4], type_id, "index"), w[o + 5])
        elif kind in (4, 5):  # STRUCT UNION
            cls = Struct if kind == 4 else Union
            members = []
            for j in range(o + 3, o + 3 + 3 * vlen, 3):
                off = w[j + 2]
                bf = 0
                if kflag:
                    bf, off = off >> 24, off & 0xFFFFFF
                members.append(Member(s(w[j]) if w[j] else "", ref(w[j + 1], type_id, "member"), off, bf, self))
            t = cls(name, size_type, members, kflag)
        elif kind == 6:  # ENUM
            vals = []
            for j in range(o + 3, o + 3 + 2 * vlen, 2):
                v = w[j + 1]
                if kflag and v & 0x80000000:
                    v -= 1 << 32
                vals.append(EnumValue(s(w[j]), v))
            t = Enum(name, size_type, vals, bool(kflag))
        elif kind == 7:
            t = Fwd(name, bool(kflag))
        elif kind == 12:
            t = Func(name, ref(size_type, type_id, "prototype"), vlen)
        elif kind == 13:
            params = [Param(s(w[j]) if w[j] else "", ref(w[j + 1], type_id, "parameter"), self) for j in range(o + 3, o + 3 + 2 * vlen, 2)]
            t = FuncProto(ref(size_type, type_id, "return"), params)
        elif kind == 14:
            t = Var(name, ref(size_type, type_id, "variable"), w[o + 3])
        elif kind == 15:
            t = Datasec(
                name,
                size_type,
                [VarSecinfo(ref(w[j], type_id, "variable"), w[j + 1], w[j + 2], self) for j in range(o + 3, o + 3 + 3 * vlen, 3)],
            )
        elif kind == 16:
            t = Float(name, size_type)
        elif kind == 17:
            idx = w[o + 3]
            t = DeclTag(name, ref(size_type, type_id, "tagged"), idx - (1 << 32) if idx & 0x80000000 else idx, kflag)
        elif kind == 18:
            t = TypeTag(name, ref(size_type, type_id, "tagged"), kflag)
        else:  # 19 ENUM64
            vals = []
            for j in range(o + 3, o + 3 + 3 * vlen, 3):
                v = w[j + 1] | (w[j + 2] << 32)
                if kflag and v & (1 << 63):
                    v -= 1 << 64
                vals.append(EnumValue(s(w[j]), v))
            t = Enum64(name, size_type, vals, bool(kflag))
        t.id = type_id
        t.btf = self
        return t

    def raw_info(self, type_id: int) -> tuple[int, int, int, int]:
        """``(name_off, kind, vlen, kind_flag)`` of a parsed type's record, without building it.

        :raises NotFoundError: no such id, or the type was added after parsing.
        """
        if type_id < self.start_id and self.base is not None:
            return self.base.raw_info(type_id)
        rel = type_id - self.start_id
        if not 0 <= rel < len(self._offsets):
            raise NotFoundError("parsed type id", str(type_id), "only parsed types have a raw record")
        o = self._offsets[rel]
        info = self._words[o + 1]
        return self._words[o], (info >> 24) & 0x1F, info & 0xFFFF, info >> 31

    # ------------------------------------------------------------- by name
    def _name_index(self) -> dict[bytes, int | list[int]]:
        idx = self._names
        if idx is not None:
            return idx
        idx = {}
        strs = self._strs
        find = strs.find
        start = self.str_start
        words = self._words
        first = self.start_id
        cache: dict[int, bytes] = {}
        types = self._types
        pad = self._pad
        for i, o in enumerate(self._offsets):
            built = types[i + pad]
            if built is not None:  # an object may have been renamed or replaced since parsing
                if not built.name:
                    continue
                key = built.name.encode("utf-8", "surrogateescape")
                tid = first + i
                cur = idx.get(key)
                if cur is None:
                    idx[key] = tid
                elif isinstance(cur, int):
                    idx[key] = [cur, tid]
                else:
                    cur.append(tid)
                continue
            no = words[o]
            if not no:
                continue
            seen = cache.get(no)
            if seen is not None:
                key = seen
            else:
                rel = no - start
                if rel >= 0:
                    if rel >= len(strs):
                        continue  # reported when the type is built
                    key = strs[rel : find(b"\0", rel)]
                else:
                    key = self.string(no).encode("utf-8", "surrogateescape")
                cache[no] = key
            tid = first + i
            cur = idx.get(key)
            if cur is None:
                idx[key] = tid
            elif isinstance(cur, int):
                idx[key] = [cur, tid]
            else:
                cur.append(tid)
        extra = len(self._offsets) + self._pad
        for t in self._types[extra:]:
            if t is not None and t.name:
                key = t.name.encode("utf-8", "surrogateescape")
                cur = idx.get(key)
                if cur is None:
                    idx[key] = t.id
                elif isinstance(cur, int):
                    idx[key] = [cur, t.id]
                else:
                    cur.append(t.id)
        self._names = idx
        return idx

    def reindex(self) -> None:
        """Forget the name index (call after renaming types in place)."""
        self._names = None
        self.__dict__.pop("_core_flavored", None)

    def find_ids(self, name: str, kind: BtfKind | str | int | None = None) -> list[int]:
        """Ids of every type called ``name`` (of ``kind`` if given), base first.

        ``name`` may carry a C tag (``"struct task_struct"``).

        :raises NotFoundError: ``kind`` is not a BTF kind name.
        """
        k = _kind_arg(kind)
        head, sep, rest = name.partition(" ")
        if sep and head in _C_PREFIX and k is None and not self._has_name(name):  # a type may be named "struct x …"
            name, k = rest.strip(), _C_PREFIX[head]
        ids: list[int] = self.base.find_ids(name, k) if self.base is not None else []
        hit = self._name_index().get(name.encode("utf-8", "surrogateescape"))
        if hit is None:
            return ids
        own = [hit] if isinstance(hit, int) else list(hit)
        if k is not None:
            own = [i for i in own if self.kind_of(i) == k or (k == BtfKind.ENUM and self.kind_of(i) == BtfKind.ENUM64)]
        return ids + own

    def _has_name(self, name: str) -> bool:
        """True when some type (here or in the base) is called exactly ``name``."""
        if self._name_index().get(name.encode("utf-8", "surrogateescape")) is not None:
            return True
        return self.base is not None and self.base._has_name(name)

    def find_all(self, name: str, kind: BtfKind | str | int | None = None) -> list[Type]:
        """Every type called ``name`` (of ``kind`` if given), in id order.

        :raises NotFoundError: ``kind`` is not a BTF kind name.
        """
        return [self[i] for i in self.find_ids(name, kind)]

    def find(self, name: str, kind: BtfKind | str | int | None = None) -> Type:
        """The first type called ``name`` (of ``kind`` if given).

        ``kind`` is a :class:`BtfKind` or its name (``"struct"``); ``"enum"``
        also finds ``ENUM64``. ``name`` may carry a C tag (``"union bpf_attr"``).

        :raises NotFoundError: no such type (the message lists close names).
        """
        ids = self.find_ids(name, kind)
        if not ids:
            k = _kind_arg(kind)
            what = f"BTF {k.name.lower()}" if k is not None else "BTF type"
            raise NotFoundError(what, name, self._hint(name))
        return self[ids[0]]

    def _hint(self, name: str) -> str:
        import difflib

        idx = self._name_index()
        bname = name.encode("utf-8", "surrogateescape")
        pool = [k for k in idx if k[:3] == bname[:3]][:5000] or list(idx)[:5000]
        close = difflib.get_close_matches(bname, pool, n=3)
        src = self.source or "this BTF"
        if close:
            return f"did you mean {', '.join(c.decode('utf-8', 'replace') for c in close)}? (searched {src})"
        return f"check the spelling; {src} has no such name"

    # ------------------------------------------------------------ edits
    def add(self, t: Type) -> int:
        """Append ``t`` and return its new id (references in ``t`` are ids in this Btf).

        :raises ParseError: ``t`` already belongs to another Btf (a ``ValueError``).
        """
        if t.btf is not None and t.btf is not self:
            raise ParseError(f"{t!r} already belongs to another Btf; build a new type object")
        t.id = len(self)
        t.btf = self
        for sub in _subobjects(t):
            sub.btf = self
        self._types.append(t)
        self.__dict__.pop("_core_flavored", None)
        if self._names is not None and t.name:
            key = t.name.encode("utf-8", "surrogateescape")
            cur = self._names.get(key)
            if cur is None:
                self._names[key] = t.id
            elif isinstance(cur, int):
                self._names[key] = [cur, t.id]
            else:
                cur.append(t.id)
        return t.id

    def replace(self, type_id: int, t: Type) -> None:
        """Put ``t`` in place of the type ``type_id`` (of this Btf, not its base).

        :raises NotFoundError: ``type_id`` is not one of this Btf's own ids.
        """
        if not self.start_id <= type_id < len(self):
            raise NotFoundError("own type id", str(type_id), f"own ids run from {self.start_id} to {len(self) - 1}")
        t.id = type_id
        t.btf = self
        for sub in _subobjects(t):
            sub.btf = self
        self._types[type_id - self._first] = t
        self.reindex()

    def copy(self) -> Btf:
        """A deep, independent copy (every own type rebuilt; the base is shared)."""
        from .writer import write

        return Btf.parse(write(self), base=self.base, source=self.source)

    # ------------------------------------------------------ layout helpers
    def resolve(self, t: TypeRef) -> Type:
        """Skip typedefs, cv-qualifiers and type tags.

        :raises NotFoundError: unknown type.
        :raises ParseError: a reference loop.
        """
        from .layout import resolve

        return resolve(self, self.type(t))

    def type(self, t: TypeRef) -> Type:
        """Normalize a type argument: a :class:`Type`, an id, or a name.

        :raises NotFoundError: unknown id or name.
        """
        if isinstance(t, Type):
            return t
        if isinstance(t, int):
            return self[t]
        return self.find(t)

    def sizeof(self, t: TypeRef) -> int:
        """Byte size of a type (pointers are 8 bytes).

        :raises TypeKindError: the type has no size (void, function, forward).
        :raises ParseError: a reference loop.
        """
        from .layout import sizeof

        return sizeof(self, self.type(t))

    def alignof(self, t: TypeRef) -> int:
        """Natural alignment of a type, as the compiler lays it out on BPF/x86-64.

        :raises TypeKindError: the type has no alignment (void, function).
        """
        from .layout import alignof

        return alignof(self, self.type(t))

    def fields(self, t: TypeRef, flatten: bool = False) -> list[FieldInfo]:
        """Effective layout of a struct/union's members (both bitfield encodings).

        :param flatten: expand anonymous struct/union members into their fields.
        :raises TypeKindError: not a struct or union.
        """
        from .layout import fields

        return fields(self, self.type(t), flatten)

    def member(self, t: TypeRef, path: str) -> FieldInfo:
        """Look a field up by a dotted path (``"se.vruntime"``, ``"comm[3]"``, ``"a.b[2].c"``).

        Names inside anonymous members are found as in C.

        :raises NotFoundError: a path component does not exist.
        :raises TypeKindError: a component is applied to a non-struct.
        """
        from .layout import member

        return member(self, self.type(t), path)

    def func(self, name: str) -> FuncSignature:
        """The prototype of function ``name`` (a ``FUNC`` type).

        :raises NotFoundError: no such function.
        """
        from .funcs import signature

        return signature(self, name)

    def enum_value(self, enum: str, name: str) -> int:
        """The value of enumerator ``name``; ``enum`` names the enum type (``""`` searches all).

        :raises NotFoundError: no such enum or enumerator.
        """
        if enum:
            t = self.resolve(self.find(enum, BtfKind.ENUM) if not enum.startswith("enum ") else self.find(enum))
            if not isinstance(t, Enum):
                raise NotFoundError("BTF enum", enum, "the name is not an enum")
            return t.value_of(name)
        for t in self:
            if isinstance(t, Enum):
                for v in t.values:
                    if v.name == name:
                        return v.value
        raise NotFoundError("enumerator", name, "no enum in this BTF has it")

    def validate(self) -> None:
        """Build every type, checking that names and references are in range.

        :raises ParseError: a malformed record.
        """
        for t in self.own_types():
            for r in t.refs():
                if not 0 <= r < len(self):
                    raise ParseError(f"type [{t.id}] refers to unknown type [{r}]", None, self.source)


def _subobjects(t: Type) -> list:
    if isinstance(t, Composite):
        return list(t.members)
    if isinstance(t, FuncProto):
        return list(t.params)
    if isinstance(t, Datasec):
        return list(t.vars)
    return []


@functools.lru_cache(maxsize=4)
def _vmlinux_cached(path: str) -> Btf:
    with open(path, "rb") as f:
        data = f.read()
    return Btf.parse(data, source=path)


@functools.lru_cache(maxsize=64)
def _module_cached(path: str, vmlinux: str) -> Btf:
    base = _vmlinux_cached(vmlinux)
    with open(path, "rb") as f:
        data = f.read()
    return Btf.parse(data, base=base, source=path)
