"""The pure fold: ``fold(state, event) -> (state, StepTriples)``.

No I/O, no clock, no random ids. Every triple an event produces depends on
that event alone (IRIs come from the session id and the step), so any order
or duplication of a session's events gives the same final graph; the state
only tracks which steps arrived (completeness, duplicates, conflicts) and the
session's scope, which an event may never change.

Invalid events raise :class:`InvalidEvent` with the reason; the adapter sends
them to the dead-letter topic.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.core.frozen import quick_init
from provstream.core.triples import Iri, Literal, QuotedTriple, SessionState, SessionStatus, StepTriples, Triple
from provstream.errors import InvalidEvent

# The largest iteration number (and announced iteration count) a session may have. A conclusion's
# status lists every missing iteration, so an unbounded count (2**63 - 1 fits the schema) would make
# one event fold for ever and exhaust memory; agents never come near this.
MAX_ITERATIONS = 10_000
_IRI_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:[^\s<>\"{}|\\^`]+$")
_STEP_KEYS: dict[type, str] = {
    ev.AgentQuestion: "question", ev.AgentConclusion: "final",
    ev.GraphRagQuestion: "question", ev.GraphRagExploration: "exploration",
    ev.GraphRagFocus: "focus", ev.GraphRagSynthesis: "synthesis",
    ev.DocRagQuestion: "question", ev.DocRagExploration: "exploration", ev.DocRagSynthesis: "synthesis",
}


@quick_init
@dataclass(frozen=True, slots=True)
class FoldState:
    """What one session needs: its scope, the steps seen (key -> event id), the announced iteration count."""

    mechanism: v.Mechanism
    user: str
    collection: str
    steps: tuple[tuple[str, str], ...] = ()
    iterations: int | None = None

    def event_for(self, key: str) -> str | None:
        """The id of the event already folded for step ``key``, if any (duplicates are recognised by it)."""
        return dict(self.steps).get(key)

    def to_dict(self) -> dict[str, Any]:
        """The plain form stored in the worker's table (JSON-friendly); :meth:`from_dict` reverses it."""
        return {"mechanism": self.mechanism.value, "user": self.user, "collection": self.collection,
                "steps": [list(s) for s in self.steps], "iterations": self.iterations}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FoldState:
        """The state :meth:`to_dict` stored."""
        return cls(v.Mechanism(data["mechanism"]), data["user"], data["collection"],
                   tuple((str(k), str(e)) for k, e in data["steps"]), data["iterations"])


def fold(state: FoldState | None, event: ev.Event) -> tuple[FoldState, StepTriples]:
    """Fold one event into the session state; return the new state and the step's triples.

    Pure: no I/O, no clock, no random ids; the same events give the same
    triples. A redelivered event (same event id) gives the same triples again
    and leaves the state as it was.

    :param state: the session's state so far, ``None`` for its first event.
    :param event: the next event of that session, in any order.
    :returns: ``(new state, StepTriples)`` — the step's triples in ``urn:graph:retrieval``
        with the session's scope and completeness status.
    :raises InvalidEvent: the event breaks the contract (bad payload, another
        session's scope, a different event for a step already recorded);
        the worker sends it to the dead-letter topic with this reason.

    Example::

        >>> from datetime import UTC, datetime
        >>> from provstream.core import events as ev
        >>> e = ev.Event("e0", "s1", v.Mechanism.AGENT, 0, datetime(2025, 1, 1, tzinfo=UTC),
        ...              ev.AgentQuestion("What is the capital of France?"), "trustgraph", "default")
        >>> state, step = fold(None, e)
        >>> step.question
        'urn:trustgraph:agent:s1'
    """
    _validate(event)
    state = _check_scope(state, event)
    key = step_key(event.payload)
    seen = state.event_for(key)
    if seen is not None and seen != event.event_id:
        raise InvalidEvent(
            f"conflicting step: {key} of session {event.session_id} was already recorded by event {seen}"
        )
    if seen is None:
        state = _record(state, key, event)
    return state, StepTriples(
        event_id=event.event_id, session_id=event.session_id, mechanism=event.mechanism,
        seq=event.seq, user=event.user, collection=event.collection,
        question=v.question_iri(event.mechanism, event.session_id),
        triples=tuple(step_triples(event)), status=status(state), duplicate=seen is not None,
    )


