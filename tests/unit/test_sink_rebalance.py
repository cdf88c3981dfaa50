"""The sink across an eager rebalance, and when it closes a batch."""

from __future__ import annotations

import threading
import time
from collections import namedtuple
from concurrent.futures import Future
from typing import Any

import pytest
from kafka.structs import TopicPartition

from provstream.connectors.sink import Sink, _Revocations
from provstream.errors import ConfigError, ProvstreamError
from provstream.settings import Settings

Record = namedtuple("Record", "topic partition offset value key")
P0, P1 = TopicPartition("t", 0), TopicPartition("t", 1)


class FakeConsumer:
    def __init__(self, owned: set[TopicPartition]) -> None:
        self.owned = owned
        self.resumed: list[TopicPartition] = []

    def assignment(self) -> set[TopicPartition]:
        return set(self.owned)

    def pause(self, *tps: TopicPartition) -> None:
        pass

    def resume(self, *tps: TopicPartition) -> None:
        assert set(tps) <= self.owned, "resuming a partition no longer assigned raises in kafka-python"
        self.resumed += tps

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, Any]:
        self.owned = {P0}  # a rebalance happens during the poll: P1 moves to another sink
        return {}


def _sink(consumer: FakeConsumer) -> Sink:
    return Sink(Settings(), store=None, consumer=consumer, producer=None, stop=threading.Event())  # type: ignore[arg-type]


def test_eager_rebalance_keeps_the_records_of_partitions_assigned_again() -> None:
    consumer = FakeConsumer({P0, P1})
    sink = _sink(consumer)
    sink.pending = [Record("t", 0, 10, b"", b"k"), Record("t", 1, 20, b"", b"k"), Record("t", 0, 11, b"", b"k")]
    sink._to_commit = {P0: 5, P1: 7}
    listener = _Revocations(sink)
    listener.on_partitions_revoked({P0, P1})  # eager: everything is "revoked" ...
    assert len(sink.pending) == 3
    listener.on_partitions_assigned({P0})  # ... and P0 comes back with its fetch position kept
    assert [(r.partition, r.offset) for r in sink.pending] == [(0, 10), (0, 11)]
    assert sink._to_commit == {P0: 5}


def test_keep_alive_resumes_only_what_it_still_owns() -> None:
    consumer = FakeConsumer({P0, P1})
    _sink(consumer)._keep_alive()
    assert consumer.resumed == [P0]


class TrickleConsumer:
    """Returns one record per poll; finishes ``writing`` after ``finish_after`` polls."""

    def __init__(self, writing: Any = None, finish_after: int = 0) -> None:
        self.polls: list[int] = []
        self.writing, self.finish_after = writing, finish_after

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, Any]:
        self.polls.append(timeout_ms)
        if self.writing is not None and len(self.polls) == self.finish_after:
            self.writing.set_result(None)
        return {P0: [Record("t", 0, len(self.polls), b"", b"k")]}


def test_with_neo4j_idle_a_batch_closes_at_the_first_records() -> None:
    consumer = TrickleConsumer()
    sink = Sink(Settings(sink_batch_ms=60_000), store=None, consumer=consumer, producer=None,  # type: ignore[arg-type]
                stop=threading.Event())
    sink._fill(None)
    assert [r.offset for r in sink.pending] == [1]


def test_while_a_write_is_in_flight_the_batch_grows_until_it_ends() -> None:
    writing: Future[None] = Future()
    consumer = TrickleConsumer(writing, finish_after=4)
    sink = Sink(Settings(sink_batch_ms=60_000), store=None, consumer=consumer, producer=None,  # type: ignore[arg-type]
                stop=threading.Event())
    sink._fill(writing)
    assert [r.offset for r in sink.pending] == [1, 2, 3, 4]
    assert max(consumer.polls[1:]) <= 5  # short slices while writing, so the end of the write is seen soon


def test_a_batch_closes_at_its_size_even_while_writing() -> None:
    consumer = TrickleConsumer(Future(), finish_after=10_000)
    sink = Sink(Settings(sink_batch_ms=60_000, sink_batch_size=3), store=None, consumer=consumer,  # type: ignore[arg-type]
                producer=None, stop=threading.Event())
    sink._fill(consumer.writing)
    assert len(sink.pending) == 3


def test_the_next_batch_is_queued_for_the_writer_before_the_last_one_is_committed() -> None:
    """Neo4j never waits for Kafka's offset commit: batch 2 is queued, then batch 1's offsets are committed."""
    Headed = namedtuple("Headed", "topic partition offset value key headers")
    log: list[tuple[str, int]] = []
    stop = threading.Event()

    class Consumer:
        polls = 0

        def subscribe(self, topics: list[str], listener: Any = None) -> None:
            pass

        def partitions_for_topic(self, topic: str) -> set[int]:
            return {0}

        def assignment(self) -> set[TopicPartition]:
            return {P0}

        def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, Any]:
            self.polls += 1
            if self.polls <= 2:  # one record per batch: offsets 1 and 2
                return {P0: [Headed("t", 0, self.polls, b"x", b"k", [])]}
            stop.set()
            return {}

        def commit(self, offsets: dict[TopicPartition, Any]) -> None:
            log.append(("commit", offsets[P0].offset - 1))

    sink = Sink(Settings(), store=None, consumer=Consumer(), producer=None, stop=stop)  # type: ignore[arg-type]

    def retrying(good: list[Any], bad: list[Any], retracted: Any = ()) -> None:
        offset = (good + bad)[0][0].offset
        log.append(("write", offset))

    submit = sink._writer.submit

    def queued(fn: Any, *args: Any) -> Future[None]:
        log.append(("queued", (args[0] + args[1])[0][0].offset))
        return submit(fn, *args)

    sink._retrying = retrying  # type: ignore[method-assign]
    sink._writer.submit = queued  # type: ignore[method-assign]
    sink.run()
    assert log.index(("queued", 2)) < log.index(("commit", 1))
    assert log.index(("write", 1)) < log.index(("commit", 1)) < log.index(("commit", 2))
    assert log.index(("write", 2)) < log.index(("commit", 2))


