"""Translation between the immutable values and their Avro records.

``encode_event``/``decode_event`` and ``encode_triples``/``decode_triples``
are the only functions the adapters need; they raise :class:`EncodeError` /
:class:`DecodeError` only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC
from typing import Any

from provstream.codec import avro as codec
from provstream.codec import event_writer, triples_reader
from provstream.codec.binary import int_ as _int
from provstream.codec.binary import long as _long
from provstream.codec.binary import string as _string
from provstream.codec.binary import zigzag as _zigzag
from provstream.core import events as ev
from provstream.core import vocab
from provstream.core.triples import Iri, Literal, QuotedTriple, SessionState, SessionStatus, StepTriples, Term, Triple
from provstream.core.vocab import Mechanism
from provstream.errors import DecodeError, EncodeError
from provstream.native import c_extensions_off

_PAYLOAD_TYPES: dict[str, type] = {f"provstream.{t.__name__}": t for t in ev.MECHANISM_OF}
_PAYLOAD_NAMES: dict[type, str] = {t: n for n, t in _PAYLOAD_TYPES.items()}


# -- events -----------------------------------------------------------------

_FIELD_NAMES: dict[type, tuple[str, ...]] = {t: tuple(f.name for f in dataclasses.fields(t)) for t in ev.MECHANISM_OF}


def _payload_to_avro(payload: ev.Payload) -> tuple[str, dict[str, Any]]:
    """The payload's Avro record; built field by field (``dataclasses.asdict`` deep-copies, slowly)."""
    cls = type(payload)
    name = _PAYLOAD_NAMES.get(cls)
    if name is None:
        raise EncodeError(f"not a step payload: {cls.__name__}")
    record = {f: getattr(payload, f) for f in _FIELD_NAMES[cls]}
    try:
        if cls is ev.AgentIteration:
            record["used"] = list(payload.used)  # type: ignore[union-attr]
            sub = payload.subtrace  # type: ignore[union-attr]
            record["subtrace"] = None if sub is None else {"mechanism": sub.mechanism.value,
                                                           "session_id": sub.session_id}
        elif cls is ev.GraphRagFocus:
            record["edges"] = [{"subject": e.subject, "predicate": e.predicate, "object": e.object,
                                "reasoning": e.reasoning} for e in payload.edges]  # type: ignore[union-attr]
        elif cls is ev.DocRagExploration:
            record["chunks"] = list(payload.chunks)  # type: ignore[union-attr]
    except (AttributeError, TypeError) as exc:
        raise EncodeError(f"cannot encode {cls.__name__}: {exc}") from exc
    return name, record


def event_to_avro(event: ev.Event) -> dict[str, Any]:
    """The Avro record (a dict fastavro writes) of ``event``."""
    if event.event_time.tzinfo is None:
        raise EncodeError("event_time must be timezone-aware")
    return {
        "event_id": event.event_id,
        "session_id": event.session_id,
        "mechanism": event.mechanism.value,
        "seq": event.seq,
        "event_time": event_writer.epoch_micros(event.event_time),
        "user": event.user,
        "collection": event.collection,
        "payload": _payload_to_avro(event.payload),
    }


def _payload_from_avro(value: Any) -> ev.Payload:
    name, record = value
    cls = _PAYLOAD_TYPES[name]
    fields = dict(record)
    if cls is ev.AgentIteration:
        fields["used"] = tuple(fields["used"])
        sub = fields["subtrace"]
        fields["subtrace"] = None if sub is None else ev.SubTrace(Mechanism(sub["mechanism"]), sub["session_id"])
    elif cls is ev.GraphRagFocus:
        fields["edges"] = tuple(ev.SelectedEdge(**e) for e in fields["edges"])
    elif cls is ev.DocRagExploration:
        fields["chunks"] = tuple(fields["chunks"])
    return cls(**fields)  # type: ignore[no-any-return]


