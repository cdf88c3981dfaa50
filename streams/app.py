"""The Faust worker: events topic -> session table -> triples topic (+ dead letters).

Faust only wires things together; the folding is :func:`fold_batch` (pure).

* Source: ``settings.events_topic``, raw bytes, keyed by session id.
* State: the table ``sessions`` (key: session id bytes, value:
  ``FoldState.to_dict()``), in memory and backed by its changelog topic
  ``<app id>-sessions-changelog``, from which a restarted worker recovers.
* Output: one ``StepTriples`` message per event on ``settings.triples_topic``,
  keyed by session id; rejected messages go to ``settings.events_dlq_topic``
  with their original key, value and headers plus ``provstream.error`` and
  ``provstream.source.topic/partition/offset``.

Delivery is at-least-once: Faust commits an offset only after the producer
flushed the triples and changelog records of the events before it. After a
crash the uncommitted events are folded again; they give the same triples
(flagged ``duplicate``), so downstream MERGEs make it effectively once.

Batching (``stream.take_events``) writes the table outside Faust's
per-event context, so the table uses ``use_partitioner=True``: its changelog
partition comes from the key through the producer's murmur2 partitioner, the
same one the emitter uses, so with equal partition counts (checked at start)
a session's state stays co-partitioned with its events. Batching was chosen
by ``bench/bench_fold.py`` (batches of up to 1000 about twice the events/s of
per-event processing); ``--batch-size 1`` keeps per-event processing
available. The worker is CPU-bound in one Python process (figures and profile
in BENCHMARKS.md).

:func:`create_app` installs :mod:`.faust_fixes`: after a rebalance the events
partitions are seeked before they are resumed (Faust's order could drop an
event or stall the commits, see that module).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import faust
from faust.types import EventT, StreamT

from provstream.settings import Settings
from provstream.streams import faust_fixes
from provstream.streams.batch import Accepted, Message, Rejected, fold_batch
from provstream.streams.fold import FoldState

log = logging.getLogger("provstream.worker")

TABLE = "sessions"
ERROR_HEADER = "provstream.error"
SOURCE_HEADERS = ("provstream.source.topic", "provstream.source.partition", "provstream.source.offset")


@dataclass(frozen=True)
class WorkerOptions:
    """How the worker batches: ``batch_size`` 1 means per-event processing."""

    batch_size: int = 1000
    batch_within: float = 0.05
    datadir: Path | None = None


def datadir(settings: Settings, options: WorkerOptions) -> Path:
    """Faust's data directory: never the current directory."""
    return options.datadir or settings.stack_dir / "faust" / settings.worker_app_id


def create_app(settings: Settings, options: WorkerOptions = WorkerOptions()) -> faust.App:
    """A Faust app wired from ``settings`` (no environment reads here)."""
    faust_fixes.apply()
    app = faust.App(settings.worker_app_id, **_config(settings, options))
    events = _raw_topic(app, settings.events_topic)
    fold = _Fold(
        app=app,
        table=app.Table(TABLE, default=None, partitions=settings.partitions, key_type=bytes, use_partitioner=True),
        triples_topic=settings.triples_topic,
        dlq_topic=settings.events_dlq_topic,
        max_bytes=settings.max_message_bytes,
    )
    agent = fold.per_event if options.batch_size <= 1 else fold.batched(options.batch_size, options.batch_within)
    app.agent(events, name="provstream-fold")(agent)
    return app


def _raw_topic(app: faust.App, name: str) -> faust.TopicT:
    return app.topic(name, schema=RawSchema(key_serializer="raw", value_serializer="raw"))


class RawSchema(faust.Schema):
    """Keys and values as the bytes on the wire, as serializer ``raw`` gives them, minus its per-message lookups."""

    def loads_key(self, app: Any, message: Any, *, loads: Any = None, serializer: Any = None) -> Any:
        return message.key

    def loads_value(self, app: Any, message: Any, *, loads: Any = None, serializer: Any = None) -> Any:
        return message.value


def _config(settings: Settings, options: WorkerOptions) -> dict[str, Any]:
    return {
        "broker": [f"kafka://{host.strip()}" for host in settings.kafka_bootstrap.split(",")],
        "store": "memory://",
        "datadir": str(datadir(settings, options)),
        "topic_partitions": settings.partitions,
        "topic_replication_factor": 1,
        "topic_disable_leader": True,
        "processing_guarantee": "at_least_once",
        "consumer_auto_offset_reset": "earliest",
        "web_enabled": False,
        "table_standby_replicas": 0,
        "worker_redirect_stdouts": False,
        "broker_session_timeout": 10.0,
        "broker_heartbeat_interval": 1.0,
        "producer_linger_ms": 5,
        "producer_max_batch_size": 256 * 1024,
        "producer_max_request_size": max(settings.max_message_bytes + 64 * 1024, 1_048_576),
        "stream_buffer_maxsize": 8192,
    }


