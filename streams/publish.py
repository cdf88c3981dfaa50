"""Publishing a batch's triples messages as whole record batches.

Faust's ``producer.send`` costs a future, a partitioner call (pure-Python
murmur2) and an accumulator lookup per message. The worker instead appends a
batch's triples messages to one aiokafka ``BatchBuilder`` per partition and
submits each with ``send_batch``: one future per record batch. The records
go through the same producer, so Faust's flush before every offset commit
still covers them; the partition is the one the producer's partitioner gives
the key (murmur2, as for the events), computed once per session key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from provstream.topics import PartitionMemo

Headers = list[tuple[str, bytes]]


class BatchPublisher:
    """Sends ``(key, value)`` records to ``topic`` through an ``AIOKafkaProducer``, batched per partition."""

    def __init__(self, producer: Any, topic: str) -> None:
        self._producer = producer
        self._topic = topic
        self._memo = PartitionMemo()

    async def publish(self, records: Iterable[tuple[bytes, bytes] | tuple[bytes, bytes, Headers]]
                      ) -> list[asyncio.Future[Any]]:
        """Queue ``records`` (key, value[, headers]) for delivery in their order per partition; one delivery
        future per record batch."""
        await self._refresh_partitions()
        open_batches: dict[int, Any] = {}
        deliveries = []
        for key, value, *rest in records:
            headers: Headers = rest[0] if rest else []
            partition = self._partition(key)
            batch = open_batches.get(partition)
            if batch is None:
                batch = open_batches[partition] = self._producer.create_batch()
            if batch.append(timestamp=None, key=key, value=value, headers=headers) is None:  # full: send, start anew
                deliveries.append(await self._submit(batch, partition))
                batch = open_batches[partition] = self._producer.create_batch()
                if batch.append(timestamp=None, key=key, value=value, headers=headers) is None:
                    raise ValueError(f"a {len(value)}-byte record does not fit in an empty record batch")
        for partition, batch in open_batches.items():
            deliveries.append(await self._submit(batch, partition))
        return deliveries

    async def _submit(self, batch: Any, partition: int) -> asyncio.Future[Any]:
        batch.close()
        future: asyncio.Future[Any] = await self._producer.send_batch(batch, self._topic, partition=partition)
        return future

    async def _refresh_partitions(self) -> None:
        await self._producer.client._wait_on_metadata(self._topic)
        partitions = sorted(self._producer.client.cluster.partitions_for_topic(self._topic) or ())
        self._memo.refresh(partitions)

    def _partition(self, key: bytes) -> int:
        partition = self._memo.get(key)
        if partition is None:
            partitions = self._memo.partitions
            partition = self._memo[key] = self._producer._partitioner(key, partitions, partitions)
        return partition
