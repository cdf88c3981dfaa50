"""The wire format: Avro single-object encoding of events and triples messages.

Four functions are all an adapter needs; they raise :class:`~provstream.errors.EncodeError`
and :class:`~provstream.errors.DecodeError` only:

* :func:`encode_event` / :func:`decode_event` — a step :class:`~provstream.core.events.Event`;
* :func:`encode_triples` / :func:`decode_triples` — a :class:`~provstream.core.triples.StepTriples`.

Every message is ``C3 01`` + the 8-byte CRC-64-AVRO fingerprint of its writer
schema + the Avro body; writer schemas are found by fingerprint among
``schemas/`` and ``schemas/history/`` (:mod:`.avro`), so older messages still
decode. The hot messages have direct writers/readers (:mod:`.event_writer`,
:mod:`.records`, :mod:`.triples_reader`), chosen once at import when the
current schema is the one they were written for, with fastavro beside them;
the triples reader also exists in C (``_triples_c``, an optional extension
built from ``_triples_c.c``), and events of the current form are read by a C
reader (``_events_c``, from ``_events_c.c``) with fastavro behind it; each is
used when it was built unless ``PROVSTREAM_NO_C_EXTENSIONS=1``.

Example::

    >>> from datetime import UTC, datetime
    >>> from provstream.core import events as ev
    >>> from provstream.core.vocab import Mechanism
    >>> e = ev.Event("e0", "s1", Mechanism.AGENT, 0, datetime(2025, 1, 1, tzinfo=UTC),
    ...              ev.AgentQuestion("Why?"), "trustgraph", "default")
    >>> data = encode_event(e)
    >>> data[:2], decode_event(data) == e
    (b'\\xc3\\x01', True)
"""

from provstream.codec.records import decode_event, decode_triples, encode_event, encode_triples

__all__ = ["decode_event", "decode_triples", "encode_event", "encode_triples"]
