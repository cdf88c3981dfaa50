"""The typed trace model the read side renders: immutable values, no I/O.

:func:`provstream.read.parse.build_trace` fills it from a trace's triples; the
renderers (:mod:`.render_text`, :mod:`.render_json`) only read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from provstream.core.triples import SessionState, SessionStatus
from provstream.core.vocab import RAG_STEPS, Mechanism

# Session status words, as stored on the Question node and shown to users.
COMPLETE = SessionState.CONCLUDED.word
OPEN = SessionState.OPEN.word
INCOMPLETE = SessionState.INCOMPLETE.word
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Completeness:
    """How complete a session is; ``missing`` holds step positions (0 = question)."""

    status: str = UNKNOWN
    steps: int | None = None
    expected: int | None = None
    late: int = 0
    missing: tuple[int, ...] = ()

    @classmethod
    def from_status(cls, status: SessionStatus) -> Completeness:
        return cls(status.state.word, status.steps, status.expected, status.late, status.missing)


@dataclass(frozen=True, slots=True)
class Question:
    iri: str
    mechanism: Mechanism
    session_id: str
    query: str = ""
    started: str = ""  # xsd:dateTime lexical form, "" when unknown
    agent_name: str = ""  # tg:agentName (agent sessions), "" when not recorded
    conversation_id: str = ""  # tg:conversationId (agent sessions), "" when not recorded


@dataclass(frozen=True, slots=True)
class Analysis:
    """One agent iteration. ``uses`` names the earlier iterations it derives from
    (``("i1", "i3")``); ``calls`` the Synthesis IRIs of sub-traces it called."""

    iri: str
    step: str
    thought: str = ""
    action: str = ""
    arguments: str = ""
    observation: str = ""
    uses: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Conclusion:
    iri: str
    answer: str = ""


@dataclass(frozen=True, slots=True)
class Exploration:
    iri: str
    edge_count: int | None = None
    chunk_count: int | None = None
    chunks: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class FocusEdge:
    iri: str
    subject: str
    predicate: str
    object: str
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class Focus:
    iri: str
    edges: tuple[FocusEdge, ...] = ()


@dataclass(frozen=True, slots=True)
class Synthesis:
    iri: str
    content: str = ""


@dataclass(frozen=True, slots=True)
class RagTrace:
    """A GraphRAG or DocRAG trace (DocRAG has no focus)."""

    question: Question
    completeness: Completeness
    exploration: Exploration | None = None
    focus: Focus | None = None
    synthesis: Synthesis | None = None


@dataclass(frozen=True, slots=True)
class AgentTrace:
    """An agent trace; ``subtraces`` maps what an Analysis calls (a RAG Synthesis or an agent Conclusion IRI) to
    that sub-trace."""

    question: Question
    completeness: Completeness
    analyses: tuple[Analysis, ...] = ()
    conclusion: Conclusion | None = None
    subtraces: tuple[tuple[str, Trace], ...] = ()

    def subtrace(self, end_iri: str) -> Trace | None:
        """The sub-trace whose Synthesis or Conclusion is ``end_iri``, if it was loaded."""
        return dict(self.subtraces).get(end_iri)


Trace = Union[AgentTrace, RagTrace]



def missing_names(mechanism: Mechanism, missing: tuple[int, ...]) -> tuple[str, ...]:
    """Step positions as names: agents ``question``/``i2``; RAG ``exploration``, ..."""
    if mechanism is Mechanism.AGENT:
        return tuple("question" if n == 0 else f"i{n}" for n in missing)
    order = RAG_STEPS[mechanism]
    return tuple(order[n] if 0 <= n < len(order) else str(n) for n in missing)