def event_from_avro(record: dict[str, Any]) -> ev.Event:
    """The :class:`Event` of an Avro record read by fastavro (the inverse of :func:`event_to_avro`)."""
    return ev.Event(
        event_id=record["event_id"],
        session_id=record["session_id"],
        mechanism=Mechanism(record["mechanism"]),
        seq=record["seq"],
        event_time=record["event_time"].astimezone(UTC),
        user=record["user"],
        collection=record["collection"],
        payload=_payload_from_avro(record["payload"]),
    )


def _encode_event_fastavro(event: ev.Event) -> bytes:
    return codec.encode(codec.EVENT, _to_record(event_to_avro, event))


def _encode_event_direct(event: ev.Event) -> bytes:
    try:
        return event_writer.HEADER + event_writer.event_body(event)
    except Exception:  # noqa: BLE001 - the general path decides (encodes or raises EncodeError)
        return _encode_event_fastavro(event)


def _decode_event_fastavro(data: bytes) -> ev.Event:
    return _guarded(event_from_avro, codec.decode(codec.EVENT, data))


def _choose_event_reader() -> Callable[[bytes, int], ev.Event] | None:
    """The direct reader ``decode_event`` uses for the current schema form, or None: fastavro only.

    ``provstream.codec._events_c`` (``provstream/codec/_events_c.c``, built by
    ``pip install`` when a C compiler is there) returns what the fastavro path
    returns for a body written with the form of
    :data:`event_writer.DIRECT_EVENT_FINGERPRINT` and raises on anything it does
    not take. It is not used with ``PROVSTREAM_NO_C_EXTENSIONS=1`` in the
    environment, when it was not built, or when it reads another form than the
    current schema's (until it is updated too).

    Returns:
        a function ``(message, body start) -> Event`` raising on what it does not take, or None.

    Example::

        >>> from datetime import UTC, datetime
        >>> e = ev.Event("e1", "s1", Mechanism.DOCRAG, 1, datetime(2025, 1, 1, tzinfo=UTC),
        ...              ev.DocRagExploration(9, ("c1", "c2")), "u", "c")
        >>> read = _choose_event_reader()
        >>> read is None or read(encode_event(e), codec.HEADER_LEN) == e
        True
    """
    if c_extensions_off() or not event_writer.ENABLED:
        return None
    try:
        from provstream.codec import _events_c
    except ImportError:
        return None
    if _events_c.FINGERPRINT != event_writer.DIRECT_EVENT_FINGERPRINT:
        return None
    return _events_c.read_event


_read_event = _choose_event_reader()


def _decode_event_direct(data: bytes) -> ev.Event:
    if type(data) is bytes and _read_event is not None and data.startswith(event_writer.HEADER):
        try:
            return _read_event(data, codec.HEADER_LEN)
        except Exception:  # noqa: BLE001 - fastavro decides (decodes or raises DecodeError)
            pass
    return _decode_event_fastavro(data)


# -- triples ----------------------------------------------------------------

def _term_to_avro(term: Term) -> dict[str, Any]:
    if isinstance(term, Iri):
        return {"kind": "IRI", "value": term.value}
    if isinstance(term, Literal):
        return {"kind": "LITERAL", "value": term.value, "datatype": term.datatype, "language": term.language}
    o = term.o
    quoted: dict[str, Any] = {"s": term.s.value, "p": term.p.value, "o": o.value,
              "o_kind": "IRI" if isinstance(o, Iri) else "LITERAL"}
    if isinstance(o, Literal):
        quoted.update(o_datatype=o.datatype, o_language=o.language)
    return {"kind": "TRIPLE", "triple": quoted}


def _term_from_avro(record: dict[str, Any]) -> Term:
    kind = record["kind"]
    if kind == "IRI":
        return Iri(record["value"])
    if kind == "LITERAL":
        return Literal(record["value"], record["datatype"], record["language"])
    q = record["triple"]
    if q is None:
        raise DecodeError("TRIPLE term without a triple")
    o: Iri | Literal = Iri(q["o"]) if q["o_kind"] == "IRI" else Literal(q["o"], q["o_datatype"], q["o_language"])
    return QuotedTriple(Iri(q["s"]), Iri(q["p"]), o)


