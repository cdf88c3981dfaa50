"""Publishing records as whole record batches through an aiokafka producer.

A producer's ``send`` costs a future, a partitioner call (pure-Python
murmur2) and an accumulator lookup per record. :class:`BatchPublisher`
instead appends records to one aiokafka ``BatchBuilder`` per partition and
submits each with ``send_batch``: one future per record batch. The worker
publishes a batch's triples messages this way through Faust's own producer
(so Faust's flush before every offset commit still covers them); the
emitter's Kafka transport publishes the steps it has buffered. The partition
is the one the default partitioner gives the key (murmur2, as Java's),
computed once per key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from provstream.topics import PartitionMemo

Headers = list[tuple[str, bytes]]
Record = tuple[bytes, bytes | None] | tuple[bytes, bytes | None, Headers]  # a value of None is a tombstone


class BatchPublisher:
    """Sends ``(key, value)`` records to ``topic`` through an ``AIOKafkaProducer``, batched per partition."""

    def __init__(self, producer: Any, topic: str) -> None:
        self._producer = producer
        self._topic = topic
        self._memo = PartitionMemo()

    async def publish(self, records: Iterable[Record]
                      ) -> list[asyncio.Future[Any]]:
        """Queue ``records`` (key, value[, headers]) for delivery in their order per partition; one delivery
        future per record batch."""
        return [future for _, future in await self.publish_keyed(records)]

    async def publish_keyed(self, records: Iterable[Record],
                            keep_going: Callable[[], bool] | None = None,
                            ) -> list[tuple[list[bytes], asyncio.Future[Any]]]:
        """As :meth:`publish`, with the keys of each record batch's records beside its delivery future.

        :param records: ``(key, value)`` or ``(key, value, headers)``, in the order to keep per partition.
        :param keep_going: if given, a record batch the producer has no room for yet (its partition's
            previous batch still unsent: Kafka away) is offered again while ``keep_going()`` is true,
            and a batch that cannot be submitted is returned with a failed future instead of raising.
        :returns: ``(keys, future)`` per record batch submitted, in submission order.
        :raises ValueError: a record too large for an empty record batch (without ``keep_going``).

        Example: ``await publisher.publish_keyed([(b"s1", v1), (b"s2", v2)])`` is
        ``[([b"s1"], f1), ([b"s2"], f2)]`` when the two keys map to two partitions.
        """
        await self._refresh_partitions()
        open_batches: dict[int, tuple[Any, list[bytes]]] = {}
        deliveries = []
        for key, value, *rest in records:
            headers: Headers = rest[0] if rest else []
            partition = self._partition(key)
            batch, keys = open_batches.get(partition) or open_batches.setdefault(
                partition, (self._producer.create_batch(), []))
            if batch.append(timestamp=None, key=key, value=value, headers=headers) is None:  # full: send, start anew
                if keys:
                    deliveries.append((keys, await self._submit(batch, partition, keep_going)))
                batch, keys = open_batches[partition] = (self._producer.create_batch(), [])
                if batch.append(timestamp=None, key=key, value=value, headers=headers) is None:
                    too_large = ValueError(f"a {len(value or b'')}-byte record does not fit in an empty record batch")
                    if keep_going is None:
                        raise too_large
                    deliveries.append(([key], _failed(too_large)))
                    continue
            keys.append(key)
        for partition, (batch, keys) in open_batches.items():
            if keys:
                deliveries.append((keys, await self._submit(batch, partition, keep_going)))
        return deliveries

    async def _submit(self, batch: Any, partition: int, keep_going: Callable[[], bool] | None = None
                      ) -> asyncio.Future[Any]:
        from aiokafka.errors import KafkaTimeoutError

        batch.close()
        while True:
            try:
                future: asyncio.Future[Any] = await self._producer.send_batch(batch, self._topic, partition=partition)
                return future
            except KafkaTimeoutError as exc:
                if keep_going is None:
                    raise
                if not keep_going():
                    return _failed(exc)
            except Exception as exc:
                if keep_going is None:
                    raise
                return _failed(exc)

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


def _failed(exc: BaseException) -> asyncio.Future[Any]:
    """A delivery future that already failed with ``exc``."""
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.set_exception(exc)
    return future
