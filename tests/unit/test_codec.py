"""Single-object codec and wire translation: round trips and every kind of bad input."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provstream.codec import avro as codec
from provstream.codec import records as wire
from provstream.core import events as ev
from provstream.core.triples import Iri, Literal, SessionState, SessionStatus, StepTriples, Triple
from provstream.core.vocab import Mechanism
from provstream.errors import DecodeError, EncodeError

T = datetime(2025, 6, 1, 12, 0, 0, 123456, tzinfo=UTC)

PAYLOADS: list[ev.Payload] = [
    ev.AgentQuestion("q?"),
    ev.AgentIteration(1),
    ev.AgentIteration(3, "think", "Search", '{"input": "x"}', "saw", (1, 2), ev.SubTrace(Mechanism.DOCRAG, "d-1")),
    ev.AgentConclusion("answer", 3),
    ev.GraphRagQuestion("g?"),
    ev.GraphRagExploration(0),
    ev.GraphRagFocus(),
    ev.GraphRagFocus((ev.SelectedEdge("http://x/s", "http://x/p", "lit", "why"), ev.SelectedEdge("a:b", "a:c", "a:d"))),
    ev.GraphRagSynthesis("s"),
    ev.DocRagQuestion("d?"),
    ev.DocRagExploration(2**40, ("c1", "c2")),
    ev.DocRagSynthesis(""),
]


def event(payload: ev.Payload, **changes: object) -> ev.Event:
    e = ev.Event("e-1", "s-1", ev.MECHANISM_OF[type(payload)], 7, T, payload, "alice", "papers")
    return dataclasses.replace(e, **changes)  # type: ignore[arg-type]


def good() -> bytes:
    return wire.encode_event(event(PAYLOADS[2]))


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: type(p).__name__)
def test_every_step_type_round_trips(payload: ev.Payload) -> None:
    e = event(payload)
    data = wire.encode_event(e)
    assert data[:2] == codec.MAGIC
    assert data[2:codec.HEADER_LEN] == codec.current_fingerprint(codec.EVENT)
    assert wire.decode_event(data) == e


def test_event_time_comes_back_in_utc_with_microseconds() -> None:
    local = datetime(2025, 6, 1, 14, 0, 0, 1, tzinfo=timezone(timedelta(hours=2)))
    back = wire.decode_event(wire.encode_event(event(PAYLOADS[0], event_time=local)))
    assert back.event_time == local and back.event_time.tzinfo == UTC and back.event_time.microsecond == 1


def test_step_triples_round_trip() -> None:
    msg = StepTriples("e", "s", Mechanism.AGENT, 1, "u", "c", "urn:trustgraph:agent:s",
                      (Triple(Iri("urn:a"), Iri("urn:p"), Literal("é", None, "fr")),),
                      SessionStatus(SessionState.INCOMPLETE, 3, 5, 1, (2, 4)))
    assert wire.decode_triples(wire.encode_triples(msg)) == msg


@settings(max_examples=60, deadline=None)
@given(text=st.text(), args=st.dictionaries(st.text(max_size=8), st.text(max_size=20), max_size=3))
def test_any_unicode_text_is_carried_intact(text: str, args: dict[str, str]) -> None:
    arguments = json.dumps(args, ensure_ascii=False, sort_keys=True)
    e = event(ev.AgentIteration(1, text, text, arguments, text))
    assert wire.decode_event(wire.encode_event(e)) == e


def test_very_large_text_is_carried_intact() -> None:
    big = "Ünïcödé 🎸 " * 400_000  # ~5 MB of UTF-8
    e = event(ev.AgentIteration(1, observation=big))
    data = wire.encode_event(e)
    assert len(data) > len(big)
    assert wire.decode_event(data).payload.observation == big  # type: ignore[union-attr]


# -- bad bytes --------------------------------------------------------------

def decode_error(data: object) -> str:
    with pytest.raises(DecodeError) as info:
        wire.decode_event(data)  # type: ignore[arg-type]
    return str(info.value)


def test_wrong_magic_is_named() -> None:
    assert "magic" in decode_error(b"\x00\x01" + good()[2:])


def test_unknown_fingerprint_is_named() -> None:
    data = good()
    assert "unknown schema fingerprint" in decode_error(data[:2] + b"\xff" * 8 + data[10:])


def test_too_short_for_a_header() -> None:
    assert "too short" in decode_error(good()[:5])
    assert "too short" in decode_error(b"")


def test_every_truncation_of_the_body_is_a_decode_error() -> None:
    data = good()
    for cut in range(codec.HEADER_LEN, len(data)):
        message = decode_error(data[:cut])
        assert "corrupt provstream.Event" in message or "does not fit" in message, (cut, message)


def test_trailing_bytes_are_named() -> None:
    assert "trailing bytes" in decode_error(good() + b"\x00\x01")


def test_a_step_triples_message_is_not_an_event() -> None:
    msg = StepTriples("e", "s", Mechanism.AGENT, 1, "u", "c", "q", (), SessionStatus(SessionState.OPEN, 1))
    assert "provstream.StepTriples, expected provstream.Event" in decode_error(wire.encode_triples(msg))
    with pytest.raises(DecodeError, match="expected provstream.StepTriples"):
        wire.decode_triples(good())


def test_not_bytes_is_a_decode_error() -> None:
    assert "expected bytes" in decode_error("c301")


def test_memoryview_and_bytearray_decode() -> None:
    data = good()
    assert wire.decode_event(memoryview(data)) == wire.decode_event(bytearray(data)) == wire.decode_event(data)


@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=300))
def test_garbage_after_a_valid_header_never_escapes_as_another_exception(body: bytes) -> None:
    data = good()[: codec.HEADER_LEN] + body
    try:
        wire.decode_event(data)
    except DecodeError:
        pass


@settings(max_examples=200, deadline=None)
@given(index=st.integers(min_value=codec.HEADER_LEN), value=st.integers(min_value=0, max_value=255))
def test_flipped_body_bytes_decode_or_raise_decode_error(index: int, value: int) -> None:
    data = bytearray(good())
    data[index % len(data) if index % len(data) >= codec.HEADER_LEN else codec.HEADER_LEN] = value
    try:
        wire.decode_event(bytes(data))
    except DecodeError:
        pass


# -- wrong types on encode ----------------------------------------------------

@pytest.mark.parametrize("bad", [
    event(ev.AgentQuestion(5)),  # type: ignore[arg-type]
    event(ev.AgentQuestion(None)),  # type: ignore[arg-type]
    event(PAYLOADS[0], seq="seven"),
    event(PAYLOADS[0], seq=2**70),
    event(PAYLOADS[0], event_id=None),
    event(ev.AgentIteration("one")),  # type: ignore[arg-type]
    event(ev.AgentIteration(1, used=("a",))),  # type: ignore[arg-type]
    event(ev.GraphRagFocus(("not an edge",))),  # type: ignore[arg-type]
    event(ev.DocRagExploration(1, (1, 2))),  # type: ignore[arg-type]
    event(PAYLOADS[0], mechanism="BOGUS"),
], ids=lambda e: f"{type(e.payload).__name__}")
def test_wrong_types_raise_encode_error(bad: ev.Event) -> None:
    with pytest.raises(EncodeError, match="encode"):
        wire.encode_event(bad)


def test_naive_event_time_is_an_encode_error() -> None:
    with pytest.raises(EncodeError, match="timezone-aware"):
        wire.encode_event(event(PAYLOADS[0], event_time=datetime(2025, 1, 1)))


def test_a_non_step_payload_is_an_encode_error() -> None:
    with pytest.raises(EncodeError, match="not a step payload"):
        wire.encode_event(dataclasses.replace(event(PAYLOADS[0]), payload="hello"))  # type: ignore[arg-type]
