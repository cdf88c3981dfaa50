"""The emitter SDK: agent and RAG code record each step as it happens.

::

    with Emitter(settings) as emitter:
        session = emitter.agent("What is the capital of France?")
        session.iteration(thought="...", action="Search", arguments={"input": "France"}, observation="...")
        session.conclude("Paris")            # -> "urn:trustgraph:agent:{uuid}/final"

Every call builds one :class:`~provstream.events.Event` (fresh event id,
``seq`` 0, 1, 2, ... within the session, event time = now in UTC), checks it
against the contract the fold enforces and hands it to the transport at once,
keyed by the session id. The Avro encoding (single-object) happens on the
transport's sender thread: every field was type-checked at the call, so it
cannot fail there, and a step whose size bound (4 bytes per character) could
exceed the broker's limit is encoded at the call to check its exact size.
A step too large for that limit is not lost silently: a marker step
takes its place (same type, number and links; its texts replaced by one line
saying it was too large, with the original size, see :func:`too_large`), a
warning is logged and :attr:`Emitter.too_large` counts it.
A call that raises
recorded nothing and consumed no sequence or iteration number, so it may be
retried. Errors: :class:`InvalidStep` (bad input, e.g. arguments that are not
JSON-serialisable), :class:`StepTooLarge` (not even the marker fits: a limit of
a few hundred bytes), :class:`EmitTimeout` (buffer full),
:class:`DeliveryFailed` (an earlier step was not delivered).

With ``PROVSTREAM_ENCRYPT=1`` (or a ``keys`` ring) the personal text fields
are sealed at the call under the session's data key (:mod:`provstream.crypto`),
which is stored in the keys topic before the session's first event is sent.

An empty ``session_id`` gives a :class:`NullSession`: same methods, records
nothing, ``uri`` ``""`` (callers without provenance keep working).
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, Union

from provstream.codec.records import encode_event
from provstream.connectors.transport import KafkaTransport, Transport
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.core.fold import MAX_ITERATIONS, validate
from provstream.crypto import KeyRing
from provstream.errors import EmitError, EncodeError, InvalidEvent, InvalidStep, StepTooLarge
from provstream.keys import close_ring, open_ring
from provstream.settings import Settings

_log = logging.getLogger("provstream.emitter")

# Room left under the broker's message limit for the record batch framing
# (batch header 61 bytes, record header <= 32 bytes) and compression overhead.
RECORD_OVERHEAD = 512

EdgeLike = Union[ev.SelectedEdge, Sequence[str]]
_JSON = json.JSONEncoder(ensure_ascii=False, sort_keys=True, allow_nan=False)


class Emitter:
    """Opens sessions and ships their steps through a :class:`Transport` (Kafka by default).

    No I/O happens in the constructor: the default :class:`KafkaTransport` is
    created by :meth:`open` (or the first step) and connects in the background.
    Thread-safe: sessions may live on different threads.
    """

    def __init__(self, settings: Settings, *, transport: Transport | None = None,
                 keys: KeyRing | None = None) -> None:
        self.settings = settings
        self._transport = transport
        self._keys = keys  # PROVSTREAM_ENCRYPT=1: made (with the keys topic) when the first step is sent
        self._keys_ready = keys is not None or not settings.encrypt
        self._limit = settings.max_message_bytes - RECORD_OVERHEAD
        self._lock = threading.Lock()
        self.too_large = 0  # steps recorded as a too-large marker (see too_large())
        self._closed = False

    # -- lifecycle -------------------------------------------------------

    def open(self) -> Emitter:
        self.transport  # noqa: B018 - creates the default transport
        return self

    def __enter__(self) -> Emitter:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def transport(self) -> Transport:
        if self._closed:
            raise EmitError("the emitter is closed")
        if self._transport is None:
            with self._lock:
                if self._transport is None:
                    self._transport = KafkaTransport(self.settings)
        return self._transport

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every step sent so far is acknowledged; :class:`DeliveryFailed` lists failures."""
        if self._transport is not None and not self._closed:
            self._transport.flush(timeout)

    def close(self) -> None:
        """Deliver everything buffered, then release the transport (idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._transport is not None:
            self._transport.close()
        close_ring(self._keys)

    # -- sessions --------------------------------------------------------

    def agent(self, question: str, *, user: str | None = None, collection: str | None = None,
              session_id: str | None = None, conversation_id: str | None = None,
              agent_name: str | None = None) -> AgentSession | NullSession:
        """Open an agent session: record its Question at once and return the session.

        :param question: what the agent was asked (``tg:query``).
        :param user: the session's user (default: the settings').
        :param collection: the session's collection (default: the settings').
        :param session_id: the session id (default: a fresh UUID); ``""`` records nothing (a :class:`NullSession`).
        :param conversation_id: the conversation or thread the session belongs to (``tg:conversationId``
            on the Question); ``None`` or ``""``: none.
        :param agent_name: the name of the agent that answers (``tg:agentName`` on the Question);
            ``None`` or ``""``: none.
        :returns: the :class:`AgentSession` (``uri`` ``urn:trustgraph:agent:{session_id}``).
        :raises InvalidStep: a value of the wrong type or a bad session id (nothing recorded).

        >>> from provstream.connectors.transport import MemoryTransport
        >>> with Emitter(Settings(), transport=MemoryTransport()) as emitter:
        ...     emitter.agent("q", session_id="s1", conversation_id="thread-7", agent_name="researcher").uri
        'urn:trustgraph:agent:s1'
        """
        extra = {"conversation_id": _optional_text("conversation_id", conversation_id),
                 "agent_name": _optional_text("agent_name", agent_name)}
        return self._open(AgentSession, question, user, collection, session_id, extra)

    def docrag(self, question: str, *, user: str | None = None, collection: str | None = None,
               session_id: str | None = None) -> DocRagSession | NullSession:
        return self._open(DocRagSession, question, user, collection, session_id)

    def graphrag(self, question: str, *, user: str | None = None, collection: str | None = None,
                 session_id: str | None = None) -> GraphRagSession | NullSession:
        return self._open(GraphRagSession, question, user, collection, session_id)

    def _open(self, cls: Any, question: str, user: str | None, collection: str | None,
              session_id: str | None, extra: Mapping[str, str | None] | None = None) -> Any:
        if session_id == "":
            return NullSession(cls.mechanism)
        session = cls(self, _text("session_id", session_id or new_uuid()),
                      _text("user", self.settings.user if user is None else user),
                      _text("collection", self.settings.collection if collection is None else collection))
        session._emit(cls.question_type(_text("question", question), **(extra or {})))
        return session

    def _send(self, event: ev.Event) -> None:
        """Check ``event`` and hand it over; it is encoded on the sender thread unless it may be too large."""
        key = event.session_id.encode("utf-8")
        try:
            if type(event.payload) not in _CHECKED_AT_THE_CALL:
                validate(event)
            keys = self._keys if self._keys_ready else self._open_keys()
            if keys is not None:  # sealed after the check: the fold cannot check sealed arguments' JSON
                event = keys.seal(event)
            if len(key) + size_bound(event) <= self._limit:
                self.transport.send(key, partial(encode_event, event))
                return
            value = encode_event(event)
        except (InvalidEvent, EncodeError) as exc:
            raise InvalidStep(f"{_step_name(event)} of session {event.session_id!r} rejected: {exc}") from exc
        if len(key) + len(value) > self._limit:
            value = self._marker(event, key, len(value))
        self.transport.send(key, value)

    def _marker(self, event: ev.Event, key: bytes, size: int) -> bytes:
        """The encoded marker step recorded in place of ``event``, too large at ``size`` bytes (see :func:`too_large`).

        :raises StepTooLarge: even the marker does not fit (a limit of a few hundred bytes).
        """
        marker = replace(event, payload=too_large(event.payload, size, self._limit))
        value = encode_event(marker)
        if len(key) + len(value) > self._limit:
            raise StepTooLarge(
                f"{_step_name(event)} of session {event.session_id!r} is {size} bytes encoded and even its "
                f"too-large marker is {len(value)}; the limit is {self._limit} (max_message_bytes "
                f"{self.settings.max_message_bytes} less {RECORD_OVERHEAD} for framing)")
        with self._lock:
            self.too_large += 1
        _log.warning("%s of session %s is %d bytes encoded, over the limit of %d (PROVSTREAM_MAX_MESSAGE_BYTES); "
                     "recorded as a marker step saying so", _step_name(event), event.session_id, size, self._limit)
        return value


    def _open_keys(self) -> KeyRing | None:
        with self._lock:
            if not self._keys_ready:
                self._keys = open_ring(self.settings, "emitter", create_master=True)
                self._keys_ready = True
        return self._keys


class _Session:
    """One session's identity and sequence; every step goes through :meth:`_emit`."""

    mechanism: v.Mechanism
    question_type: Any

    def __init__(self, emitter: Emitter, session_id: str, user: str, collection: str) -> None:
        self._emitter = emitter
        self.session_id = session_id
        self.user = user
        self.collection = collection
        self.uri = v.question_iri(self.mechanism, session_id)
        self._seq = 0
        self._lock = threading.RLock()

    def _emit(self, payload: ev.Payload) -> None:
        """Send one step; the sequence number advances only if the transport took it."""
        with self._lock:
            self._emitter._send(ev.Event(
                event_id=new_uuid(), session_id=self.session_id, mechanism=self.mechanism,
                seq=self._seq, event_time=datetime.now(UTC), payload=payload,
                user=self.user, collection=self.collection,
            ))
            self._seq += 1

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.uri}>"


