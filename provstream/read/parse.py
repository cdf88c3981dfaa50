"""Triples of one trace -> the typed trace model (pure).

The trace's kind comes from the Question's ``rdf:type`` (``tg:AgentQuestion``,
``tg:GraphRagQuestion``, ``tg:DocRagQuestion``), and every other node's role
from its own ``rdf:type``; the links come from ``prov:wasDerivedFrom`` /
``prov:wasGeneratedBy`` / ``tg:selectedEdge``. Nothing is inferred from the
shape of an IRI except an iteration's short name (``i3``), which is the part
of its IRI after the question's.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from provstream.core import vocab as v
from provstream.core.triples import Iri, Literal, QuotedTriple, Triple
from provstream.errors import TraceNotFound
from provstream.read.model import (
    AgentTrace,
    Analysis,
    Completeness,
    Conclusion,
    Exploration,
    Focus,
    FocusEdge,
    Question,
    RagTrace,
    Synthesis,
    Trace,
)

_MECHANISM_OF_TYPE = {m.question_type: m for m in v.Mechanism}
_ITERATION = re.compile(r"^i(\d+)$")


@dataclass
class _Node:
    types: set[str] = field(default_factory=set)
    values: dict[str, list[Literal | QuotedTriple]] = field(default_factory=lambda: defaultdict(list))
    links: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def text(self, predicate: str) -> str:
        found = [x.value for x in self.values.get(predicate, ()) if isinstance(x, Literal)]
        return min(found) if found else ""

    def integer(self, predicate: str) -> int | None:
        text = self.text(predicate)
        return int(text) if text.lstrip("-").isdigit() else None


class _Index:
    def __init__(self, triples: Iterable[Triple]) -> None:
        self.nodes: dict[str, _Node] = defaultdict(_Node)
        for t in triples:
            node = self.nodes[t.s.value]
            if t.p.value == v.RDF_TYPE and isinstance(t.o, Iri):
                node.types.add(t.o.value)
            elif isinstance(t.o, Iri):
                node.links[t.p.value].append(t.o.value)
            else:
                node.values[t.p.value].append(t.o)

    def of_type(self, type_iri: str) -> list[str]:
        return sorted(iri for iri, node in self.nodes.items() if type_iri in node.types)

    def node(self, iri: str) -> _Node:
        return self.nodes.get(iri) or _Node()


def build_trace(question_iri: str, triples: Iterable[Triple], completeness: Completeness | None = None) -> Trace:
    """The trace rooted at ``question_iri``; :class:`TraceNotFound` if the triples have no such Question."""
    index = _Index(triples)
    question = _question(index, question_iri)
    done = completeness or Completeness()
    if question.mechanism is v.Mechanism.AGENT:
        return _agent(index, question, done)
    return _rag(index, question, done)


def trace_mechanism(question_iri: str, triples: Iterable[Triple]) -> v.Mechanism | None:
    """The mechanism named by the Question's ``rdf:type``, ``None`` when it is not a typed Question."""
    types = {t.o.value for t in triples
             if t.s.value == question_iri and t.p.value == v.RDF_TYPE and isinstance(t.o, Iri)}
    if v.TG_QUESTION not in types:
        return None
    found = [m for type_iri, m in _MECHANISM_OF_TYPE.items() if type_iri in types]
    return found[0] if len(found) == 1 else None


def _question(index: _Index, iri: str) -> Question:
    node = index.node(iri)
    mechanism = trace_mechanism(iri, _type_triples(iri, node)) or _mechanism_of_steps(index)
    if mechanism is None:
        raise TraceNotFound(f"no trace {iri}")
    parsed = v.parse_question_iri(iri)
    session = parsed[1] if parsed else v.local_name(iri)
    return Question(iri, mechanism, session, node.text(v.TG_QUERY), node.text(v.PROV_STARTED_AT),
                    node.text(v.TG_AGENT_NAME), node.text(v.TG_CONVERSATION_ID))


def _mechanism_of_steps(index: _Index) -> v.Mechanism | None:
    """When the question step itself is missing: the mechanism its other steps' types imply."""
    if index.of_type(v.TG_ANALYSIS) or index.of_type(v.TG_CONCLUSION):
        return v.Mechanism.AGENT
    explorations = [index.node(e) for e in index.of_type(v.TG_EXPLORATION)]
    if index.of_type(v.TG_FOCUS) or any(v.TG_EDGE_COUNT in e.values for e in explorations):
        return v.Mechanism.GRAPHRAG
    if any(v.TG_CHUNK_COUNT in e.values for e in explorations):
        return v.Mechanism.DOCRAG
    return None


