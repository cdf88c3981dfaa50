"""The direct StepTriples readers return what fastavro's path returns, and leave it every case they do not take.

The C reader (``provstream.codec._triples_c``) is checked against the Python
one input by input: equal values where it returns, a refusal where it raises.
"""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wire_triples import GOOD, messages
from wire_support import damaged

from provstream import testing
from provstream.codec import avro as codec
from provstream.codec import records as wire
from provstream.codec import triples_reader
from provstream.codec.binary import zigzag
from provstream.core import vocab
from provstream.core.triples import Iri, Literal, QuotedTriple, SessionState, SessionStatus, StepTriples, Triple
from provstream.core.vocab import Mechanism
from provstream.data import REACT_TRAJECTORIES
from provstream.errors import DecodeError

CORPUS = REACT_TRAJECTORIES


def fastavro_path(data: bytes) -> StepTriples | type[DecodeError]:
    try:
        return wire._guarded(wire.triples_from_avro, codec.decode(codec.STEP_TRIPLES, data))  # type: ignore[no-any-return]
    except DecodeError:
        return DecodeError


def direct(data: bytes) -> StepTriples:
    return triples_reader.read_step_triples(data, codec.HEADER_LEN)


def agrees(data: bytes) -> None:
    """decode_triples gives fastavro's answer; the direct reader alone gives it too or raises."""
    expected = fastavro_path(data)
    if expected is DecodeError:
        with pytest.raises(DecodeError):
            wire.decode_triples(data)
    else:
        assert wire.decode_triples(data) == expected
    try:
        got: Any = direct(data)
    except Exception:  # noqa: BLE001 - left to fastavro
        return
    assert got == expected


@cache
def folded_messages() -> list[bytes]:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    events = [e for n, record in enumerate(testing.load_trajectories(CORPUS))
              for e in testing.trajectory_events(record, f"s{n}", start)]
    return [wire.encode_triples(step) for step in testing.fold_all(events)]


def test_every_folded_step_is_read_directly_as_fastavro_reads_it() -> None:
    data = folded_messages()
    assert data
    for message in data:
        assert direct(message) == fastavro_path(message)


@settings(max_examples=300, deadline=None)
@given(messages)
def test_any_message_is_read_directly_as_fastavro_reads_it(msg: StepTriples) -> None:
    data = wire.encode_triples(msg)
    assert direct(data) == fastavro_path(data) == msg


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_damaged_messages_get_fastavros_answer(data: st.DataObject) -> None:
    agrees(damaged(data, [*folded_messages()[:20], wire.encode_triples(GOOD)]))


@pytest.mark.parametrize("body", [
    b"\x01",  # a negative string length
    b"\x80" * 11,  # a varint longer than ten bytes
    b"\x02e\x02s\x06",  # mechanism index out of range
], ids=["negative length", "long varint", "enum index"])
def test_bad_bodies_raise_decode_error(body: bytes) -> None:
    with pytest.raises(DecodeError):
        wire.decode_triples(wire._TRIPLES_HEADER + body)


def test_a_message_with_trailing_bytes_is_refused() -> None:
    with pytest.raises(DecodeError, match="trailing"):
        wire.decode_triples(wire.encode_triples(GOOD) + b"\x00")


# -- the C reader (provstream/codec/_triples_c.c) -------------------------------
# For every input it returns what the Python reader returns (equal values, the
# same interned vocabulary IRIs) and raises wherever the Python reader raises.

NO_C = os.environ.get("PROVSTREAM_NO_C_EXTENSIONS", "") not in ("", "0")
try:
    from provstream.codec import _triples_c
except ImportError:  # not built: only test_the_c_reader_is_built_and_chosen says so
    _triples_c = None  # type: ignore[assignment]
needs_c = pytest.mark.skipif(_triples_c is None, reason="provstream.codec._triples_c is not built")


def c_reader(data: bytes) -> StepTriples:
    return _triples_c.read_step_triples(data, codec.HEADER_LEN)


