"""``provstream.core.frozen.quick_init`` against the dataclass ``__init__`` it replaces."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from provstream.core import triples as t
from provstream.core.fold import FoldState
from provstream.core.frozen import quick_init
from provstream.core.vocab import Mechanism
from provstream.streams.batch import Accepted, Message, Rejected


def plain(frozen_cls: type) -> type:
    """A twin of ``frozen_cls`` with the dataclass's own ``__init__``."""
    fields = [(f.name, f.type, f) for f in dataclasses.fields(frozen_cls)]
    return dataclasses.make_dataclass(frozen_cls.__name__, [(n, tp, dataclasses.field(default=f.default))
                                                             if f.default is not dataclasses.MISSING else (n, tp)
                                                             for n, tp, f in fields], frozen=True, slots=True)


VALUES = [t.Iri, t.Literal, t.QuotedTriple, t.Triple, t.SessionStatus, t.StepTriples, FoldState, Message, Accepted,
          Rejected]


@pytest.mark.parametrize("cls", VALUES, ids=lambda c: c.__name__)
def test_the_fold_values_use_it_with_the_dataclass_signature(cls: type) -> None:
    assert cls.__init__.__qualname__ == f"{cls.__qualname__}.__init__"
    assert "_set_" in cls.__init__.__code__.co_freevars[0]
    assert inspect.signature(cls) == inspect.signature(plain(cls))


def test_same_values_as_the_dataclass_init() -> None:
    iri = t.Iri("urn:x")
    lit = t.Literal("v", "urn:type")
    triple = t.Triple(iri, iri, lit)
    status = t.SessionStatus(t.SessionState.OPEN, 2)
    step = t.StepTriples("e", "s", Mechanism.AGENT, 3, "u", "c", "q", (triple,), status)
    assert (lit.value, lit.datatype, lit.language) == ("v", "urn:type", None)
    assert step.duplicate is False and step.graph == "urn:graph:retrieval" and step.triples == (triple,)
    assert status == t.SessionStatus(t.SessionState.OPEN, 2, None, 0, ())
    assert hash(triple) == hash(t.Triple(t.Iri("urn:x"), t.Iri("urn:x"), t.Literal("v", datatype="urn:type")))
    assert dataclasses.replace(step, seq=4).seq == 4 and dataclasses.replace(step, seq=4).triples == (triple,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        triple.s = iri  # type: ignore[misc]
    with pytest.raises(TypeError):
        t.Triple(iri, iri)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        t.Iri("a", value="b")  # type: ignore[misc]
    state = FoldState(Mechanism.AGENT, "u", "c", (("question", "e0"),), 3)
    assert pickle.loads(pickle.dumps(state)) == state and pickle.loads(pickle.dumps(step)) == step
    assert FoldState.from_dict(state.to_dict()) == state


@dataclass(frozen=True)
class NoSlots:
    x: int


@dataclass(slots=True)
class NotFrozen:
    x: int


@dataclass(frozen=True, slots=True)
class WithPostInit:
    x: int

    def __post_init__(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class WithFactory:
    x: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class WithoutInit:
    x: int = field(default=0, init=False)


@pytest.mark.parametrize("cls", [NoSlots, NotFrozen, WithPostInit, WithFactory, WithoutInit, int],
                         ids=lambda c: c.__name__)
def test_what_it_cannot_do_is_refused(cls: Any) -> None:
    with pytest.raises(TypeError):
        quick_init(cls)
