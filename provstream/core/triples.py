"""RDF terms, triples and the per-step triples message: immutable values."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Union

from provstream.core.frozen import quick_init
from provstream.core.vocab import GRAPH, Mechanism


@quick_init
@dataclass(frozen=True, slots=True)
class Iri:
    value: str

    def __str__(self) -> str:
        return f"<{self.value}>"


@quick_init
@dataclass(frozen=True, slots=True)
class Literal:
    """A literal; ``datatype`` ``None`` is a plain string (xsd:string)."""

    value: str
    datatype: str | None = None
    language: str | None = None

    def __str__(self) -> str:
        suffix = f"^^<{self.datatype}>" if self.datatype else (f"@{self.language}" if self.language else "")
        return f'"{self.value}"{suffix}'


@quick_init
@dataclass(frozen=True, slots=True)
class QuotedTriple:
    """An RDF-star quoted triple used as an object (GraphRAG's ``tg:edge``)."""

    s: Iri
    p: Iri
    o: Iri | Literal

    def __str__(self) -> str:
        return f"<< {self.s} {self.p} {self.o} >>"


Term = Union[Iri, Literal, QuotedTriple]


@quick_init
@dataclass(frozen=True, slots=True)
class Triple:
    s: Iri
    p: Iri
    o: Term

    def __str__(self) -> str:
        return f"{self.s} {self.p} {self.o} ."


class SessionState(StrEnum):
    OPEN = "OPEN"
    CONCLUDED = "CONCLUDED"
    INCOMPLETE = "INCOMPLETE"

    @property
    def word(self) -> str:
        """How users read the state: ``open``, ``complete`` or ``incomplete`` (graph, listing, show)."""
        return STATUS_WORDS[self.value]


STATUS_WORDS: Final = {"OPEN": "open", "CONCLUDED": "complete", "INCOMPLETE": "incomplete"}


@quick_init
@dataclass(frozen=True, slots=True)
class SessionStatus:
    """Completeness of a session after a step.

    ``steps`` counts distinct steps received; ``expected`` is known once the
    session concluded; ``late`` counts steps that arrived after a conclusion
    that did not announce them; ``missing`` lists absent agent iterations.
    """

    state: SessionState
    steps: int
    expected: int | None = None
    late: int = 0
    missing: tuple[int, ...] = ()


@quick_init
@dataclass(frozen=True, slots=True)
class StepTriples:
    """The triples one event produced, with the session's scope and status."""

    event_id: str
    session_id: str
    mechanism: Mechanism
    seq: int
    user: str
    collection: str
    question: str
    triples: tuple[Triple, ...]
    status: SessionStatus
    duplicate: bool = False
    graph: str = GRAPH