@dataclass
class _Fold:
    """The agent bodies: read the batch, fold it, write state, triples and dead letters.

    Triples and dead letters go straight to the producer. Faust flushes the
    producer before it commits offsets; a record that Kafka finally refused
    (after the producer's own retries) ends the process before any later
    commit, so its event is folded again on restart: nothing is skipped.
    """

    app: faust.App
    table: Any
    triples_topic: str
    dlq_topic: str
    max_bytes: int
    guard: OffsetGuard = field(default_factory=lambda: OffsetGuard())

    async def per_event(self, stream: StreamT) -> None:
        async for event in stream.events():
            await self.handle([event])

    def batched(self, size: int, within: float) -> Callable[[StreamT], Any]:
        async def agent(stream: StreamT) -> None:
            batches: AsyncIterator[Sequence[EventT]] = stream.take_events(size, within=within)  # type: ignore[attr-defined]
            async for batch in batches:
                await self.handle(batch)

        return agent

    async def handle(self, batch: Sequence[EventT]) -> None:
        """Fold and publish ``batch``; any failure here ends the process.

        Faust acks a batch's events even when its handler fails or is
        cancelled, and would then commit their offsets; exiting at once
        instead leaves them uncommitted, to be folded again on restart.
        """
        try:
            await self._handle(batch)
        except asyncio.CancelledError:  # only a send waiting on a full producer buffer can be interrupted
            log.critical("stopped while publishing a batch; exiting before its offsets are committed")
            os._exit(75)
        except Exception as exc:
            log.critical("cannot publish a batch (%s: %s); exiting before its offsets are committed",
                         type(exc).__name__, exc)
            os._exit(75)

    async def _handle(self, batch: Sequence[EventT]) -> None:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("batch of %d: %s", len(batch), offset_ranges(e.message for e in batch))
        committed = getattr(self.app.consumer, "_committed_offset", {})  # Faust's: next offset after the last commit
        skipped = self.guard.check(batch, committed.get)
        if skipped:
            log.critical("events were skipped before this batch (%s); exiting before its offsets are committed, "
                         "the restart reads them again", skipped)
            os._exit(75)
        result = fold_batch([Message(e.message.key, e.message.value) for e in batch], self._lookup, self.max_bytes)
        for session_id, state in result.changed.items():
            self.table[session_id.encode()] = state.to_dict()
        for event, outcome in zip(batch, result.outcomes, strict=True):
            delivery = await self._send(event.message, outcome)
            cast(asyncio.Future[Any], delivery).add_done_callback(_delivered)

    async def _send(self, m: Any, outcome: Accepted | Rejected) -> Awaitable[Any]:
        if isinstance(outcome, Accepted):
            key = outcome.session_id.encode()
            return await self.app.producer.send(self.triples_topic, key, outcome.triples, None, None, None)
        level = logging.ERROR if outcome.internal else logging.WARNING
        log.log(level, "dead letter %s/%d@%d: %s", m.topic, m.partition, m.offset, outcome.reason)
        headers = dead_letter_headers(m, outcome.reason)
        return await self.app.producer.send(self.dlq_topic, m.key, m.value, None, None, headers)

    def _lookup(self, session_id: str) -> FoldState | None:
        data = self.table.get(session_id.encode())
        return None if data is None else FoldState.from_dict(data)


class OffsetGuard:
    """Checks that the worker folds each partition's events without a hole.

    The events topic is neither compacted nor transactional, so offsets are
    contiguous; a batch whose first event of a partition lies past the next
    expected offset means records were skipped on the way here (Faust's
    rebalance handling has done so, see :mod:`.faust_fixes`). Faust would
    then commit over the hole, so the worker exits first instead. Expected:
    one past the last event folded in this consumer generation, or, for a
    partition's first event of a generation, the committed offset.
    """

    def __init__(self) -> None:
        self._generation: int | None = None
        self._next: dict[Any, int] = {}

    def check(self, batch: Sequence[EventT], committed: Callable[[Any], int | None]) -> str:
        """``""`` if ``batch`` continues every partition; else which offsets were skipped."""
        holes = []
        for event in batch:
            m = event.message
            generation = getattr(m, "generation_id", None)
            if generation != self._generation:
                self._generation, self._next = generation, {}
            expected = self._next.get(m.tp)
            if expected is None:
                expected = committed(m.tp)
            if expected is not None and m.offset > expected:
                holes.append(f"{m.topic}/{m.partition} {expected}..{m.offset - 1}")
            self._next[m.tp] = m.offset + 1
        return ", ".join(holes)


def offset_ranges(messages: Any) -> str:
    """``topic/partition first..last`` per partition of a batch (for debug logs)."""
    ranges: dict[tuple[str, int], list[int]] = {}
    for m in messages:
        ranges.setdefault((m.topic, m.partition), []).append(m.offset)
    return ", ".join(f"{t}/{p} {min(o)}..{max(o)} ({len(o)})" for (t, p), o in sorted(ranges.items()))


def _delivered(delivery: asyncio.Future[Any]) -> None:
    if not delivery.cancelled() and delivery.exception() is not None:
        log.critical("cannot deliver to Kafka (%s); exiting before the next commit", delivery.exception())
        os._exit(75)  # at-least-once: the uncommitted events are folded again on restart


def dead_letter_headers(message: Any, reason: str) -> list[tuple[str, bytes]]:
    """The original headers plus the reason and where the message came from."""
    original = list(message.headers.items()) if isinstance(message.headers, dict) else list(message.headers or [])
    source = (message.topic, message.partition, message.offset)
    return [*original, (ERROR_HEADER, reason[:4000].encode()),
            *((name, str(value).encode()) for name, value in zip(SOURCE_HEADERS, source, strict=True))]
