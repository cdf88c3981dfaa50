"""Load one trace (and the sub-traces its steps called) through the store and reader ports."""

from __future__ import annotations

from typing import Protocol

from provstream.core.triples import Triple
from provstream.read.model import AgentTrace, Completeness, RagTrace, Trace
from provstream.read.parse import build_trace


class TripleSource(Protocol):
    def trace_triples(self, question_iri: str, *, user: str, collection: str) -> set[Triple]: ...


class StatusSource(Protocol):
    def completeness(self, question_iri: str, *, user: str, collection: str) -> Completeness: ...

    def subtrace_question(self, synthesis_iri: str, *, user: str, collection: str) -> str | None: ...


def load_trace(store: TripleSource, reader: StatusSource, question_iri: str, *, user: str,
               collection: str) -> Trace:
    """The trace in that scope; raises :class:`TraceNotFound` when there is none."""
    trace = _load(store, reader, question_iri, user, collection)
    if not isinstance(trace, AgentTrace):
        return trace
    subtraces: list[tuple[str, RagTrace]] = []
    for synthesis in sorted({s for a in trace.analyses for s in a.calls}):
        sub_iri = reader.subtrace_question(synthesis, user=user, collection=collection)
        sub = _load(store, reader, sub_iri, user, collection) if sub_iri else None
        if isinstance(sub, RagTrace):
            subtraces.append((synthesis, sub))
    return AgentTrace(trace.question, trace.completeness, trace.analyses, trace.conclusion, tuple(subtraces))


def _load(store: TripleSource, reader: StatusSource, iri: str, user: str, collection: str) -> Trace:
    triples = store.trace_triples(iri, user=user, collection=collection)
    return build_trace(iri, triples, reader.completeness(iri, user=user, collection=collection))
