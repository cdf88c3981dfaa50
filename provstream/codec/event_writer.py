"""The direct ``Event`` writer: byte for byte what fastavro writes, faster.

The emitter encodes every step, so this is on the producer's hot path. It is
written for one canonical form of ``provstream.Event``
(:data:`DIRECT_EVENT_FINGERPRINT`); a schema change turns it off until it is
updated, and ``tests/unit/test_wire_events.py`` checks it against fastavro
byte for byte. It raises ``TypeError`` / ``AttributeError`` /
``UnicodeEncodeError`` ... for any value it does not take; the caller then
goes through fastavro, which encodes it or raises :class:`EncodeError`.

``_events_c.c`` reads the same form (its ``FINGERPRINT`` is
:data:`DIRECT_EVENT_FINGERPRINT`); ``records.decode_event`` uses it for
messages with :data:`HEADER`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from provstream.codec import avro as codec
from provstream.codec.binary import int_, ints, long, string, strings, zigzag
from provstream.core import events as ev
from provstream.core.vocab import Mechanism

DIRECT_EVENT_FINGERPRINT = "0cb27ee565374378"
HEADER = codec.MAGIC + codec.current_fingerprint(codec.EVENT)
ENABLED = codec.current_fingerprint(codec.EVENT).hex() == DIRECT_EVENT_FINGERPRINT

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_MECHANISM = {m.value: zigzag(i) for i, m in enumerate(Mechanism)}


def epoch_micros(moment: datetime) -> int:
    """Avro ``timestamp-micros`` of an aware datetime (fastavro's own conversion is 3x slower)."""
    return (moment - _EPOCH) // _MICROSECOND


def _iteration(p: ev.AgentIteration) -> bytes:
    sub = p.subtrace
    tail = b"\x00" if sub is None else b"\x02" + _MECHANISM[sub.mechanism.value] + string(sub.session_id)
    return (int_(p.iteration) + string(p.thought) + string(p.action) + string(p.arguments)
            + string(p.observation) + ints(p.used) + tail)


def _optional(value: str | None) -> bytes:
    """An Avro ``["null", "string"]`` union value."""
    return b"\x00" if value is None else b"\x02" + string(value)


def _agent_question(p: ev.AgentQuestion) -> bytes:
    return string(p.query) + _optional(p.conversation_id) + _optional(p.agent_name)


def _edge(e: ev.SelectedEdge) -> bytes:
    return string(e.subject) + string(e.predicate) + string(e.object) + string(e.reasoning)


def _focus(p: ev.GraphRagFocus) -> bytes:
    edges = p.edges
    if not edges:
        return b"\x00"
    return long(len(edges)) + b"".join(map(_edge, edges)) + b"\x00"


# The payload union's branches, in the schema's order: (branch index, body writer).
_PAYLOADS: dict[type, tuple[bytes, Callable[[Any], bytes]]] = {
    ev.AgentQuestion: (b"\x00", _agent_question),
    ev.AgentIteration: (b"\x02", _iteration),
    ev.AgentConclusion: (b"\x04", lambda p: string(p.answer) + int_(p.iterations)),
    ev.GraphRagQuestion: (b"\x06", lambda p: string(p.query)),
    ev.GraphRagExploration: (b"\x08", lambda p: long(p.edge_count)),
    ev.GraphRagFocus: (b"\x0a", _focus),
    ev.GraphRagSynthesis: (b"\x0c", lambda p: string(p.content)),
    ev.DocRagQuestion: (b"\x0e", lambda p: string(p.query)),
    ev.DocRagExploration: (b"\x10", lambda p: long(p.chunk_count) + strings(p.chunks)),
    ev.DocRagSynthesis: (b"\x12", lambda p: string(p.content)),
}


def event_body(event: ev.Event) -> bytes:
    """The Avro body of ``event`` (no single-object header)."""
    payload = event.payload
    branch, write = _PAYLOADS[type(payload)]
    return b"".join((
        string(event.event_id), string(event.session_id), _MECHANISM[event.mechanism.value], long(event.seq),
        long(epoch_micros(event.event_time)), string(event.user), string(event.collection),
        branch, write(payload),
    ))