def step_key(payload: ev.Payload) -> str:
    """The step's identity in its session: ``question``, ``i3``, ``final``, ``focus``, ..."""
    if isinstance(payload, ev.AgentIteration):
        return f"i{payload.iteration}"
    return _STEP_KEYS[type(payload)]


def _record(state: FoldState, key: str, event: ev.Event) -> FoldState:
    steps = tuple(sorted(state.steps + ((key, event.event_id),)))
    p = event.payload
    expected = p.iterations if isinstance(p, ev.AgentConclusion) else state.iterations
    return FoldState(state.mechanism, state.user, state.collection, steps, expected)  # dataclasses.replace is slow


def status(state: FoldState) -> SessionStatus:
    """Completeness: OPEN until the final step; then CONCLUDED or INCOMPLETE (with what is missing)."""
    keys = {k for k, _ in state.steps}
    if state.mechanism is v.Mechanism.AGENT:
        if "final" not in keys or state.iterations is None:
            return SessionStatus(SessionState.OPEN, len(keys))
        n = state.iterations
        wanted = ["question", *(f"i{i}" for i in range(1, n + 1))]
        missing = tuple(i for i, k in enumerate(wanted) if k not in keys)
        late = sum(1 for k in keys if k.startswith("i") and int(k[1:]) > n)
        expected = n + 2
    else:
        order = v.RAG_STEPS[state.mechanism]
        if "synthesis" not in keys:
            return SessionStatus(SessionState.OPEN, len(keys))
        missing = tuple(i for i, k in enumerate(order) if k not in keys)
        late, expected = 0, len(order)
    state_ = SessionState.INCOMPLETE if missing else SessionState.CONCLUDED
    return SessionStatus(state_, len(keys), expected, late, missing)


# -- validation -------------------------------------------------------------

def _validate(event: ev.Event) -> None:
    if not v.valid_session_id(event.session_id):
        raise InvalidEvent(f"invalid session id {event.session_id!r}: use 1-128 of [A-Za-z0-9._-]")
    if ev.MECHANISM_OF.get(type(event.payload)) is not event.mechanism:
        raise InvalidEvent(f"{type(event.payload).__name__} is not a {event.mechanism.value} step")
    if not event.user or not event.collection:
        raise InvalidEvent("user and collection must not be empty")
    if event.event_time.tzinfo is None:
        raise InvalidEvent("event_time must be timezone-aware")
    _validate_payload(event.payload, event.session_id)


validate = _validate
"""Public name of the contract check, so the emitter rejects at the call what the fold would dead-letter."""


def _validate_payload(p: ev.Payload, session_id: str) -> None:
    if isinstance(p, ev.AgentIteration):
        _validate_iteration(p, session_id)
    elif isinstance(p, ev.AgentConclusion) and not 0 <= p.iterations <= MAX_ITERATIONS:
        raise InvalidEvent(f"conclusion names {p.iterations} iterations (0..{MAX_ITERATIONS} allowed)")
    elif isinstance(p, ev.GraphRagExploration) and p.edge_count < 0:
        raise InvalidEvent(f"negative edge count {p.edge_count}")
    elif isinstance(p, ev.DocRagExploration) and p.chunk_count < 0:
        raise InvalidEvent(f"negative chunk count {p.chunk_count}")
    elif isinstance(p, ev.GraphRagFocus):
        for edge in p.edges:
            for name in ("subject", "predicate"):
                if not _IRI_LIKE.match(getattr(edge, name)):
                    raise InvalidEvent(f"edge {name} {getattr(edge, name)!r} is not an IRI")