class AgentSession(_Session):
    """A ReAct agent session: iterations numbered 1, 2, ... then the conclusion."""

    mechanism = v.Mechanism.AGENT
    question_type = ev.AgentQuestion

    def __init__(self, emitter: Emitter, session_id: str, user: str, collection: str) -> None:
        super().__init__(emitter, session_id, user, collection)
        self._iterations = 0

    @property
    def iterations(self) -> int:
        return self._iterations

    def iteration(self, thought: str = "", action: str = "", arguments: Mapping[str, Any] | None = None,
                  observation: str = "", used: Sequence[int] = (),
                  subtrace: AgentSession | DocRagSession | GraphRagSession | NullSession | None = None) -> str:
        """Record one think/act/observe cycle; return its Analysis IRI.

        :param thought: the reasoning text (left out when empty).
        :param action: the tool's name; a step without one is thought-only (no action, no arguments).
        :param arguments: the tool's arguments, a JSON-serialisable mapping.
        :param observation: what the tool returned.
        :param used: earlier iterations this one used (a DAG); none means the previous one.
        :param subtrace: the session the tool ran as a sub-trace: a GraphRAG/DocRAG
            session (the step derives from its Synthesis) or another agent session
            (from its Conclusion: an agent used as a tool, a handoff).
        :returns: the Analysis IRI, ``urn:trustgraph:agent:{session}/i{n}``.
        :raises InvalidStep: bad input (nothing recorded, no number consumed).

        >>> from provstream.connectors.transport import MemoryTransport
        >>> with Emitter(Settings(), transport=MemoryTransport()) as emitter:
        ...     session = emitter.agent("q", session_id="s1")
        ...     session.iteration(thought="t", action="Search", arguments={"input": "x"}, observation="o")
        'urn:trustgraph:agent:s1/i1'
        """
        with self._lock:
            n = self._iterations + 1
            if n > MAX_ITERATIONS:
                raise InvalidStep(f"session {self.session_id!r} already has {MAX_ITERATIONS} iterations, the most "
                                  "allowed")
            self._emit(ev.AgentIteration(
                iteration=n, thought=_text("thought", thought), action=_text("action", action),
                arguments=arguments_json(arguments), observation=_text("observation", observation),
                used=_used(used, n), subtrace=_subtrace(subtrace, self.session_id),
            ))
            self._iterations = n
        return v.analysis_iri(self.session_id, n)

    def conclude(self, answer: str) -> str:
        """Record the final answer (with the number of iterations so far); return the Conclusion IRI."""
        with self._lock:
            self._emit(ev.AgentConclusion(answer=_text("answer", answer), iterations=self._iterations))
        return v.conclusion_iri(self.session_id)


