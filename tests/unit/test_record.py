"""bpfmux.record: the value classes that replace dataclasses on the start-up path behave as dataclasses do."""

from __future__ import annotations

import copy
import pickle

import pytest

from bpfmux.record import Frozen, Record, Value


class Node(Record):
    __slots__ = ("loc",)

    def __init__(self, loc: int) -> None:
        self.loc = loc


class Leaf(Node):
    __slots__ = ("name", "kids")

    def __init__(self, loc: int, name: str, kids: list[int] | None = None) -> None:
        self.loc = loc
        self.name = name
        self.kids = [] if kids is None else kids


class Pair(Value):
    __slots__ = ("a", "b")

    def __init__(self, a: int, b: int = 0) -> None:
        self.a = a
        self.b = b


class Point(Frozen):
    __slots__ = ("x", "y")

    def __init__(self, x: int, y: int) -> None:
        object.__setattr__(self, "x", x)
        object.__setattr__(self, "y", y)


def test_fields_are_the_slots_of_the_class_and_its_bases_in_order() -> None:
    assert Leaf.__match_args__ == ("loc", "name", "kids")
    assert repr(Leaf(1, "x")) == "Leaf(loc=1, name='x', kids=[])"
    match Leaf(1, "x", [2]):
        case Leaf(loc, name, kids):
            assert (loc, name, kids) == (1, "x", [2])
        case _:
            pytest.fail("a Record did not match its own class pattern")


def test_record_equality_is_identity_value_equality_is_by_field() -> None:
    assert Leaf(1, "x") != Leaf(1, "x")
    assert Pair(1, 2) == Pair(1, 2) and Pair(1, 2) != Pair(1, 3)
    assert Pair(1, 2) != (1, 2)
    with pytest.raises(TypeError):
        hash(Pair(1, 2))


def test_frozen_is_hashable_and_refuses_changes() -> None:
    p = Point(1, 2)
    assert {p: 1}[Point(1, 2)] == 1
    with pytest.raises(AttributeError, match="frozen Point"):
        p.x = 3  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y  # type: ignore[misc]


def test_replace_copy_and_pickle() -> None:
    assert Pair(1, 2).replace(b=5) == Pair(1, 5)
    assert Point(1, 2).replace(y=7) == Point(1, 7)
    with pytest.raises(TypeError, match="no field 'z'"):
        Point(1, 2).replace(z=1)
    for v in (Pair(1, 2), Point(3, 4)):
        assert copy.copy(v) == v and copy.deepcopy(v) == v and pickle.loads(pickle.dumps(v)) == v
    leaf = pickle.loads(pickle.dumps(Leaf(1, "x", [3])))
    assert (leaf.loc, leaf.name, leaf.kids) == (1, "x", [3])