def answer(read: Callable[[bytes], StepTriples], data: bytes) -> StepTriples | None:
    """What ``read`` returns, or None when it raises."""
    try:
        return read(data)
    except Exception:  # noqa: BLE001 - any exception is a refusal (the caller falls back to fastavro)
        return None


def same_answer(data: bytes) -> StepTriples | None:
    """The C reader raises where the Python reader raises, and returns what it returns."""
    expected = answer(direct, data)
    got = answer(c_reader, data)
    if expected is None:
        assert got is None, f"the C reader took what the Python reader refuses: {data!r}"
        return None
    assert got == expected
    assert hash(got) == hash(expected)
    for mine, theirs in zip(got.triples, expected.triples, strict=True):
        assert type(mine.o) is type(theirs.o)
        for a, b in ((mine.s, theirs.s), (mine.p, theirs.p), (mine.o, theirs.o)):
            assert (a is b) == (a.value.encode() in triples_reader._IRIS if type(a) is Iri else False)
    return got


@pytest.fixture(params=[True, False], ids=["slots", "calls"])
def construction(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Both ways the C reader makes values: filling the slots, calling the classes."""
    if _triples_c is None:
        pytest.skip("provstream.codec._triples_c is not built")
    before = _triples_c.direct_construction(request.param)
    yield request.param
    _triples_c.direct_construction(before)


def test_the_c_reader_is_built_and_chosen() -> None:
    if NO_C:
        assert wire._read_step_triples is triples_reader.read_step_triples
        return
    assert _triples_c is not None, "the C extension was not built: pip install -e . (needs gcc and Python headers)"
    assert _triples_c.FINGERPRINT == wire.DIRECT_TRIPLES_FINGERPRINT, "update _triples_c.c for the new form"
    assert wire._read_step_triples is _triples_c.read_step_triples
    assert wire.decode_triples is wire._decode_triples_direct
    assert _triples_c.direct_construction() is True


def test_provstream_no_c_extensions_keeps_the_python_reader() -> None:
    check = ("from provstream.codec import records, triples_reader; "
             "assert records._read_step_triples is triples_reader.read_step_triples")
    subprocess.run([sys.executable, "-c", check], check=True, env={**os.environ, "PROVSTREAM_NO_C_EXTENSIONS": "1"})


@needs_c
def test_the_c_readers_examples_run() -> None:
    result = doctest.testmod(_triples_c)
    assert result.attempted > 0 and result.failed == 0


def test_every_folded_step_is_read_by_c_as_python_and_fastavro_read_it(construction: bool) -> None:
    for message in folded_messages():
        assert same_answer(message) == fastavro_path(message)


@needs_c
@settings(max_examples=300, deadline=None)
@given(messages)
def test_any_message_is_read_by_c_as_python_and_fastavro_read_it(msg: StepTriples) -> None:
    data = wire.encode_triples(msg)
    assert same_answer(data) == fastavro_path(data) == msg


@needs_c
@settings(max_examples=600, deadline=None)
@given(st.data())
def test_damaged_messages_get_the_python_readers_answer_from_c(data: st.DataObject) -> None:
    same_answer(damaged(data, [*folded_messages()[:20], wire.encode_triples(GOOD)]))


def rich_message() -> bytes:
    """Every kind of term and every optional field present."""
    quoted = QuotedTriple(Iri("urn:s"), Iri(vocab.PROV_WAS_DERIVED_FROM), Literal("q", None, "fi"))
    return wire.encode_triples(StepTriples(
        "é", "s", Mechanism.GRAPHRAG, -(2**63), "u", "", "🎸", (
            Triple(Iri("urn:a"), Iri(vocab.RDF_TYPE), Iri(vocab.PROV_ENTITY)),
            Triple(Iri("urn:a"), Iri("urn:p"), Literal("v", vocab.XSD_DATETIME)),
            Triple(Iri("urn:a"), Iri("urn:p"), quoted),
            Triple(Iri("urn:a"), Iri("urn:p"), QuotedTriple(Iri("urn:s"), Iri("urn:p"), Iri(vocab.PROV_ENTITY))),
        ), SessionStatus(SessionState.INCOMPLETE, 2**31 - 1, -(2**31), 3, (1, 2, 2**31 - 1)), True, "urn:g"))


def few_messages() -> list[bytes]:
    return [rich_message(), wire.encode_triples(GOOD), *folded_messages()[:3]]


@needs_c
def test_the_rich_message_is_read_whole() -> None:
    data = rich_message()
    assert same_answer(data) == fastavro_path(data) == wire.decode_triples(data)


@needs_c
@pytest.mark.parametrize("index", range(5))
def test_every_truncation_is_refused_by_both(index: int) -> None:
    data = few_messages()[index]
    for end in range(codec.HEADER_LEN, len(data)):
        assert same_answer(data[:end]) is None


@needs_c
@pytest.mark.parametrize("index", range(5))
def test_every_byte_changed_gets_the_same_answer(index: int) -> None:
    data = few_messages()[index]
    for at in range(codec.HEADER_LEN, len(data)):
        for value in (0x00, 0x01, 0x02, 0x03, 0x04, 0x06, 0x7F, 0x80, 0xC0, 0xED, 0xFF):
            same_answer(data[:at] + bytes([value]) + data[at + 1:])


# A body built field by field (the canonical form of provstream.StepTriples), to break one field at a time.
def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return zigzag(len(raw)) + raw


IRI_TERM = zigzag(0) + s("urn:o") + b"\x00\x00\x00"
TRIPLE = s("urn:a") + s(vocab.RDF_TYPE) + IRI_TERM
STATUS = zigzag(0) + zigzag(1) + b"\x00" + zigzag(0) + zigzag(0)
FIELDS = {"event_id": s("e"), "session_id": s("s"), "mechanism": zigzag(0), "seq": zigzag(1), "user": s("u"),
          "collection": s("c"), "question": s("q"), "graph": s("g"), "triples": zigzag(1) + TRIPLE + zigzag(0),
          "status": STATUS, "duplicate": b"\x00"}


def body(**change: bytes) -> bytes:
    return wire._TRIPLES_HEADER + b"".join({**FIELDS, **change}.values())


@needs_c
def test_the_hand_built_body_is_read() -> None:
    assert same_answer(body()) == fastavro_path(body())


@needs_c
@pytest.mark.parametrize("change", [
    {"event_id": zigzag(-1)},  # a negative length
    {"event_id": zigzag(2**62) + b"e"},  # a huge length
    {"event_id": zigzag(2**63 - 1) + b"e"},  # the largest length
    {"event_id": b"\x80" * 10 + b"\x00"},  # a varint longer than ten bytes
    {"event_id": b"\xff" * 9 + b"\x02"},  # a ten-byte varint past the long range
    {"event_id": s(b"\xff")},  # invalid UTF-8
    {"event_id": s(b"\xc0\x80")},  # an overlong encoding
    {"event_id": s(b"\xed\xa0\x80")},  # a surrogate
    {"event_id": s(b"\xf4\x90\x80\x80")},  # past U+10FFFF
    {"question": s(b"ok\xe2\x82")},  # a sequence cut short
    {"mechanism": zigzag(3)}, {"mechanism": zigzag(-1)},  # enum indices out of range
    {"triples": zigzag(1) + s("urn:a") + s(b"\xff") + IRI_TERM + zigzag(0)},  # a bad IRI
    {"triples": zigzag(1) + s("urn:a") + s(vocab.RDF_TYPE.encode()[:-1] + b"\xff") + IRI_TERM + zigzag(0)},
    {"triples": zigzag(1) + TRIPLE[:-len(IRI_TERM)] + zigzag(3) + IRI_TERM[1:] + zigzag(0)},  # term kind 3
    {"triples": zigzag(1) + TRIPLE[:-3] + b"\x01\x00\x00" + zigzag(0)},  # union index 1
    {"triples": zigzag(1) + TRIPLE[:-3] + b"\x00\x04\x00" + zigzag(0)},  # union index 2 (language)
    {"triples": zigzag(1) + TRIPLE[:-1] + b"\x03" + zigzag(0)},  # union index -2 (quoted)
    {"triples": zigzag(1) + TRIPLE[:-1] + b"\x80\x00" + zigzag(0)},  # a union index in two bytes
    {"triples": zigzag(1) + s("urn:a") + s("urn:p") + zigzag(2) + s("x") + b"\x00\x00\x00" + zigzag(0)},
    {"triples": zigzag(-1) + zigzag(len(TRIPLE)) + TRIPLE + zigzag(0)},  # a block with its byte size
    {"triples": zigzag(2) + TRIPLE + zigzag(0)},  # fewer items than announced
    {"triples": zigzag(2**62) + TRIPLE + zigzag(0)},  # a huge count
    {"status": zigzag(3) + STATUS[1:]},  # state index out of range
    {"status": zigzag(0) + zigzag(2**31) + STATUS[2:]},  # int out of range
    {"status": zigzag(0) + zigzag(-(2**31) - 1) + STATUS[2:]},
    {"status": zigzag(0) + zigzag(1) + b"\x01" + zigzag(0) + zigzag(0)},  # union index 1
    {"status": zigzag(0) + zigzag(1) + b"\x02" + zigzag(2**31) + zigzag(0) + zigzag(0)},
    {"status": STATUS[:-1] + zigzag(-1) + zigzag(1) + zigzag(5) + zigzag(0)},  # a block with its byte size
    {"status": STATUS[:-1] + zigzag(1) + zigzag(2**31) + zigzag(0)},
    {"duplicate": b"\x02"}, {"duplicate": b"\xff"}, {"duplicate": b""},  # not a boolean, missing
    {"duplicate": b"\x00\x00"},  # trailing bytes
], ids=repr)
def test_bodies_either_reader_refuses_are_refused_by_both(change: dict[str, bytes]) -> None:
    """Malformed bodies, and the valid forms the direct readers leave to fastavro (blocks with byte sizes ...)."""
    assert same_answer(body(**change)) is None
    agrees(body(**change))


@needs_c
@pytest.mark.parametrize("change", [
    {"event_id": b"\x80\x00"},  # a non-canonical zero length
    {"seq": b"\xff" * 9 + b"\x01"},  # the smallest long
    {"seq": b"\xfe" + b"\xff" * 8 + b"\x01"},  # the largest long
    {"triples": zigzag(1) + TRIPLE + zigzag(1) + TRIPLE + zigzag(0)},  # two blocks
    {"triples": zigzag(1) + s("urn:a") + s("urn:p") + zigzag(1) + s("v") + b"\x02" + s(vocab.XSD_DATETIME)
     + b"\x02" + s("en") + b"\x00" + zigzag(0)},
    {"status": STATUS[:-1] + zigzag(1) + zigzag(7) + zigzag(2) + zigzag(-8) + zigzag(9) + zigzag(0)},
    {"duplicate": b"\x01"},
], ids=repr)
def test_unusual_but_valid_bodies_are_read_by_both(change: dict[str, bytes]) -> None:
    data = body(**change)
    assert same_answer(data) is not None


@needs_c
def test_the_c_reader_refuses_what_is_not_a_message() -> None:
    data = wire.encode_triples(GOOD)
    for bad in ((bytearray(data), codec.HEADER_LEN), (data, -1), (data, len(data) + 1), (data, "10")):
        with pytest.raises((TypeError, ValueError)):
            _triples_c.read_step_triples(*bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _triples_c.read_step_triples(data)  # type: ignore[call-arg]


@needs_c
def test_the_c_reader_does_not_leak(construction: bool) -> None:
    inputs = [*few_messages(), *(m[:len(m) // 2] for m in few_messages()), body(duplicate=b"\x00\x00"),
              body(event_id=s(b"\xff")), body(triples=zigzag(2) + TRIPLE + zigzag(0))]

    def run() -> None:
        for data in inputs:
            answer(c_reader, data)

    for _ in range(50):
        run()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(500):
            run()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes kept after {500 * len(inputs)} reads"