class DocRagSession(_Session):
    """A Document RAG query: exploration (chunks) then synthesis."""

    mechanism = v.Mechanism.DOCRAG
    question_type = ev.DocRagQuestion

    def explore(self, chunk_count: int, chunks: Sequence[str]) -> str:
        """Record the retrieval: how many chunks, and the ids of those selected."""
        if isinstance(chunks, str):
            raise InvalidStep("chunks must be a sequence of chunk ids, not one string")
        self._emit(ev.DocRagExploration(chunk_count=_count("chunk_count", chunk_count),
                                        chunks=tuple(_text("chunk id", c) for c in chunks)))
        return v.exploration_iri(self.mechanism, self.session_id)

    def synthesize(self, content: str) -> str:
        self._emit(ev.DocRagSynthesis(content=_text("content", content)))
        return v.synthesis_iri(self.mechanism, self.session_id)


class GraphRagSession(_Session):
    """A GraphRAG query: exploration (edge count), focus (edges with reasoning), synthesis."""

    mechanism = v.Mechanism.GRAPHRAG
    question_type = ev.GraphRagQuestion

    def explore(self, edge_count: int) -> str:
        self._emit(ev.GraphRagExploration(edge_count=_count("edge_count", edge_count)))
        return v.exploration_iri(self.mechanism, self.session_id)

    def focus(self, edges: Sequence[EdgeLike]) -> str:
        """Record the selected edges: :class:`SelectedEdge` or ``(s, p, o[, reasoning])`` tuples."""
        self._emit(ev.GraphRagFocus(edges=tuple(_edge(e) for e in edges)))
        return v.focus_iri(self.session_id)

    def synthesize(self, content: str) -> str:
        self._emit(ev.GraphRagSynthesis(content=_text("content", content)))
        return v.synthesis_iri(self.mechanism, self.session_id)