class SparseConsumer:
    """Returns a record at the polls numbered in ``records_at``; other polls wait their timeout and return none."""

    def __init__(self, records_at: set[int]) -> None:
        self.polls: list[int] = []
        self.records_at = records_at

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, Any]:
        self.polls.append(timeout_ms)
        if len(self.polls) in self.records_at:
            return {P0: [Record("t", 0, len(self.polls), b"", b"k")]}
        time.sleep(timeout_ms / 1000)
        return {}


def test_with_a_linger_a_batch_after_a_write_waits_until_its_first_record_is_that_old() -> None:
    writing: Future[None] = Future()
    writing.set_result(None)  # the previous write has ended: without a linger the batch would close at once
    consumer = SparseConsumer(records_at={1, 3})
    sink = Sink(Settings(sink_batch_ms=60_000, sink_linger_ms=150), store=None, consumer=consumer,  # type: ignore[arg-type]
                producer=None, stop=threading.Event())
    began = time.monotonic()
    sink._fill(writing)
    waited = time.monotonic() - began
    assert 0.15 <= waited < 5  # it kept polling for the linger, then closed
    assert [r.offset for r in sink.pending] == [1, 3]
    assert max(consumer.polls[1:]) <= 5

    idle = Sink(Settings(sink_batch_ms=60_000, sink_linger_ms=150), store=None, consumer=TrickleConsumer(),  # type: ignore[arg-type]
                producer=None, stop=threading.Event())
    idle._fill(None)  # Neo4j idle: a step after a quiet spell is written at once, linger or not
    assert [r.offset for r in idle.pending] == [1]


def test_the_linger_is_checked_against_the_batch_window() -> None:
    Settings(sink_batch_ms=100, sink_linger_ms=100).check()
    with pytest.raises(ConfigError, match="PROVSTREAM_SINK_LINGER_MS"):
        Settings(sink_batch_ms=100, sink_linger_ms=101).check()
    with pytest.raises(ConfigError, match="PROVSTREAM_SINK_LINGER_MS"):
        Settings(sink_linger_ms=-1).check()


class OutageConsumer:
    """Raises ``errors`` from its first polls (as kafka-python's poll does while brokers are away), then
    returns one record per poll."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.polls = 0

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[Any, Any]:
        self.polls += 1
        if self.errors:
            raise self.errors.pop(0)
        return {P0: [Record("t", 0, self.polls, b"", b"k")]}


def test_a_kafka_outage_during_a_poll_is_ridden_out(caplog: pytest.LogCaptureFixture) -> None:
    from kafka.errors import CoordinatorNotAvailableError, KafkaConnectionError

    consumer = OutageConsumer([KafkaConnectionError("111 ECONNREFUSED"), CoordinatorNotAvailableError()])
    sink = Sink(Settings(sink_batch_ms=60_000), store=None, consumer=consumer, producer=None,  # type: ignore[arg-type]
                stop=threading.Event())
    began = time.monotonic()
    sink._fill(None)  # two empty polls after the errors, then the record (Neo4j idle: the batch closes)
    while not sink.pending:
        sink._fill(None)
    assert [r.offset for r in sink.pending] == [3] and sink._poll_failures == 0
    assert time.monotonic() - began >= 0.1 + 0.2  # paused 0.1 s, then 0.2 s
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ["cannot poll Kafka (KafkaConnectionError: 111 ECONNREFUSED); polling again in 0.1 s",
                        "cannot poll Kafka ([Error 15] CoordinatorNotAvailableError); polling again in 0.2 s"]


def test_a_stop_during_an_outage_ends_the_pause() -> None:
    from kafka.errors import KafkaConnectionError

    stop = threading.Event()
    stop.set()
    sink = Sink(Settings(), store=None, consumer=OutageConsumer([KafkaConnectionError("x")] * 20),  # type: ignore[arg-type]
                producer=None, stop=stop)
    sink._poll_failures = 30  # a long outage: the pause would be the full cap
    began = time.monotonic()
    assert sink._poll(5) == {}
    assert time.monotonic() - began < 0.5


def test_a_poll_kafka_refuses_for_good_ends_the_sink_with_one_line() -> None:
    from kafka.errors import TopicAuthorizationFailedError

    sink = Sink(Settings(), store=None, consumer=OutageConsumer([TopicAuthorizationFailedError()]),  # type: ignore[arg-type]
                producer=None, stop=threading.Event())
    with pytest.raises(ProvstreamError, match="cannot read provstream.triples from Kafka: .*TopicAuthorizationFailed"):
        sink._fill(None)