def triples_to_avro(msg: StepTriples) -> dict[str, Any]:
    """The Avro record (a dict fastavro writes) of a triples message."""
    status = msg.status
    return {
        "event_id": msg.event_id, "session_id": msg.session_id, "mechanism": msg.mechanism.value,
        "seq": msg.seq, "user": msg.user, "collection": msg.collection, "question": msg.question,
        "graph": msg.graph, "duplicate": msg.duplicate,
        "triples": [{"s": t.s.value, "p": t.p.value, "o": _term_to_avro(t.o)} for t in msg.triples],
        "status": {"state": status.state.value, "steps": status.steps, "expected": status.expected,
                   "late": status.late, "missing": list(status.missing)},
    }


def triples_from_avro(record: dict[str, Any]) -> StepTriples:
    """The :class:`StepTriples` of an Avro record read by fastavro."""
    st = record["status"]
    return StepTriples(
        event_id=record["event_id"], session_id=record["session_id"],
        mechanism=Mechanism(record["mechanism"]), seq=record["seq"], user=record["user"],
        collection=record["collection"], question=record["question"], graph=record["graph"],
        duplicate=record["duplicate"],
        triples=tuple(Triple(Iri(t["s"]), Iri(t["p"]), _term_from_avro(t["o"])) for t in record["triples"]),
        status=SessionStatus(SessionState(st["state"]), st["steps"], st["expected"], st["late"],
                             tuple(st["missing"])),
    )


def _encode_triples_fastavro(msg: StepTriples) -> bytes:
    return codec.encode(codec.STEP_TRIPLES, _to_record(triples_to_avro, msg))


def _encode_triples_direct(msg: StepTriples) -> bytes:
    try:
        return _write_step_triples(msg, _TRIPLES_HEADER)
    except Exception:  # noqa: BLE001 - the general path decides (encodes or raises EncodeError)
        return _encode_triples_fastavro(msg)


# -- direct StepTriples writer ----------------------------------------------
# Avro binary encoding with provstream.codec.binary. Written for this canonical
# form of provstream.StepTriples; a schema change disables it (the fingerprint
# differs) until it is updated, and tests/unit/test_wire_triples.py checks it
# against fastavro byte for byte.
DIRECT_TRIPLES_FINGERPRINT = "537f9d68b2e5e159"
_TRIPLES_HEADER = codec.MAGIC + codec.current_fingerprint(codec.STEP_TRIPLES)
_DIRECT_TRIPLES = codec.current_fingerprint(codec.STEP_TRIPLES).hex() == DIRECT_TRIPLES_FINGERPRINT
_MECHANISM = {m.value: _zigzag(i) for i, m in enumerate(Mechanism)}
_STATE = {st.value: _zigzag(i) for i, st in enumerate(SessionState)}


_STRINGS: dict[str, bytes] = {}  # encoded constants: vocabulary IRIs, datatypes


def _cached(value: str) -> bytes:
    found = _STRINGS.get(value)
    return found if found is not None else _string(value)


def _optional(value: str | None) -> bytes:
    """A ``["null", "string"]`` union."""
    return b"\x00" if value is None else b"\x02" + _cached(value)


def _term(o: Term) -> bytes:
    """A ``provstream.Term`` record: kind, value, datatype, language, triple."""
    t = type(o)
    if t is Iri:
        return b"\x00" + _cached(o.value) + b"\x00\x00\x00"  # type: ignore[union-attr]
    if t is Literal:
        return b"\x02" + _string(o.value) + _optional(o.datatype) + _optional(o.language) + b"\x00"  # type: ignore[union-attr]
    if t is not QuotedTriple:
        raise TypeError(f"not a term: {o!r}")
    q, qo = o, o.o  # type: ignore[union-attr]
    head = b"\x04\x00\x00\x00\x02" + _cached(q.s.value) + _cached(q.p.value)  # type: ignore[union-attr]
    if type(qo) is Iri:
        return head + b"\x00" + _string(qo.value) + b"\x00\x00"
    if type(qo) is not Literal:
        raise TypeError(f"not a quoted object: {qo!r}")
    return head + b"\x02" + _string(qo.value) + _optional(qo.datatype) + _optional(qo.language)


