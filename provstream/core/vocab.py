"""The fixed PROV-O / TrustGraph vocabulary and the deterministic IRI scheme.

Every IRI a trace uses is built here from (mechanism, session id, step), so the
same events always give the same graph. Nothing else in provstream formats an
IRI from data.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Final

PROV: Final = "http://www.w3.org/ns/prov#"
RDF: Final = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
XSD: Final = "http://www.w3.org/2001/XMLSchema#"
TG: Final = "https://trustgraph.ai/ns/"

GRAPH: Final = "urn:graph:retrieval"

RDF_TYPE: Final = RDF + "type"
XSD_STRING: Final = XSD + "string"
XSD_INTEGER: Final = XSD + "integer"
XSD_DATETIME: Final = XSD + "dateTime"

# Types
PROV_ACTIVITY: Final = PROV + "Activity"
PROV_ENTITY: Final = PROV + "Entity"
TG_QUESTION: Final = TG + "Question"
TG_AGENT_QUESTION: Final = TG + "AgentQuestion"
TG_GRAPHRAG_QUESTION: Final = TG + "GraphRagQuestion"
TG_DOCRAG_QUESTION: Final = TG + "DocRagQuestion"
TG_ANALYSIS: Final = TG + "Analysis"
TG_CONCLUSION: Final = TG + "Conclusion"
TG_EXPLORATION: Final = TG + "Exploration"
TG_FOCUS: Final = TG + "Focus"
TG_SYNTHESIS: Final = TG + "Synthesis"

# Predicates
TG_QUERY: Final = TG + "query"
TG_THOUGHT: Final = TG + "thought"
TG_ACTION: Final = TG + "action"
TG_ARGUMENTS: Final = TG + "arguments"
TG_OBSERVATION: Final = TG + "observation"
TG_ANSWER: Final = TG + "answer"
TG_CONTENT: Final = TG + "content"
TG_CHUNK_COUNT: Final = TG + "chunkCount"
TG_SELECTED_CHUNK: Final = TG + "selectedChunk"
TG_EDGE_COUNT: Final = TG + "edgeCount"
TG_SELECTED_EDGE: Final = TG + "selectedEdge"
TG_EDGE: Final = TG + "edge"
TG_REASONING: Final = TG + "reasoning"
TG_CONVERSATION_ID: Final = TG + "conversationId"  # provstream's: the conversation an agent Question belongs to
TG_AGENT_NAME: Final = TG + "agentName"  # provstream's: the agent that answers an agent Question
PROV_STARTED_AT: Final = PROV + "startedAtTime"
PROV_WAS_DERIVED_FROM: Final = PROV + "wasDerivedFrom"
PROV_WAS_GENERATED_BY: Final = PROV + "wasGeneratedBy"

TYPES: Final = frozenset(
    {
        PROV_ACTIVITY, PROV_ENTITY, TG_QUESTION, TG_AGENT_QUESTION,
        TG_GRAPHRAG_QUESTION, TG_DOCRAG_QUESTION, TG_ANALYSIS, TG_CONCLUSION,
        TG_EXPLORATION, TG_FOCUS, TG_SYNTHESIS,
    }
)
PREDICATES: Final = frozenset(
    {
        RDF_TYPE, TG_QUERY, TG_THOUGHT, TG_ACTION, TG_ARGUMENTS, TG_OBSERVATION,
        TG_ANSWER, TG_CONTENT, TG_CHUNK_COUNT, TG_SELECTED_CHUNK, TG_EDGE_COUNT,
        TG_SELECTED_EDGE, TG_EDGE, TG_REASONING, TG_CONVERSATION_ID, TG_AGENT_NAME, PROV_STARTED_AT,
        PROV_WAS_DERIVED_FROM, PROV_WAS_GENERATED_BY,
    }
)


class Mechanism(StrEnum):
    """How a question was answered; decides the trace's shape and IRIs."""

    AGENT = "AGENT"
    GRAPHRAG = "GRAPHRAG"
    DOCRAG = "DOCRAG"

    @property
    def question_type(self) -> str:
        """The ``tg:`` subtype of the Question (``tg:AgentQuestion`` …)."""
        return _QUESTION_TYPES[self]

    @property
    def label(self) -> str:
        """The name users read in listings: ``Agent``, ``GraphRAG`` or ``DocRAG``."""
        return _LABELS[self]


