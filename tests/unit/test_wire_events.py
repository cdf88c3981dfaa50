"""The direct Event writer: byte for byte what fastavro writes, and the same errors."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_support import assert_encodes_like_fastavro

from provstream import testing
from provstream.codec import avro as codec
from provstream.codec import event_writer
from provstream.codec import records as wire
from provstream.core import events as ev
from provstream.core.vocab import Mechanism
from provstream.data import REACT_TRAJECTORIES

CORPUS = REACT_TRAJECTORIES


def fastavro_bytes(event: ev.Event) -> bytes:
    return codec.encode(codec.EVENT, wire.event_to_avro(event))


def direct_bytes(event: ev.Event) -> bytes:
    """The direct writer alone (``encode_event`` would hide its failures behind fastavro)."""
    return event_writer.HEADER + event_writer.event_body(event)


def test_the_direct_writer_is_on_for_the_current_schema() -> None:
    # A schema change turns it off (fingerprint mismatch); update event_writer and this fingerprint.
    assert codec.current_fingerprint(codec.EVENT).hex() == event_writer.DIRECT_EVENT_FINGERPRINT
    assert event_writer.ENABLED
    assert wire.encode_event is wire._encode_event_direct


texts = st.text() | st.sampled_from(["", "{}", "x" * 5000, "é🎸" * 1500])
ints = st.integers(-(2**31), 2**31 - 1)
longs = st.integers(-(2**63), 2**63 - 1)
edges = st.builds(ev.SelectedEdge, texts, texts, texts, texts)
payloads: st.SearchStrategy[Any] = st.one_of(
    st.builds(ev.AgentQuestion, texts, st.none() | texts, st.none() | texts),
    st.builds(ev.AgentIteration, ints, texts, texts, texts, texts, st.lists(ints, max_size=5).map(tuple),
              st.none() | st.builds(ev.SubTrace, st.sampled_from(Mechanism), texts)),
    st.builds(ev.AgentConclusion, texts, ints),
    st.builds(ev.GraphRagQuestion, texts), st.builds(ev.GraphRagExploration, longs),
    st.builds(ev.GraphRagFocus, st.lists(edges, max_size=4).map(tuple)),
    st.builds(ev.GraphRagSynthesis, texts), st.builds(ev.DocRagQuestion, texts),
    st.builds(ev.DocRagExploration, longs, st.lists(texts, max_size=5).map(tuple)),
    st.builds(ev.DocRagSynthesis, texts),
)
times = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1),
                     timezones=st.sampled_from([UTC, timezone(timedelta(hours=-7, minutes=-30))]))
events = st.builds(ev.Event, texts, texts, st.sampled_from(Mechanism), longs, times, payloads, texts, texts)


@settings(max_examples=400, deadline=None)
@given(events)
def test_any_event_is_written_as_fastavro_writes_it(event: ev.Event) -> None:
    assert direct_bytes(event) == fastavro_bytes(event)
    assert wire.decode_event(wire.encode_event(event)) == dataclasses.replace(
        event, event_time=event.event_time.astimezone(UTC))


def test_every_bundled_step_is_written_as_fastavro_writes_it() -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    steps: list[ev.Event] = []
    for n, record in enumerate(testing.load_trajectories(CORPUS)):
        steps += testing.trajectory_events(record, f"s{n}", start)
    assert steps
    for event in steps:
        assert direct_bytes(event) == wire.encode_event(event) == fastavro_bytes(event)


GOOD = ev.Event("e", "s", Mechanism.AGENT, 1, datetime(2025, 1, 1, tzinfo=UTC),
                ev.AgentIteration(1, "t", "Search", "{}", "o", (0,)), "u", "c")


@pytest.mark.parametrize("change", [
    {"seq": 2**63}, {"seq": "1"}, {"mechanism": "AGENT"}, {"user": b"u"}, {"collection": None},
    {"event_time": datetime(2025, 1, 1)}, {"event_time": "2025-01-01"},
    {"payload": ev.AgentIteration(2**31)}, {"payload": ev.AgentIteration(1, used=(True,))},
    {"payload": ev.AgentIteration(1, thought="\ud800")}, {"payload": ev.AgentIteration(1, used=("1",))},  # type: ignore[arg-type]
    {"payload": ev.AgentIteration(1, subtrace=ev.SubTrace("DOCRAG", "d"))},  # type: ignore[arg-type]
    {"payload": ev.AgentQuestion("q", agent_name=7)},  # type: ignore[arg-type]
    {"payload": ev.AgentQuestion("q", conversation_id=b"c")},  # type: ignore[arg-type]
    {"payload": ev.GraphRagFocus((("s", "p", "o"),))},  # type: ignore[arg-type]
    {"payload": ev.DocRagExploration(1, ("c", 2))},  # type: ignore[arg-type]
    {"payload": "not a payload"},
], ids=str)
def test_values_it_does_not_take_go_through_fastavro(change: dict[str, Any]) -> None:
    event = dataclasses.replace(GOOD, **change)
    assert_encodes_like_fastavro(wire.encode_event, fastavro_bytes, event)
