"""The sink's pure decisions: decoding, bisecting rejects, offsets, backoff, DLQ headers."""

from __future__ import annotations

from collections import namedtuple
from concurrent.futures import Future
from datetime import UTC, datetime

import pytest
from kafka.structs import TopicPartition

from provstream.codec import records as wire
from provstream.connectors.sink import (
    backoff,
    decode_records,
    dlq_headers,
    isolate_rejects,
    join_all,
    next_offsets,
    session_of_pair,
    split_lanes,
)
from provstream.core import events as ev
from provstream.core.fold import fold
from provstream.core.vocab import Mechanism
from provstream.errors import StoreError, StoreUnavailable

Rec = namedtuple("Rec", "topic partition offset key value")


def test_backoff_doubles_up_to_the_cap() -> None:
    assert [backoff(i) for i in range(8)] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    assert backoff(10_000) == 5.0


def test_undecodable_records_are_set_aside_with_a_reason() -> None:
    event = ev.Event("e0", "s1", Mechanism.AGENT, 0, datetime(2025, 1, 1, tzinfo=UTC), ev.AgentQuestion("q"))
    _, msg = fold(None, event)
    records = [Rec("t", 0, 0, b"k", wire.encode_triples(msg)), Rec("t", 0, 1, b"k", b"garbage"),
               Rec("t", 1, 5, None, None)]
    good, bad = decode_records(records)
    assert [(r.offset, m) for r, m in good] == [(0, msg)]
    assert [r.offset for r, _ in bad] == [1, 5]
    assert all(reason.startswith("undecodable triples message:") for _, reason in bad)


def test_bisection_isolates_the_rejected_items_and_writes_the_rest() -> None:
    written: list[int] = []

    def write(items: list[int]) -> None:
        if any(i in (3, 11) for i in items):
            raise StoreError("bad")
        written.extend(items)

    rejected = isolate_rejects(write, list(range(16)))
    assert [i for i, _ in rejected] == [3, 11]
    assert sorted(written) == [i for i in range(16) if i not in (3, 11)]
    assert isolate_rejects(write, []) == []


def test_unavailability_is_not_a_rejection() -> None:
    def write(items: list[int]) -> None:
        raise StoreUnavailable("down")

    with pytest.raises(StoreUnavailable):
        isolate_rejects(write, [1, 2, 3])


def test_offsets_to_commit_are_the_next_ones_per_partition() -> None:
    records = [Rec("t", 0, 4, None, b""), Rec("t", 1, 9, None, b""), Rec("t", 0, 7, None, b""),
               Rec("t", 0, 5, None, b"")]
    assert next_offsets(records) == {TopicPartition("t", 0): 8, TopicPartition("t", 1): 10}


def test_dead_letter_headers_name_the_reason_and_the_source() -> None:
    assert dlq_headers(Rec("topic", 2, 41, None, b""), "why") == [
        ("provstream.error", b"why"), ("provstream.source.topic", b"topic"),
        ("provstream.source.partition", b"2"), ("provstream.source.offset", b"41"),
    ]


Msg = namedtuple("Msg", "session_id seq")


def test_lanes_keep_each_session_whole_and_in_order() -> None:
    items = [(Rec("t", i % 4, i, None, None), Msg(f"s{i % 40}", i)) for i in range(400)]
    lanes = split_lanes(items, 2, session_of_pair)  # type: ignore[arg-type]
    assert len(lanes) == 2 and all(lanes)
    assert sorted(pair[1].seq for lane in lanes for pair in lane) == list(range(400))
    for lane in lanes:
        assert [pair[1].seq for pair in lane] == sorted(pair[1].seq for pair in lane)  # batch order kept
    owners = {pair[1].session_id: i for i, lane in enumerate(lanes) for pair in lane}
    assert all(owners[pair[1].session_id] == i for i, lane in enumerate(lanes) for pair in lane)


def test_small_batches_and_one_writer_are_not_split() -> None:
    items = [(Rec("t", 0, i, None, None), Msg(f"s{i}", i)) for i in range(60)]
    assert split_lanes(items, 2, session_of_pair) == [items]  # type: ignore[arg-type]  # under 2 x LANE_MIN
    assert split_lanes(items, 2, session_of_pair, minimum=10) != [items]  # type: ignore[arg-type]
    assert split_lanes(items * 10, 1, session_of_pair) == [items * 10]  # type: ignore[arg-type]
    assert split_lanes([], 4, session_of_pair) == []


def test_join_all_waits_for_every_part_and_reraises_a_failure() -> None:
    done: Future[None] = Future()
    done.set_result(None)
    failed: Future[None] = Future()
    failed.set_exception(StoreUnavailable("down"))
    join_all([done, done])
    with pytest.raises(StoreUnavailable):
        join_all([done, failed])