class NullSession:
    """What an empty ``session_id`` gives: every method records nothing and returns ``""``."""

    session_id = ""
    uri = ""
    iterations = 0

    def __init__(self, mechanism: v.Mechanism) -> None:
        self.mechanism = mechanism

    def iteration(self, *args: Any, **kwargs: Any) -> str:
        return ""

    def conclude(self, *args: Any, **kwargs: Any) -> str:
        return ""

    def explore(self, *args: Any, **kwargs: Any) -> str:
        return ""

    def focus(self, *args: Any, **kwargs: Any) -> str:
        return ""

    def synthesize(self, *args: Any, **kwargs: Any) -> str:
        return ""

    def __repr__(self) -> str:
        return f"<NullSession {self.mechanism.value}>"


# Steps whose every contract rule holds by construction: the session's id,
# scope and mechanism were validated with its question, iteration numbers and
# ``used`` are checked here, arguments are JSON we wrote. The fold's full
# check runs on every other step.
_CHECKED_AT_THE_CALL = frozenset({ev.AgentIteration, ev.AgentConclusion})


# -- argument checks (each raises InvalidStep naming the problem) ----------

def arguments_json(arguments: Mapping[str, Any] | None) -> str:
    """Canonical JSON text of tool arguments (sorted keys, Unicode kept)."""
    if arguments is None:
        return "{}"
    if not isinstance(arguments, Mapping):
        raise InvalidStep(f"arguments must be a mapping, got {type(arguments).__name__}")
    try:
        return _JSON.encode(arguments)
    except (TypeError, ValueError) as exc:
        raise InvalidStep(f"arguments are not JSON-serialisable: {exc}") from exc


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidStep(f"{name} must be a string, got {type(value).__name__}")
    return value


