"""The direct ``StepTriples`` reader: what fastavro + ``triples_from_avro`` return, faster.

The sink decodes every triples message, so this is on its hot path. It reads
the body written for one canonical form of ``provstream.StepTriples`` (the
same one ``wire``'s direct writer is written for) straight into the immutable
values, without fastavro's intermediate dicts. It raises (``ValueError``,
``IndexError``, ``UnicodeDecodeError`` ...) on anything it does not take: a
negative or oversized length, an array in blocks with byte sizes, an enum or
union index out of range, a boolean other than 0/1, trailing bytes. The
caller then decodes through fastavro, which returns the same value or raises
the project's :class:`DecodeError` naming the problem.
``tests/unit/test_triples_reader.py`` checks both paths agree.

``_triples_c.c`` is the same reader in C (same values, same refusals, the
same interned IRIs from ``_IRIS``); ``records`` uses it when it was built.
"""

from __future__ import annotations

from provstream.codec.binary import INT_MAX, INT_MIN, LONG_MAX
from provstream.core import vocab
from provstream.core.triples import Iri, Literal, QuotedTriple, SessionState, SessionStatus, StepTriples, Term, Triple
from provstream.core.vocab import Mechanism

_MECHANISMS = tuple(Mechanism)
_STATES = tuple(SessionState)
_TERM_KINDS = 3  # provstream.TermKind: IRI, LITERAL, TRIPLE
# The vocabulary's IRIs (predicates, types, datatypes), read once: encoded bytes -> Iri.
_IRIS: dict[bytes, Iri] = {s.encode(): Iri(s) for s in vocab.vocabulary()}


def _long(buf: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint at ``pos``: (value, next position)."""
    b = buf[pos]
    pos += 1
    n = b & 0x7F
    shift = 7
    while b & 0x80:
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
    if n > 2 * LONG_MAX + 1:
        raise ValueError("varint out of the long range")
    return (n >> 1) ^ -(n & 1), pos


def _span(buf: bytes, pos: int) -> tuple[int, int]:
    """A string's (start, end) after its length at ``pos``."""
    n = buf[pos]
    if n < 0x80:
        if n & 1:
            raise ValueError("negative length")
        end = pos + 1 + (n >> 1)
        start = pos + 1
    else:
        length, start = _long(buf, pos)
        if length < 0:
            raise ValueError("negative length")
        end = start + length
    if end > len(buf):
        raise ValueError("string runs past the end")
    return start, end


def _int(buf: bytes, pos: int) -> tuple[int, int]:
    n, pos = _long(buf, pos)
    if not INT_MIN <= n <= INT_MAX:
        raise ValueError("int out of range")
    return n, pos


def _str(buf: bytes, pos: int) -> tuple[str, int]:
    start, end = _span(buf, pos)
    return buf[start:end].decode(), end


def _iri(buf: bytes, pos: int) -> tuple[Iri, int]:
    start, end = _span(buf, pos)
    raw = buf[start:end]
    iri = _IRIS.get(raw)
    return (iri if iri is not None else Iri(raw.decode())), end


def _optional(buf: bytes, pos: int) -> tuple[str | None, int]:
    branch = buf[pos]
    if branch == 0:
        return None, pos + 1
    if branch != 2:
        raise ValueError("union index out of range")
    return _str(buf, pos + 1)


def _enum(buf: bytes, pos: int, symbols: int) -> tuple[int, int]:
    index, pos = _long(buf, pos)
    if not 0 <= index < symbols:
        raise IndexError("enum index out of range")
    return index, pos


def _term(buf: bytes, pos: int) -> tuple[Term, int]:
    kind, pos = _enum(buf, pos, _TERM_KINDS)
    if kind == 0:
        value: Term
        value, pos = _iri(buf, pos)
    else:
        text, pos = _str(buf, pos)
    datatype, pos = _optional(buf, pos)
    language, pos = _optional(buf, pos)
    branch = buf[pos]
    pos += 1
    if branch == 2:
        quoted, pos = _quoted(buf, pos)
    elif branch != 0:
        raise ValueError("union index out of range")
    else:
        quoted = None
    if kind == 0:
        return value, pos
    if kind == 1:
        return Literal(text, datatype, language), pos
    if quoted is None:
        raise ValueError("TRIPLE term without a triple")  # fastavro's path names it as a DecodeError
    return quoted, pos


def _quoted(buf: bytes, pos: int) -> tuple[QuotedTriple, int]:
    s, pos = _iri(buf, pos)
    p, pos = _iri(buf, pos)
    o_kind, pos = _enum(buf, pos, _TERM_KINDS)
    o, pos = _str(buf, pos)
    datatype, pos = _optional(buf, pos)
    language, pos = _optional(buf, pos)
    return QuotedTriple(s, p, Iri(o) if o_kind == 0 else Literal(o, datatype, language)), pos


def _count(buf: bytes, pos: int) -> tuple[int, int]:
    """An array block's item count; blocks with a byte size (negative count) are left to fastavro."""
    n = buf[pos]
    if n < 0x80 and not n & 1:
        return n >> 1, pos + 1
    count, pos = _long(buf, pos)
    if count < 0:
        raise ValueError("array block with a byte size")
    return count, pos


def _triples(buf: bytes, pos: int) -> tuple[tuple[Triple, ...], int]:
    out: list[Triple] = []
    count, pos = _count(buf, pos)
    while count:
        for _ in range(count):
            s, pos = _iri(buf, pos)
            p, pos = _iri(buf, pos)
            o, pos = _term(buf, pos)
            out.append(Triple(s, p, o))
        count, pos = _count(buf, pos)
    return tuple(out), pos


def _status(buf: bytes, pos: int) -> tuple[SessionStatus, int]:
    state, pos = _enum(buf, pos, len(_STATES))
    steps, pos = _int(buf, pos)
    branch = buf[pos]
    pos += 1
    expected: int | None = None
    if branch == 2:
        expected, pos = _int(buf, pos)
    elif branch != 0:
        raise ValueError("union index out of range")
    late, pos = _int(buf, pos)
    missing: list[int] = []
    count, pos = _count(buf, pos)
    while count:
        for _ in range(count):
            item, pos = _int(buf, pos)
            missing.append(item)
        count, pos = _count(buf, pos)
    return SessionStatus(_STATES[state], steps, expected, late, tuple(missing)), pos


def read_step_triples(buf: bytes, pos: int) -> StepTriples:
    """The ``StepTriples`` whose Avro body starts at ``pos`` and ends at the end of ``buf``."""
    event_id, pos = _str(buf, pos)
    session_id, pos = _str(buf, pos)
    mechanism, pos = _enum(buf, pos, len(_MECHANISMS))
    seq, pos = _long(buf, pos)
    user, pos = _str(buf, pos)
    collection, pos = _str(buf, pos)
    question, pos = _str(buf, pos)
    graph, pos = _str(buf, pos)
    triples, pos = _triples(buf, pos)
    status, pos = _status(buf, pos)
    duplicate = buf[pos]
    if duplicate > 1:
        raise ValueError("not a boolean")
    if pos + 1 != len(buf):
        raise ValueError("trailing bytes")
    return StepTriples(event_id, session_id, _MECHANISMS[mechanism], seq, user, collection, question, triples,
                       status, duplicate == 1, graph)