def _validate_iteration(p: ev.AgentIteration, session_id: str) -> None:
    if not 1 <= p.iteration <= MAX_ITERATIONS:
        raise InvalidEvent(f"iteration {p.iteration}: iterations count from 1 to {MAX_ITERATIONS}")
    bad = [u for u in p.used if not 1 <= u < p.iteration]
    if bad:
        raise InvalidEvent(f"iteration {p.iteration} cannot use iterations {bad}: only earlier ones")
    if p.subtrace is not None and not v.valid_session_id(p.subtrace.session_id):
        raise InvalidEvent(f"invalid sub-trace {p.subtrace}: not a session id")
    if p.subtrace is not None and p.subtrace.session_id == session_id:
        raise InvalidEvent(f"iteration {p.iteration} names its own session as its sub-trace")
    if p.arguments.startswith(ev.SEALED_PREFIX):
        return  # sealed (provstream.crypto): the emitter checked the JSON before sealing it
    try:
        json.loads(p.arguments)
    except ValueError as exc:
        raise InvalidEvent(f"arguments of iteration {p.iteration} are not JSON: {exc}") from exc


def _check_scope(state: FoldState | None, event: ev.Event) -> FoldState:
    if state is None:
        return FoldState(event.mechanism, event.user, event.collection)
    if (state.mechanism, state.user, state.collection) != (event.mechanism, event.user, event.collection):
        raise InvalidEvent(
            f"session {event.session_id} belongs to {state.mechanism.value} "
            f"user={state.user!r} collection={state.collection!r}; the event says "
            f"{event.mechanism.value} user={event.user!r} collection={event.collection!r}"
        )
    return state


# -- triples ----------------------------------------------------------------

def step_triples(event: ev.Event) -> list[Triple]:
    """The triples of one step: a pure function of the event."""
    p, sid = event.payload, event.session_id
    if isinstance(p, ev.QUESTION_TYPES):
        return _question(event)
    if isinstance(p, ev.AgentIteration):
        return _iteration(sid, p)
    if isinstance(p, ev.AgentConclusion):
        return _conclusion(sid, p)
    if isinstance(p, (ev.GraphRagExploration, ev.DocRagExploration)):
        return _exploration(event.mechanism, sid, p)
    if isinstance(p, ev.GraphRagFocus):
        return _focus(sid, p)
    assert isinstance(p, (ev.GraphRagSynthesis, ev.DocRagSynthesis))
    return _synthesis(event.mechanism, sid, p.content)


# Vocabulary IRIs are built once: terms are immutable, so triples can share them.
_IRIS: dict[str, Iri] = {value: Iri(value) for value in v.vocabulary()}


def _iri(value: str) -> Iri:
    found = _IRIS.get(value)
    return found if found is not None else Iri(value)


def _t(s: Iri, p: str, o: Iri | Literal | QuotedTriple) -> Triple:
    return Triple(s, _iri(p), o)


def _types(s: Iri, *types: str) -> list[Triple]:
    rdf_type = _IRIS[v.RDF_TYPE]
    return [Triple(s, rdf_type, _iri(t)) for t in types]


def _text(s: Iri, p: str, value: str) -> list[Triple]:
    return [_t(s, p, Literal(value))] if value else []


def _question(event: ev.Event) -> list[Triple]:
    q = Iri(v.question_iri(event.mechanism, event.session_id))
    query = event.payload.query  # type: ignore[union-attr]
    out = [
        *_types(q, v.PROV_ACTIVITY, v.TG_QUESTION, event.mechanism.question_type),
        _t(q, v.TG_QUERY, Literal(query)),
        _t(q, v.PROV_STARTED_AT, Literal(v.xsd_datetime(event.event_time), v.XSD_DATETIME)),
    ]
    p = event.payload
    if isinstance(p, ev.AgentQuestion):  # optional, left out when null or empty
        out += [*_text(q, v.TG_CONVERSATION_ID, p.conversation_id or ""),
                *_text(q, v.TG_AGENT_NAME, p.agent_name or "")]
    return out