def _step_triples_body(msg: StepTriples) -> bytes:
    st = msg.status
    triples = msg.triples
    parts = [
        _string(msg.event_id), _string(msg.session_id), _MECHANISM[msg.mechanism.value], _long(msg.seq),
        _string(msg.user), _string(msg.collection), _string(msg.question), _cached(msg.graph),
    ]
    if triples:
        parts.append(_long(len(triples)))
        for t in triples:
            parts += (_cached(t.s.value), _cached(t.p.value), _term(t.o))
    parts.append(b"\x00")
    parts += (_STATE[st.state.value], _int(st.steps),
              b"\x00" if st.expected is None else b"\x02" + _int(st.expected), _int(st.late))
    missing = st.missing
    if missing:
        parts.append(_long(len(missing)))
        parts += [_int(i) for i in missing]
    parts.append(b"\x00")
    if type(msg.duplicate) is not bool:
        raise TypeError(f"not a boolean: {msg.duplicate!r}")
    parts.append(b"\x01" if msg.duplicate else b"\x00")
    return b"".join(parts)



_STRINGS.update((s, _string(s)) for s in vocab.vocabulary())


def _write_step_triples_py(msg: StepTriples, prefix: bytes) -> bytes:
    return prefix + _step_triples_body(msg)


def _choose_triples_writer() -> Callable[[StepTriples, bytes], bytes]:
    """The direct writer ``encode_triples`` uses: the C one when built, else the Python one.

    ``provstream.codec._triples_c.write_step_triples`` writes what
    :func:`_step_triples_body` writes, for the exact classes of
    :mod:`provstream.core.triples` (it raises on anything else, and
    ``encode_triples`` then asks fastavro, which writes the same bytes or
    refuses). It is not used with ``PROVSTREAM_NO_C_EXTENSIONS=1``, when it was
    not built, when it writes another form of the schema than
    :data:`DIRECT_TRIPLES_FINGERPRINT`, or when it does not write a sample
    message as the Python writer does.

    Returns:
        a function ``(message, prefix) -> prefix + body`` raising on what it does not take.

    Example::

        >>> step = StepTriples("e1", "s1", Mechanism.AGENT, 0, "u", "c", "urn:q",
        ...                    (Triple(Iri("urn:a"), Iri("urn:b"), Literal("c")),), SessionStatus(SessionState.OPEN, 1))
        >>> _choose_triples_writer()(step, b"") == _step_triples_body(step)
        True
    """
    if c_extensions_off():
        return _write_step_triples_py
    try:
        from provstream.codec import _triples_c
    except ImportError:
        return _write_step_triples_py
    sample = StepTriples("e", "s", Mechanism.GRAPHRAG, 1, "u", "c", "urn:q", (
        Triple(Iri("urn:a"), Iri(vocab.TG_EDGE), QuotedTriple(Iri("urn:s"), Iri("urn:p"), Literal("o", None, "en"))),
        Triple(Iri("urn:a"), Iri("urn:p"), Literal("1", vocab.XSD_INTEGER))),
        SessionStatus(SessionState.CONCLUDED, 2, 3, 0, (2,)))
    try:
        same = _triples_c.write_step_triples(sample, b"") == _step_triples_body(sample)
    except Exception:  # noqa: BLE001 - a C writer that cannot write the sample is not used
        same = False
    if _triples_c.FINGERPRINT != DIRECT_TRIPLES_FINGERPRINT or not same:
        return _write_step_triples_py
    return _triples_c.write_step_triples


_write_step_triples = _choose_triples_writer()


def _decode_triples_fastavro(data: bytes) -> StepTriples:
    return _guarded(triples_from_avro, codec.decode(codec.STEP_TRIPLES, data))


