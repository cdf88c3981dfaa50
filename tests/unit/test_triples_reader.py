"""The direct StepTriples reader returns what fastavro's path returns, and leaves it every case it does not take."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wire_triples import GOOD, messages

from provstream import testing
from provstream.codec import avro as codec
from provstream.codec import records as wire
from provstream.codec import triples_reader
from provstream.core.triples import StepTriples
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
    good = bytearray(data.draw(st.sampled_from([*folded_messages()[:20], wire.encode_triples(GOOD)])))
    cut = data.draw(st.integers(codec.HEADER_LEN, len(good)))
    kind = data.draw(st.sampled_from(["flip", "truncate", "extend"]))
    if kind == "flip":
        good[min(cut, len(good) - 1)] = data.draw(st.integers(0, 255))
    elif kind == "truncate":
        del good[cut:]
    else:
        good[cut:cut] = data.draw(st.binary(min_size=1, max_size=12))
    agrees(bytes(good))


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
