"""Load one trace (and the sub-traces its steps called) through the store and reader ports."""

from __future__ import annotations

from typing import Protocol

from provstream.core.triples import Triple
from provstream.read.model import AgentTrace, Completeness, Trace
from provstream.read.parse import build_trace


class TripleSource(Protocol):
    def trace_triples(self, question_iri: str, *, user: str, collection: str) -> set[Triple]: ...


class StatusSource(Protocol):
    def completeness(self, question_iri: str, *, user: str, collection: str) -> Completeness: ...

    def subtrace_question(self, synthesis_iri: str, *, user: str, collection: str) -> str | None: ...


def load_trace(store: TripleSource, reader: StatusSource, question_iri: str, *, user: str,
               collection: str, depth: int = 3) -> Trace:
    """The trace in that scope, with the sub-traces its steps called (nested up to ``depth`` levels).

    :raises TraceNotFound: when there is no such trace in the scope.
    """
    return _with_subtraces(store, reader, _load(store, reader, question_iri, user, collection), user, collection,
                           depth, {question_iri})


def _with_subtraces(store: TripleSource, reader: StatusSource, trace: Trace, user: str, collection: str,
                    depth: int, seen: set[str]) -> Trace:
    if not isinstance(trace, AgentTrace) or depth <= 0:
        return trace
    subtraces: list[tuple[str, Trace]] = []
    for end in sorted({s for a in trace.analyses for s in a.calls}):
        sub_iri = reader.subtrace_question(end, user=user, collection=collection)
        if sub_iri is None or sub_iri in seen:
            continue
        sub = _with_subtraces(store, reader, _load(store, reader, sub_iri, user, collection), user, collection,
                              depth - 1, seen | {sub_iri})
        subtraces.append((end, sub))
    return AgentTrace(trace.question, trace.completeness, trace.analyses, trace.conclusion, tuple(subtraces))


def _load(store: TripleSource, reader: StatusSource, iri: str, user: str, collection: str) -> Trace:
    triples = store.trace_triples(iri, user=user, collection=collection)
    return build_trace(iri, triples, reader.completeness(iri, user=user, collection=collection))