def _iteration(sid: str, p: ev.AgentIteration) -> list[Triple]:
    a = Iri(v.analysis_iri(sid, p.iteration))
    sources = [v.analysis_iri(sid, u) for u in sorted(set(p.used))] or [_previous(sid, p.iteration)]
    if p.subtrace is not None:
        sources.append(v.subtrace_end_iri(p.subtrace.mechanism, p.subtrace.session_id))
    return [
        *_types(a, v.PROV_ENTITY, v.TG_ANALYSIS),
        *_text(a, v.TG_THOUGHT, p.thought),
        *_text(a, v.TG_ACTION, p.action),
        *(_text(a, v.TG_ARGUMENTS, p.arguments) if p.action else []),
        *_text(a, v.TG_OBSERVATION, p.observation),
        *(_t(a, v.PROV_WAS_DERIVED_FROM, Iri(s)) for s in sources),
    ]


def _previous(sid: str, iteration: int) -> str:
    return v.analysis_iri(sid, iteration - 1) if iteration > 1 else v.question_iri(v.Mechanism.AGENT, sid)


def _conclusion(sid: str, p: ev.AgentConclusion) -> list[Triple]:
    c = Iri(v.conclusion_iri(sid))
    return [
        *_types(c, v.PROV_ENTITY, v.TG_CONCLUSION),
        _t(c, v.TG_ANSWER, Literal(p.answer)),
        _t(c, v.PROV_WAS_DERIVED_FROM, Iri(_previous(sid, p.iterations + 1))),
    ]


def _exploration(m: v.Mechanism, sid: str, p: ev.GraphRagExploration | ev.DocRagExploration) -> list[Triple]:
    e = Iri(v.exploration_iri(m, sid))
    out = [*_types(e, v.PROV_ENTITY, v.TG_EXPLORATION), _t(e, v.PROV_WAS_GENERATED_BY, Iri(v.question_iri(m, sid)))]
    if isinstance(p, ev.GraphRagExploration):
        return [*out, _t(e, v.TG_EDGE_COUNT, Literal(str(p.edge_count), v.XSD_INTEGER))]
    return [
        *out,
        _t(e, v.TG_CHUNK_COUNT, Literal(str(p.chunk_count), v.XSD_INTEGER)),
        *(_t(e, v.TG_SELECTED_CHUNK, Literal(c)) for c in dict.fromkeys(p.chunks)),
    ]


def _focus(sid: str, p: ev.GraphRagFocus) -> list[Triple]:
    f = Iri(v.focus_iri(sid))
    out = [*_types(f, v.PROV_ENTITY, v.TG_FOCUS),
           _t(f, v.PROV_WAS_DERIVED_FROM, Iri(v.exploration_iri(v.Mechanism.GRAPHRAG, sid)))]
    for i, edge in enumerate(p.edges, start=1):
        node = Iri(v.edge_iri(sid, i))
        obj: Iri | Literal = Iri(edge.object) if _IRI_LIKE.match(edge.object) else Literal(edge.object)
        out += [
            _t(f, v.TG_SELECTED_EDGE, node),
            _t(node, v.TG_EDGE, QuotedTriple(Iri(edge.subject), Iri(edge.predicate), obj)),
            *_text(node, v.TG_REASONING, edge.reasoning),
        ]
    return out


def _synthesis(m: v.Mechanism, sid: str, content: str) -> list[Triple]:
    s = Iri(v.synthesis_iri(m, sid))
    source = v.focus_iri(sid) if m is v.Mechanism.GRAPHRAG else v.exploration_iri(m, sid)
    return [*_types(s, v.PROV_ENTITY, v.TG_SYNTHESIS), _t(s, v.TG_CONTENT, Literal(content)),
            _t(s, v.PROV_WAS_DERIVED_FROM, Iri(source))]
