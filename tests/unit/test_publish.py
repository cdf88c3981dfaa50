"""Triples published as one record batch per partition, partitioned as the producer would."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka.partitioner import DefaultPartitioner

from provstream.publish import BatchPublisher


@dataclass
class FakeBatch:
    limit: int
    records: list[tuple[bytes, bytes]] = field(default_factory=list)
    closed: bool = False

    def append(self, *, timestamp: Any, key: bytes, value: bytes, headers: Any = ()) -> object | None:
        assert timestamp is None and not self.closed
        if self.records and sum(len(v) for _, v in self.records) + len(value) > self.limit:
            return None
        if len(value) > self.limit:
            return None
        self.records.append((key, value))
        return object()

    def close(self) -> None:
        self.closed = True


class FakeCluster:
    def __init__(self, partitions: set[int]) -> None:
        self.partitions = partitions

    def partitions_for_topic(self, topic: str) -> set[int]:
        return self.partitions


class FakeClient:
    def __init__(self, partitions: set[int]) -> None:
        self.cluster = FakeCluster(partitions)

    async def _wait_on_metadata(self, topic: str) -> None:
        return None


class FakeProducer:
    """The parts of ``AIOKafkaProducer`` the publisher uses."""

    def __init__(self, partitions: set[int], limit: int = 100) -> None:
        self.client = FakeClient(partitions)
        self._partitioner = DefaultPartitioner()
        self.limit = limit
        self.sent: list[tuple[str, int, FakeBatch]] = []

    def create_batch(self) -> FakeBatch:
        return FakeBatch(self.limit)

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int) -> asyncio.Future[Any]:
        assert batch.closed
        self.sent.append((topic, partition, batch))
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        return future


def publish(producer: FakeProducer, records: list[tuple[bytes, bytes]]) -> int:
    async def run() -> int:
        return len(await BatchPublisher(producer, "t").publish(records))

    return asyncio.run(run())


def test_records_go_to_the_partitioner_s_partition_in_order() -> None:
    producer = FakeProducer({0, 1, 2, 3})
    records = [(f"s{i % 5}".encode(), f"v{i}".encode()) for i in range(20)]
    futures = publish(producer, records)
    assert futures == len(producer.sent) == len({p for _, p, _ in producer.sent})
    for topic, partition, batch in producer.sent:
        assert topic == "t"
        expected = [r for r in records if DefaultPartitioner()(r[0], [0, 1, 2, 3], [0, 1, 2, 3]) == partition]
        assert batch.records == expected


def test_a_full_batch_is_sent_and_another_started() -> None:
    producer = FakeProducer({0}, limit=10)
    publish(producer, [(b"k", b"12345"), (b"k", b"67890"), (b"k", b"abc")])
    assert [b.records for _, _, b in producer.sent] == [[(b"k", b"12345"), (b"k", b"67890")], [(b"k", b"abc")]]


def test_a_record_too_big_for_an_empty_batch_is_an_error() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        publish(FakeProducer({0}, limit=4), [(b"k", b"12345")])


def test_partitions_are_re_read_when_the_topic_grows() -> None:
    producer = FakeProducer({0})
    publisher = BatchPublisher(producer, "t")

    async def run() -> None:
        await publisher.publish([(b"key-a", b"v")])
        producer.client.cluster.partitions = {0, 1, 2}
        await publisher.publish([(b"key-a", b"v")])

    asyncio.run(run())
    assert [p for _, p, _ in producer.sent] == [0, DefaultPartitioner()(b"key-a", [0, 1, 2], [0, 1, 2])]
