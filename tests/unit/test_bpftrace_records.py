"""The bpftrace compiler's value classes (:mod:`bpfmux.record` based) behave as the dataclasses they replace."""

from __future__ import annotations

import copy
import inspect
import pickle

import pytest

from bpfmux.bpftrace import ast as A
from bpfmux.bpftrace import codegen, errors, kerneltypes, lexer, preprocess, probes, runtime, semantic, types
from bpfmux.record import Frozen, Record, Value

MODULES = [A, codegen, errors, kerneltypes, lexer, preprocess, probes, runtime, semantic, types]
CLASSES = [c for m in MODULES for c in vars(m).values()
           if isinstance(c, type) and issubclass(c, Record) and c.__module__ == m.__name__]  # fmt: skip


def test_no_module_imports_dataclasses() -> None:
    for m in MODULES:
        assert "dataclass" not in inspect.getsource(m), m.__name__


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__qualname__)
def test_init_takes_the_fields_in_order(cls: type[Record]) -> None:
    assert cls.__dictoffset__ == 0  # slotted all the way up: no per-instance __dict__
    if "__init__" in vars(cls):
        assert list(inspect.signature(cls.__init__).parameters)[1:] == list(cls.__match_args__)
    else:
        assert cls.__match_args__ == ()  # only the shared bases (ast._Node) have neither fields nor __init__


def test_ast_nodes_compare_by_identity_and_repr_their_fields() -> None:
    loc = errors.Loc(1, 2)
    a, b = A.Call(loc, "f"), A.Call(loc, "f")
    assert a != b and a == a and hash(a) != hash(b)
    assert a.args == [] and a.args is not b.args
    assert repr(a) == "Call(loc=Loc(line=1, col=2, length=1), name='f', args=[])"
    assert A.Call.__match_args__ == ("loc", "name", "args")
    c = a.replace(name="g")
    assert (c.loc, c.name, c.args) == (loc, "g", a.args) and c is not a
    assert A.walk(A.Program([A.Probe([A.AttachPoint("BEGIN", loc)], None, [A.ExprStmt(loc, a)], loc)]))[-1] is a
    with pytest.raises(AttributeError):
        a.other = 1  # type: ignore[attr-defined]


def test_frozen_classes_are_hashable_values() -> None:
    t = types.T(types.K.INT, 4, True)
    assert t == types.T(types.K.INT, 4, True) and hash(t) == hash(types.T(types.K.INT, 4, True))
    assert t != t.with_user(True) and t.with_user(True).user
    assert t._values() == tuple(getattr(t, n) for n in types.T.__match_args__)
    with pytest.raises(AttributeError):
        t.size = 8  # type: ignore[misc]
    for v in (t, errors.Loc(3, 4, 5), errors.Source("x", "f.bt"), lexer.Token("int", "1", errors.Loc(1, 1), 1),
              kerneltypes.FieldRef(8, t, 1, 3)):  # fmt: skip
        assert isinstance(v, Frozen)
        assert copy.copy(v) == v and copy.deepcopy(v) == v and pickle.loads(pickle.dumps(v)) == v
        assert {v: 1}[type(v)(*v._values())] == 1


def test_mutable_results_compare_by_value_and_are_unhashable() -> None:
    a, b = semantic.Action("printf", "%d"), semantic.Action("printf", "%d")
    assert isinstance(a, Value) and a == b and a.args == [] and a.args is not b.args
    b.args.append(types.T.u64())
    assert a != b
    with pytest.raises(TypeError):
        hash(a)
    o = runtime.Options(["1"], quiet=True)
    assert (o.params, o.quiet, o.strlen, o.map_keys_max) == (["1"], True, 64, 4096)
    assert o == runtime.Options(params=["1"], quiet=True) and runtime.Options().params == []
