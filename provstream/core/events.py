"""Step events: the contract agent code writes and the fold reads.

One frozen dataclass per Avro payload type in ``schemas/``; :class:`Event` is
the envelope. ``seq`` is the per-session sequence number the emitter assigns
(0 for the question).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Union

from provstream.core.vocab import Mechanism

SEALED_PREFIX = "ps-enc:1:"
"""How a personal text field sealed by :mod:`provstream.crypto` begins (opaque to the fold)."""


@dataclass(frozen=True, slots=True)
class SubTrace:
    """The session an agent step called: a GraphRAG/DocRAG query, or another agent (used as a tool, a handoff)."""

    mechanism: Mechanism
    session_id: str


@dataclass(frozen=True, slots=True)
class AgentQuestion:
    """The question that opens an agent session.

    ``conversation_id`` (the conversation or thread the session belongs to) and
    ``agent_name`` (the agent that answers) are optional: ``None`` or ``""``
    records nothing.
    """

    query: str
    conversation_id: str | None = None
    agent_name: str | None = None


@dataclass(frozen=True, slots=True)
class AgentIteration:
    """One think/act/observe cycle; ``arguments`` is JSON text.

    ``used`` names earlier iterations this one used (DAG); empty means the
    linear chain (derive from the previous iteration).
    """

    iteration: int
    thought: str = ""
    action: str = ""
    arguments: str = "{}"
    observation: str = ""
    used: tuple[int, ...] = ()
    subtrace: SubTrace | None = None


@dataclass(frozen=True, slots=True)
class AgentConclusion:
    """The final answer; ``iterations`` is how many iterations the session had."""

    answer: str
    iterations: int


@dataclass(frozen=True, slots=True)
class GraphRagQuestion:
    query: str


@dataclass(frozen=True, slots=True)
class GraphRagExploration:
    edge_count: int


@dataclass(frozen=True, slots=True)
class SelectedEdge:
    """An (s, p, o) knowledge-graph edge the focus step kept, and why."""

    subject: str
    predicate: str
    object: str
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class GraphRagFocus:
    edges: tuple[SelectedEdge, ...] = ()


@dataclass(frozen=True, slots=True)
class GraphRagSynthesis:
    content: str


@dataclass(frozen=True, slots=True)
class DocRagQuestion:
    query: str


@dataclass(frozen=True, slots=True)
class DocRagExploration:
    chunk_count: int
    chunks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DocRagSynthesis:
    content: str


Payload = Union[
    AgentQuestion, AgentIteration, AgentConclusion,
    GraphRagQuestion, GraphRagExploration, GraphRagFocus, GraphRagSynthesis,
    DocRagQuestion, DocRagExploration, DocRagSynthesis,
]

MECHANISM_OF: dict[type, Mechanism] = {
    AgentQuestion: Mechanism.AGENT,
    AgentIteration: Mechanism.AGENT,
    AgentConclusion: Mechanism.AGENT,
    GraphRagQuestion: Mechanism.GRAPHRAG,
    GraphRagExploration: Mechanism.GRAPHRAG,
    GraphRagFocus: Mechanism.GRAPHRAG,
    GraphRagSynthesis: Mechanism.GRAPHRAG,
    DocRagQuestion: Mechanism.DOCRAG,
    DocRagExploration: Mechanism.DOCRAG,
    DocRagSynthesis: Mechanism.DOCRAG,
}

QUESTION_TYPES = (AgentQuestion, GraphRagQuestion, DocRagQuestion)
FINAL_TYPES = (AgentConclusion, GraphRagSynthesis, DocRagSynthesis)


@dataclass(frozen=True, slots=True)
class Event:
    """The envelope every step travels in (Avro ``provstream.Event``)."""

    event_id: str
    session_id: str
    mechanism: Mechanism
    seq: int
    event_time: datetime
    payload: Payload
    user: str = "trustgraph"
    collection: str = "default"
