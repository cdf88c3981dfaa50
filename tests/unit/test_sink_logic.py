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
    nodes_of_pair,
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


class Msg(namedtuple("Msg", "session_id seq links")):
    """What split_lanes needs of a message: its session's Question and the nodes it links to."""

    @property
    def question(self) -> str:
        return f"urn:q:{self.session_id}"

    @property
    def triples(self) -> tuple[()]:
        return ()


def _msg(session: str, seq: int, *links: str) -> Msg:
    return Msg(session, seq, links)


def _nodes(item: tuple[Rec, Msg]) -> list[str]:
    return [item[1].question, *item[1].links]


def test_lanes_keep_each_session_whole_and_in_order() -> None:
    items = [(Rec("t", i % 4, i, None, None), _msg(f"s{i % 40}", i)) for i in range(400)]
    lanes = split_lanes(items, 2, nodes_of_pair)  # type: ignore[arg-type]
    assert len(lanes) == 2 and all(lanes)
    assert sorted(pair[1].seq for lane in lanes for pair in lane) == list(range(400))
    for lane in lanes:
        assert [pair[1].seq for pair in lane] == sorted(pair[1].seq for pair in lane)  # batch order kept
    owners = {pair[1].session_id: i for i, lane in enumerate(lanes) for pair in lane}
    assert all(owners[pair[1].session_id] == i for i, lane in enumerate(lanes) for pair in lane)


def test_small_batches_and_one_writer_are_not_split() -> None:
    items = [(Rec("t", 0, i, None, None), _msg(f"s{i}", i)) for i in range(60)]
    assert split_lanes(items, 2, nodes_of_pair) == [items]  # type: ignore[arg-type]  # under 2 x LANE_MIN
    assert split_lanes(items, 2, nodes_of_pair, minimum=10) != [items]  # type: ignore[arg-type]
    assert split_lanes(items * 10, 1, nodes_of_pair) == [items * 10]  # type: ignore[arg-type]
    assert split_lanes([], 4, nodes_of_pair) == []


def test_join_all_waits_for_every_part_and_reraises_a_failure() -> None:
    done: Future[None] = Future()
    done.set_result(None)
    failed: Future[None] = Future()
    failed.set_exception(StoreUnavailable("down"))
    join_all([done, done])
    with pytest.raises(StoreUnavailable):
        join_all([done, failed])


def test_sessions_a_sub_trace_links_share_a_lane_and_lanes_share_no_node() -> None:
    # s0..s39; every agent step of s2k links to a node of s2k+1 (its sub-trace): 20 linked pairs
    items = [(Rec("t", 0, i, None, None),
              _msg(f"s{i % 40}", i, *([f"urn:q:s{i % 40 + 1}"] if i % 2 == 0 else []))) for i in range(400)]
    lanes = split_lanes(items, 2, _nodes)  # type: ignore[arg-type]
    assert len(lanes) == 2 and sorted(p[1].seq for lane in lanes for p in lane) == list(range(400))
    touched = [{n for p in lane for n in _nodes(p)} for lane in lanes]
    assert touched[0].isdisjoint(touched[1])
    assert abs(len(lanes[0]) - len(lanes[1])) <= 20  # balanced by component size
    one = [(Rec("t", 0, i, None, None), _msg(f"s{i % 40}", i, "urn:shared")) for i in range(400)]
    assert split_lanes(one, 2, _nodes) == [one]  # type: ignore[arg-type]  # all linked: one transaction


def test_node_iris_are_the_question_subjects_and_iri_objects() -> None:
    from provstream.connectors.neo4j.rows import node_iris
    from provstream.core.triples import Iri, Literal, StepTriples, Triple
    q, s = "urn:q", "urn:s"
    msg = StepTriples("e", "sid", Mechanism.AGENT, 1, "u", "c", q, (
        Triple(Iri(s), Iri("http://www.w3.org/1999/02/22-rdf-syntax-ns#type"), Iri("http://www.w3.org/ns/prov#Entity")),
        Triple(Iri(s), Iri("http://www.w3.org/ns/prov#wasDerivedFrom"), Iri("urn:other")),
        Triple(Iri(s), Iri("urn:p"), Literal("text")),
    ), status=fold(None, ev.Event("e0", "sid", Mechanism.AGENT, 0, datetime(2025, 1, 1, tzinfo=UTC),
                                  ev.AgentQuestion("q")))[1].status)
    assert node_iris(msg) == [q, s, "urn:other"]  # once each, in order of first mention
