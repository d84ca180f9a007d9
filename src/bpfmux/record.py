"""Value classes for the modules a tracer's start-up imports, without ``dataclasses``.

``dataclasses`` writes each class's ``__init__``, ``__repr__`` and ``__eq__``
as source text and compiles it when the module is imported: about 0.5 ms a
class on this project's machines, 40 ms for the 70 classes that ``bpfmux
bpftrace`` imported, plus 10 ms to import ``dataclasses`` itself (it imports
``inspect``) — a fifth of a short script's whole run, which a bpftrace user
compares with bpftrace's. The classes on that path therefore write their
``__init__`` by hand (compiled once into the bytecode cache, like any other
method) and take what is the same for every class from here.

A class's fields are its ``__slots__`` and its bases', in order; they are
also its ``__match_args__``, so ``match`` works as on a dataclass. The
``__init__`` takes the fields by these names (what :meth:`Record.replace` and
pickling rely on).

- :class:`Record`: ``repr`` and ``replace``; identity equality (a dataclass
  with ``eq=False``).
- :class:`Value`: equality field by field, unhashable (``eq=True``).
- :class:`Frozen`: equality and hash field by field, attributes cannot be set
  after ``__init__`` (``frozen=True``); its ``__init__`` sets fields with
  :data:`set_field` (``object.__setattr__``).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, ClassVar, Self

__all__ = ["Frozen", "Record", "Value", "set_field"]

#: how a :class:`Frozen`'s ``__init__`` sets its fields (its own ``__setattr__`` refuses)
set_field = object.__setattr__


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function giving an object's ``names`` attributes as a tuple (C-speed
    :func:`operator.attrgetter` where it already returns one)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


class Record:
    """Base of a slotted value class: ``repr`` and ``replace`` from its fields."""

    __slots__ = ()
    __match_args__: ClassVar[tuple[str, ...]] = ()
    #: the fields of an instance as a tuple (what equality, hashing and pickling compare)
    _values_of: ClassVar[staticmethod[[Any], tuple[Any, ...]]] = staticmethod(_getter(()))

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "__match_args__" not in cls.__dict__:
            cls.__match_args__ = tuple(  # type: ignore[misc]
                n for k in reversed(cls.__mro__) for n in k.__dict__.get("__slots__", ())
            )
        if "_values_of" not in cls.__dict__:  # a class may spell out its own (a faster one for a hot class)
            cls._values_of = staticmethod(_getter(cls.__match_args__))

    def _values(self) -> tuple[Any, ...]:
        return self._values_of(self)

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__match_args__)
        return f"{type(self).__qualname__}({shown})"

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied (as :func:`dataclasses.replace`).

        :raises TypeError: a name in ``changes`` is not a field.
        """
        values = {n: getattr(self, n) for n in self.__match_args__}
        unknown = changes.keys() - values.keys()
        if unknown:
            raise TypeError(f"{type(self).__qualname__} has no field {sorted(unknown)[0]!r}")
        values.update(changes)
        return type(self)(**values)


class Value(Record):
    """A :class:`Record` equal to another of its class with equal fields (not hashable: it can change)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        values = self._values_of
        return values(self) == values(other)

    __hash__ = None  # type: ignore[assignment]


class Frozen(Value):
    """A :class:`Value` that cannot change after ``__init__``: hashable, usable as a key."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]  # Value's is None
        return hash(self._values_of(self))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__qualname__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__qualname__}")

    def __reduce__(self) -> tuple[type[Self], tuple[Any, ...]]:
        # copy, deepcopy and pickle rebuild through __init__ (setting slots one by one is refused above)
        return type(self), self._values_of(self)