_QUESTION_TYPES: Final = {
    Mechanism.AGENT: TG_AGENT_QUESTION,
    Mechanism.GRAPHRAG: TG_GRAPHRAG_QUESTION,
    Mechanism.DOCRAG: TG_DOCRAG_QUESTION,
}
_LABELS: Final = {Mechanism.AGENT: "Agent", Mechanism.GRAPHRAG: "GraphRAG", Mechanism.DOCRAG: "DocRAG"}
_QUESTION_PREFIX: Final = {
    Mechanism.AGENT: "urn:trustgraph:agent:",
    Mechanism.GRAPHRAG: "urn:trustgraph:question:",
    Mechanism.DOCRAG: "urn:trustgraph:docrag:",
}

# The steps of a RAG session, in order (their position is the step's ``seq``).
RAG_STEPS: Final = {
    Mechanism.GRAPHRAG: ("question", "exploration", "focus", "synthesis"),
    Mechanism.DOCRAG: ("question", "exploration", "synthesis"),
}

SESSION_ID_PATTERN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def valid_session_id(session_id: str) -> bool:
    """Session ids become part of IRIs: only URI-safe characters are allowed."""
    return bool(SESSION_ID_PATTERN.match(session_id))


def question_iri(mechanism: Mechanism, session_id: str) -> str:
    """The Question's IRI: ``urn:trustgraph:{agent|question|docrag}:{session}``.

    >>> question_iri(Mechanism.AGENT, "s1")
    'urn:trustgraph:agent:s1'
    """
    return _QUESTION_PREFIX[mechanism] + session_id


def analysis_iri(session_id: str, iteration: int) -> str:
    """Analysis ``iteration`` (1, 2, …) of an agent session.

    >>> analysis_iri("s1", 2)
    'urn:trustgraph:agent:s1/i2'
    """
    return f"{question_iri(Mechanism.AGENT, session_id)}/i{iteration}"


def conclusion_iri(session_id: str) -> str:
    """The agent session's Conclusion: ``urn:trustgraph:agent:{session}/final``."""
    return question_iri(Mechanism.AGENT, session_id) + "/final"


def exploration_iri(mechanism: Mechanism, session_id: str) -> str:
    """The Exploration of a RAG session (DocRAG under the question IRI, GraphRAG under ``urn:trustgraph:prov:``).

    >>> exploration_iri(Mechanism.DOCRAG, "s1")
    'urn:trustgraph:docrag:s1/exploration'
    """
    if mechanism is Mechanism.DOCRAG:
        return question_iri(mechanism, session_id) + "/exploration"
    return "urn:trustgraph:prov:exploration:" + session_id


def focus_iri(session_id: str) -> str:
    """The GraphRAG Focus: ``urn:trustgraph:prov:focus:{session}``."""
    return "urn:trustgraph:prov:focus:" + session_id


def edge_iri(session_id: str, index: int) -> str:
    """Selected edge ``index`` (0, 1, …) of a GraphRAG Focus.

    >>> edge_iri("s1", 0)
    'urn:trustgraph:prov:edge:s1:0'
    """
    return f"urn:trustgraph:prov:edge:{session_id}:{index}"


def subtrace_end_iri(mechanism: Mechanism, session_id: str) -> str:
    """The entity a calling agent step derives from: a RAG sub-trace's Synthesis, an agent sub-trace's Conclusion.

    >>> subtrace_end_iri(Mechanism.AGENT, "s2")
    'urn:trustgraph:agent:s2/final'
    """
    return conclusion_iri(session_id) if mechanism is Mechanism.AGENT else synthesis_iri(mechanism, session_id)