def _optional_text(name: str, value: Any) -> str | None:
    """An optional text: ``None`` for ``None`` or ``""`` (nothing recorded), else the string."""
    if value is None or value == "":
        return None
    return _text(name, value)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidStep(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _used(used: Sequence[int], iteration: int) -> tuple[int, ...]:
    if not used:
        return ()
    if isinstance(used, (str, bytes)) or any(isinstance(u, bool) or not isinstance(u, int) for u in used):
        raise InvalidStep(f"used must be a sequence of iteration numbers, got {used!r}")
    bad = [u for u in used if not 1 <= u < iteration]
    if bad:
        raise InvalidStep(f"iteration {iteration} cannot use iterations {bad}: only earlier ones (1..{iteration - 1})")
    return tuple(used)


def _subtrace(sub: AgentSession | DocRagSession | GraphRagSession | NullSession | None,
              session_id: str) -> ev.SubTrace | None:
    if sub is None or isinstance(sub, NullSession):
        return None
    if not isinstance(sub, (AgentSession, DocRagSession, GraphRagSession)):
        raise InvalidStep(f"subtrace must be an agent, DocRAG or GraphRAG session, got {type(sub).__name__}")
    if sub.session_id == session_id:
        raise InvalidStep(f"session {session_id!r} cannot be a sub-trace of itself")
    return ev.SubTrace(sub.mechanism, sub.session_id)


def new_uuid() -> str:
    """A random (version 4) UUID string.

    Drawn from a private generator seeded from ``os.urandom`` (re-seeded in
    forked children) rather than ``uuid.uuid4()``: the ``os.urandom`` system
    call releases the GIL, and taking it back behind a busy sender thread
    costs the calling thread up to a 5 ms switch interval.
    """
    n = _RANDOM.getrandbits(128) & _UUID_CLEAR | _UUID_SET
    h = f"{n:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_RANDOM = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _RANDOM.seed(os.urandom(32)))
_UUID_CLEAR = ~((0xF << 76) | (0x3 << 62))
_UUID_SET = (0x4 << 76) | (0x2 << 62)


def _edge(edge: EdgeLike) -> ev.SelectedEdge:
    if isinstance(edge, ev.SelectedEdge):
        for name in ("subject", "predicate", "object", "reasoning"):
            _text(f"edge {name}", getattr(edge, name))
        return edge
    if isinstance(edge, (str, bytes)) or not isinstance(edge, Sequence) or len(edge) not in (3, 4):
        raise InvalidStep(f"an edge is a SelectedEdge or (subject, predicate, object[, reasoning]), got {edge!r}")
    return ev.SelectedEdge(*(_text("edge term", t) for t in edge))


TOO_LARGE = "[provstream: step too large to record"
"""How a too-large marker's text begins (see :func:`too_large`)."""
TOO_LARGE_IRI = "urn:provstream:step-too-large"


def too_large(payload: ev.Payload, size: int, limit: int) -> ev.Payload:
    """The marker recorded in place of a step whose encoding (``size`` bytes) exceeds ``limit``.

    The step keeps its place and identity (iteration number, ``used``, sub-trace
    link, action name up to 200 characters, counts); its texts are replaced by
    one line that says it was too large and gives the original size: the
    thought of an iteration (arguments ``{}``, observation empty), the answer
    of a conclusion, a question's text, a synthesis's content, the one chunk id
    of a DocRAG exploration, the one edge of a GraphRAG focus (subject and
    predicate :data:`TOO_LARGE_IRI`, the line as object and reasoning).

    :param payload: the step that does not fit.
    :param size: its encoded size in bytes.
    :param limit: the most one step may take (``max_message_bytes`` less the framing).
    :returns: the marker payload, of the same type.

    Example: ``too_large(ev.AgentConclusion("x" * 10**7, 2), 10000123, 999488).answer`` is
    ``"[provstream: step too large to record: 10000123 bytes encoded, over the limit of 999488 bytes
    (PROVSTREAM_MAX_MESSAGE_BYTES); its texts were dropped]"``.
    """
    line = (f"{TOO_LARGE}: {size} bytes encoded, over the limit of {limit} bytes (PROVSTREAM_MAX_MESSAGE_BYTES); "
            "its texts were dropped]")
    if isinstance(payload, ev.AgentIteration):
        return replace(payload, thought=line, action=payload.action[:200], arguments="{}", observation="")
    if isinstance(payload, ev.AgentConclusion):
        return replace(payload, answer=line)
    if isinstance(payload, ev.AgentQuestion | ev.DocRagQuestion | ev.GraphRagQuestion):
        return replace(payload, query=line)
    if isinstance(payload, ev.DocRagSynthesis | ev.GraphRagSynthesis):
        return replace(payload, content=line)
    if isinstance(payload, ev.DocRagExploration):
        return replace(payload, chunks=(line,))
    if isinstance(payload, ev.GraphRagFocus):
        return replace(payload, edges=(ev.SelectedEdge(TOO_LARGE_IRI, TOO_LARGE_IRI, line, line),))
    return payload


def size_bound(event: ev.Event) -> int:
    """An upper bound of the encoded size: 4 UTF-8 bytes per character, 10 per length or number.

    Cheap (no encoding); a step under the limit by this bound is encoded on
    the sender thread, one over it is encoded at the call to check exactly.
    """
    envelope = len(event.event_id) + len(event.session_id) + len(event.user) + len(event.collection)
    return 128 + 4 * envelope + _PAYLOAD_BOUND[type(event.payload)](event.payload)


def _edges_bound(p: ev.GraphRagFocus) -> int:
    return 10 + sum(40 + 4 * (len(e.subject) + len(e.predicate) + len(e.object) + len(e.reasoning))
                    for e in p.edges)


def _iteration_bound(p: ev.AgentIteration) -> int:
    texts = len(p.thought) + len(p.action) + len(p.arguments) + len(p.observation)
    sub = 0 if p.subtrace is None else 30 + 4 * len(p.subtrace.session_id)
    return 80 + 4 * texts + 10 * len(p.used) + sub


_PAYLOAD_BOUND: dict[type, Any] = {
    ev.AgentQuestion: lambda p: 30 + 4 * (len(p.query) + len(p.conversation_id or "") + len(p.agent_name or "")),
    ev.GraphRagQuestion: lambda p: 10 + 4 * len(p.query),
    ev.DocRagQuestion: lambda p: 10 + 4 * len(p.query),
    ev.AgentIteration: _iteration_bound,
    ev.AgentConclusion: lambda p: 30 + 4 * len(p.answer),
    ev.GraphRagExploration: lambda p: 20,
    ev.GraphRagFocus: _edges_bound,
    ev.GraphRagSynthesis: lambda p: 10 + 4 * len(p.content),
    ev.DocRagExploration: lambda p: 20 + sum(10 + 4 * len(c) for c in p.chunks),
    ev.DocRagSynthesis: lambda p: 10 + 4 * len(p.content),
}
assert set(_PAYLOAD_BOUND) == set(ev.MECHANISM_OF), "a size bound for every payload type"


def _step_name(event: ev.Event) -> str:
    p = event.payload
    if isinstance(p, ev.AgentIteration):
        return f"iteration {p.iteration}"
    return type(p).__name__