def _type_triples(iri: str, node: _Node) -> list[Triple]:
    return [Triple(Iri(iri), Iri(v.RDF_TYPE), Iri(t)) for t in node.types]


# -- agent ------------------------------------------------------------------

def step_name(question_iri: str, iri: str) -> str:
    """``urn:trustgraph:agent:s/i3`` -> ``i3`` (falls back to the IRI's local name)."""
    prefix = question_iri + "/"
    return iri[len(prefix):] if iri.startswith(prefix) else v.local_name(iri)


def _step_order(name: str, iri: str) -> tuple[int, str]:
    match = _ITERATION.match(name)
    return (int(match.group(1)) if match else 1 << 30, iri)


def _agent(index: _Index, question: Question, completeness: Completeness) -> AgentTrace:
    iris = index.of_type(v.TG_ANALYSIS)
    names = {iri: step_name(question.iri, iri) for iri in iris}
    ordered = sorted(iris, key=lambda iri: _step_order(names[iri], iri))
    analyses = tuple(_analysis(index, iri, names, question.iri) for iri in ordered)
    conclusions = index.of_type(v.TG_CONCLUSION)
    conclusion = Conclusion(conclusions[0], index.node(conclusions[0]).text(v.TG_ANSWER)) if conclusions else None
    return AgentTrace(question, completeness, analyses, conclusion)


def _analysis(index: _Index, iri: str, names: dict[str, str], question_iri: str) -> Analysis:
    node = index.node(iri)
    sources = node.links.get(v.PROV_WAS_DERIVED_FROM, [])
    uses = tuple(sorted((names[s] for s in sources if s in names), key=lambda n: _step_order(n, n)))
    calls = tuple(sorted(s for s in sources if s not in names and s != question_iri))
    return Analysis(
        iri=iri, step=names[iri], thought=node.text(v.TG_THOUGHT), action=node.text(v.TG_ACTION),
        arguments=node.text(v.TG_ARGUMENTS), observation=node.text(v.TG_OBSERVATION),
        uses=uses, calls=calls,
    )


# -- GraphRAG / DocRAG ------------------------------------------------------

def _rag(index: _Index, question: Question, completeness: Completeness) -> RagTrace:
    return RagTrace(question, completeness, _exploration(index), _focus(index), _synthesis(index))


def _first(index: _Index, type_iri: str) -> str | None:
    found = index.of_type(type_iri)
    return found[0] if found else None


def _exploration(index: _Index) -> Exploration | None:
    iri = _first(index, v.TG_EXPLORATION)
    if iri is None:
        return None
    node = index.node(iri)
    chunks = tuple(sorted(x.value for x in node.values.get(v.TG_SELECTED_CHUNK, ()) if isinstance(x, Literal)))
    return Exploration(iri, node.integer(v.TG_EDGE_COUNT), node.integer(v.TG_CHUNK_COUNT), chunks)


def _focus(index: _Index) -> Focus | None:
    iri = _first(index, v.TG_FOCUS)
    if iri is None:
        return None
    edges = index.node(iri).links.get(v.TG_SELECTED_EDGE, [])
    return Focus(iri, tuple(_edge(index, e) for e in sorted(edges, key=_edge_order)))


def _edge_order(iri: str) -> tuple[int, str]:
    tail = iri.rsplit(":", 1)[-1]
    return (int(tail) if tail.isdigit() else 1 << 30, iri)


def _edge(index: _Index, iri: str) -> FocusEdge:
    node = index.node(iri)
    quoted = [x for x in node.values.get(v.TG_EDGE, ()) if isinstance(x, QuotedTriple)]
    reasoning = node.text(v.TG_REASONING)
    if not quoted:
        return FocusEdge(iri, "", "", "", reasoning)
    q = quoted[0]
    return FocusEdge(iri, q.s.value, q.p.value, q.o.value, reasoning)


def _synthesis(index: _Index) -> Synthesis | None:
    iri = _first(index, v.TG_SYNTHESIS)
    return Synthesis(iri, index.node(iri).text(v.TG_CONTENT)) if iri else None
