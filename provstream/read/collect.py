"""The triples of one trace with those of the sub-traces its steps called (for ``provstream export``)."""

from __future__ import annotations

from provstream.core import vocab as v
from provstream.core.triples import Triple
from provstream.read.loader import StatusSource, TripleSource, load_trace
from provstream.read.model import AgentTrace, Trace


def subtrace_questions(trace: Trace) -> list[str]:
    """The Question IRIs of every sub-trace loaded under ``trace``, nested ones included, in order."""
    if not isinstance(trace, AgentTrace):
        return []
    out: list[str] = []
    for _, sub in trace.subtraces:
        out += [sub.question.iri, *subtrace_questions(sub)]
    return list(dict.fromkeys(out))


def trace_with_subtraces(store: TripleSource, reader: StatusSource, question_iri: str, *, user: str,
                         collection: str, subtraces: bool = True) -> tuple[set[Triple], list[str]]:
    """The trace's triples and, with ``subtraces``, those of the sub-traces an agent trace's steps called.

    :param store: the triple port (Neo4j, or :class:`~provstream.read.asof.AsOfSource`).
    :param reader: the status port (it finds a sub-trace's Question).
    :param question_iri: the trace.
    :param subtraces: inline the linked sub-traces (RAG traces have none).
    :returns: ``(triples, the Question IRIs inlined)``; a step's ``prov:wasDerivedFrom`` link to a
        sub-trace's end then points inside the same document.
    :raises TraceNotFound: no such trace in the scope.

    Example::

        triples, inlined = trace_with_subtraces(store, reader, "urn:trustgraph:agent:s1", user="u", collection="c")
    """
    triples = set(store.trace_triples(question_iri, user=user, collection=collection))
    if not subtraces or (parsed := v.parse_question_iri(question_iri)) is None or parsed[0] is not v.Mechanism.AGENT:
        return triples, []
    inlined = subtrace_questions(load_trace(store, reader, question_iri, user=user, collection=collection))
    for sub in inlined:
        triples |= store.trace_triples(sub, user=user, collection=collection)
    return triples, inlined