def _choose_triples_reader() -> Callable[[bytes, int], StepTriples]:
    """The direct reader ``decode_triples`` uses: the C one when built, else the Python one.

    ``provstream.codec._triples_c`` (``provstream/codec/_triples_c.c``, built by
    ``pip install`` when a C compiler is there) returns what
    :func:`triples_reader.read_step_triples` returns and refuses what it refuses;
    ``PROVSTREAM_NO_C_EXTENSIONS=1`` in the environment keeps the Python reader,
    and so does a C reader written for another form of the schema than
    :data:`DIRECT_TRIPLES_FINGERPRINT` (until it is updated too).

    Returns:
        a function ``(message, body start) -> StepTriples`` raising on what it does not take.

    Example::

        >>> step = StepTriples("e1", "s1", Mechanism.AGENT, 0, "u", "c", "urn:q",
        ...                    (Triple(Iri("urn:a"), Iri("urn:b"), Iri("urn:c")),), SessionStatus(SessionState.OPEN, 1))
        >>> _choose_triples_reader()(encode_triples(step), codec.HEADER_LEN) == step
        True
    """
    if c_extensions_off():
        return triples_reader.read_step_triples
    try:
        from provstream.codec import _triples_c
    except ImportError:
        return triples_reader.read_step_triples
    if _triples_c.FINGERPRINT != DIRECT_TRIPLES_FINGERPRINT:
        return triples_reader.read_step_triples
    return _triples_c.read_step_triples


_read_step_triples = _choose_triples_reader()


def _decode_triples_direct(data: bytes) -> StepTriples:
    if type(data) is bytes and data.startswith(_TRIPLES_HEADER):
        try:
            return _read_step_triples(data, codec.HEADER_LEN)
        except Exception:  # noqa: BLE001 - fastavro decides (decodes or raises DecodeError)
            pass
    return _decode_triples_fastavro(data)


def _to_record(convert: Callable[[Any], dict[str, Any]], value: Any) -> dict[str, Any]:
    """Values of the wrong shape (a str where an enum belongs, ...) become :class:`EncodeError`."""
    try:
        return convert(value)
    except EncodeError:
        raise
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise EncodeError(f"cannot encode {type(value).__name__}: {type(exc).__name__}: {exc}") from exc


def _guarded(convert: Callable[[dict[str, Any]], Any], record: dict[str, Any]) -> Any:
    try:
        return convert(record)
    except DecodeError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise DecodeError(f"record does not fit the model: {exc}") from exc


# -- the public functions: the fast path chosen once, at import ----------------
# The direct writers/reader are written for one canonical form of their schema
# each; when the current schema's fingerprint differs they are not chosen and
# fastavro does the work (correct, slower) until they are updated. Values a
# direct path does not take fall back to fastavro, which encodes them or raises.

encode_event: Callable[[ev.Event], bytes] = _encode_event_direct if event_writer.ENABLED else _encode_event_fastavro
"""The single-object ``Event`` message (:class:`EncodeError` on a value of the wrong shape)."""

encode_triples: Callable[[StepTriples], bytes] = (
    _encode_triples_direct if _DIRECT_TRIPLES else _encode_triples_fastavro)
"""The single-object ``StepTriples`` message: byte for byte what fastavro writes."""

decode_event: Callable[[bytes], ev.Event] = _decode_event_direct if _read_event is not None else _decode_event_fastavro
"""The :class:`Event` of a single-object message (:class:`DecodeError` on anything else).

Takes a message of the events topic written with any known version of the
schema and returns the event, with the current schema's defaults for fields an
older writer lacked. Messages of the current form are read by the C reader
when it is there (:func:`_choose_event_reader`); any other message, and any
the C reader does not take, go through fastavro.
"""

decode_triples: Callable[[bytes], StepTriples] = (
    _decode_triples_direct if _DIRECT_TRIPLES else _decode_triples_fastavro)
"""A ``StepTriples`` message (:class:`DecodeError` on anything that is not one)."""
