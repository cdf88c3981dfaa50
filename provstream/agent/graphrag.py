"""GraphRAG over the bundled knowledge graph: Exploration -> Focus -> Synthesis.

Exploration takes the edges whose subject or object names something in the
question, plus one hop onward from their objects; Focus keeps the edges that
match the question best, then their one-hop continuations, each with its
reasoning; Synthesis states them. Pure functions plus :func:`run_graphrag`,
which records the steps as they happen.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from provstream.agent.corpus import Edge, KnowledgeGraph
from provstream.agent.text import tokenize

FOCUSED = 8
KEEP = 0.6  # Focus keeps edges scoring at least this share of the best edge ...
HOP = 1.0  # ... and edges on from a kept edge's object that match the question at all
NOTHING = "The knowledge graph has no statement about this question."


class GraphRagRecorder(Protocol):
    """What :func:`run_graphrag` needs from an emitter's GraphRAG session."""

    def explore(self, edge_count: int) -> str: ...

    def focus(self, edges: Sequence[tuple[str, str, str, str]]) -> str: ...

    def synthesize(self, content: str) -> str: ...


@dataclass(frozen=True, slots=True)
class Focused:
    edge: Edge
    score: float
    reasoning: str


@dataclass(frozen=True, slots=True)
class GraphRagAnswer:
    explored: tuple[Edge, ...]
    focused: tuple[Focused, ...]
    content: str


def predicate_label(kg: KnowledgeGraph, iri: str) -> str:
    """The graph's label for a predicate, else ``.../namedAfter`` -> ``named after``."""
    label = kg.label(iri)
    return label if label != iri.rsplit("/", 1)[-1] else re.sub(r"(?<=[a-z])(?=[A-Z])", " ", label).lower()


def _matches(kg: KnowledgeGraph, terms: set[str], iri: str) -> set[str]:
    return terms & set(tokenize(kg.label(iri)))


def explore(kg: KnowledgeGraph, question: str) -> list[Edge]:
    """Edges touching an entity the question names, plus one hop from their objects (graph order)."""
    terms = set(tokenize(question))
    direct = [e for e in kg.edges if _matches(kg, terms, e.subject) or _matches(kg, terms, e.object)]
    reached = {e.object for e in direct}
    return [e for e in kg.edges if e in direct or e.subject in reached]


def _score(kg: KnowledgeGraph, terms: set[str], edge: Edge) -> Focused:
    s, o = _matches(kg, terms, edge.subject), _matches(kg, terms, edge.object)
    p = terms & set(tokenize(predicate_label(kg, edge.predicate)))
    parts = ((kg.label(edge.subject), s), (predicate_label(kg, edge.predicate), p), (kg.label(edge.object), o))
    named = "; ".join(text for text, hit in parts if hit)
    return Focused(edge, 2 * len(s) + 2 * len(p) + len(o), f"the question mentions {named}" if named else "")


def _hop(kg: KnowledgeGraph, f: Focused) -> Focused:
    reason = f"follows on from {kg.label(f.edge.subject)}, reached by an edge kept above"
    return Focused(f.edge, f.score, f"{reason}; {f.reasoning}" if f.reasoning else reason)


def focus(kg: KnowledgeGraph, question: str, edges: Sequence[Edge], limit: int = FOCUSED) -> list[Focused]:
    """The best-matching edges (score >= KEEP x the best), then one-hop continuations; best first."""
    terms = set(tokenize(question))
    order = sorted(((_score(kg, terms, e), i) for i, e in enumerate(edges)), key=lambda x: (-x[0].score, x[1]))
    ranked = [f for f, _ in order]
    if not ranked or ranked[0].score == 0:
        return []
    kept = [f for f in ranked if f.score >= KEEP * ranked[0].score][:limit]
    reached = {f.edge.object for f in kept}
    hops = [_hop(kg, f) for f in ranked if f not in kept and f.edge.subject in reached and f.score >= HOP]
    return (kept + hops)[:limit]


def synthesize(kg: KnowledgeGraph, focused: Sequence[Focused]) -> str:
    if not focused:
        return NOTHING
    return " ".join(
        f"{kg.label(f.edge.subject)} {predicate_label(kg, f.edge.predicate)} {kg.label(f.edge.object)}."
        for f in focused
    )


def answer(kg: KnowledgeGraph, question: str) -> GraphRagAnswer:
    explored = explore(kg, question)
    focused = focus(kg, question, explored)
    return GraphRagAnswer(tuple(explored), tuple(focused), synthesize(kg, focused))


def run_graphrag(session: GraphRagRecorder, kg: KnowledgeGraph, question: str) -> GraphRagAnswer:
    """Answer ``question`` and record Exploration, Focus and Synthesis on ``session``."""
    explored = explore(kg, question)
    session.explore(len(explored))
    focused = focus(kg, question, explored)
    session.focus([(f.edge.subject, f.edge.predicate, f.edge.object, f.reasoning) for f in focused])
    content = synthesize(kg, focused)
    session.synthesize(content)
    return GraphRagAnswer(tuple(explored), tuple(focused), content)