def subtrace_question_iri(iri: str) -> str | None:
    """The Question IRI of the sub-trace whose Synthesis or Conclusion is ``iri`` (inverse of :func:`subtrace_end_iri`).

    >>> subtrace_question_iri("urn:trustgraph:prov:synthesis:s3")
    'urn:trustgraph:question:s3'
    >>> subtrace_question_iri("urn:trustgraph:agent:s2/i1") is None
    True
    """
    graphrag = synthesis_iri(Mechanism.GRAPHRAG, "")
    if iri.startswith(graphrag):
        return question_iri(Mechanism.GRAPHRAG, iri[len(graphrag):])
    for mechanism, suffix in ((Mechanism.DOCRAG, "/synthesis"), (Mechanism.AGENT, "/final")):
        prefix = question_iri(mechanism, "")
        if iri.startswith(prefix) and iri.endswith(suffix):
            return iri[: -len(suffix)]
    return None


def synthesis_iri(mechanism: Mechanism, session_id: str) -> str:
    """The Synthesis (final RAG answer) of a session.

    >>> synthesis_iri(Mechanism.GRAPHRAG, "s1")
    'urn:trustgraph:prov:synthesis:s1'
    """
    if mechanism is Mechanism.DOCRAG:
        return question_iri(mechanism, session_id) + "/synthesis"
    return "urn:trustgraph:prov:synthesis:" + session_id


def parse_question_iri(iri: str) -> tuple[Mechanism, str] | None:
    """Inverse of :func:`question_iri`, for CLI arguments; ``None`` if not a question IRI."""
    for mechanism, prefix in _QUESTION_PREFIX.items():
        if iri.startswith(prefix):
            session_id = iri[len(prefix):]
            if valid_session_id(session_id):
                return mechanism, session_id
    return None


_STEP_OF_QUESTION: Final = re.compile(r"^(?P<question>.+)/(?P<step>i[1-9][0-9]*|final|exploration|synthesis)$")
_GRAPHRAG_STEP: Final = re.compile(
    r"^urn:trustgraph:prov:(?P<step>exploration|focus|synthesis|edge):(?P<session>[^:]+)(?::(?P<n>[0-9]+))?$")


def parse_step_iri(iri: str) -> tuple[str, str] | None:
    """The question IRI a step IRI belongs to, and the step's name; ``None`` if ``iri`` names no step.

    :param iri: e.g. ``urn:trustgraph:agent:<session>/i3`` or ``urn:trustgraph:prov:focus:<session>``.
    :returns: ``(question IRI, step)``, step one of ``i<n>``, ``final``, ``exploration``,
        ``focus`` (a selected edge's IRI gives ``focus`` too), ``synthesis``.

    Example: ``parse_step_iri("urn:trustgraph:agent:s1/i3")`` is ``("urn:trustgraph:agent:s1", "i3")``.
    """
    m = _STEP_OF_QUESTION.match(iri)
    if m is not None:
        parsed = parse_question_iri(m["question"])
        if parsed is None:
            return None
        step, agent = m["step"], parsed[0] is Mechanism.AGENT
        if agent != (step.startswith("i") or step == "final"):
            return None
        return m["question"], step
    m = _GRAPHRAG_STEP.match(iri)
    if m is None or not valid_session_id(m["session"]) or (m["step"] == "edge") != (m["n"] is not None):
        return None
    return question_iri(Mechanism.GRAPHRAG, m["session"]), "focus" if m["step"] == "edge" else m["step"]


def local_name(iri: str) -> str:
    """``https://trustgraph.ai/ns/Analysis`` -> ``Analysis``."""
    return re.split(r"[#/:]", iri)[-1]


def vocabulary() -> frozenset[str]:
    """Every constant IRI/literal string of this module and the question types (for interning)."""
    constants = {value for name, value in globals().items() if type(value) is str and not name.startswith("_")}
    return frozenset(constants | {m.question_type for m in Mechanism})


def xsd_datetime(moment: datetime) -> str:
    """The one lexical form of an ``xsd:dateTime`` provstream writes: UTC, microseconds, ``Z``.

    >>> from datetime import UTC, datetime
    >>> xsd_datetime(datetime(2025, 3, 1, 9, 0, tzinfo=UTC))
    '2025-03-01T09:00:00.000000Z'
    """
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
