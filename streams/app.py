"""The Faust worker: events topic -> session table -> triples topic (+ dead letters).

Faust only wires things together; the folding is :func:`fold_batch` (pure).

* Source: ``settings.events_topic``, raw bytes, keyed by session id.
* State: the table ``sessions`` (key: session id bytes, value:
  ``FoldState.to_dict()``), in memory and backed by its changelog topic
  ``<app id>-sessions-changelog``, from which a restarted worker recovers.
  A session unchanged for ``settings.session_retention_s`` is forgotten
  (:mod:`.expiry`), so the table holds the recent sessions only.
* Output: one ``StepTriples`` message per event on ``settings.triples_topic``,
  keyed by session id; rejected messages go to ``settings.events_dlq_topic``
  with their original key, value and headers plus ``provstream.error`` and
  ``provstream.source.topic/partition/offset``.

Delivery is at-least-once: Faust commits an offset only after the producer
flushed the triples and changelog records of the events before it. After a
crash the uncommitted events are folded again; they give the same triples
(flagged ``duplicate``), so downstream MERGEs make it effectively once.

Batching (:func:`.take.take_ready`: Faust's ``take_events``, but a batch also
closes once the stream has no further event queued) writes the table outside Faust's
per-event context, so the table uses ``use_partitioner=True``: its changelog
partition comes from the key through the producer's murmur2 partitioner, the
same one the emitter uses, so with equal partition counts (checked at start)
a session's state stays co-partitioned with its events. ``--batch-size 1``
keeps per-event processing available.

Throughput (figures in BENCHMARKS.md, "Fold worker" and "End to end"): triples
and the table's changelog records go out as one record batch per partition
(:mod:`.publish`; the table is written beside Faust's per-key path, with the
same records, see :meth:`_Fold._store`); Faust's fetcher
delivers a message without creating tasks when nothing has to wait
(:mod:`.faust_speedups`). The worker folds in its own process; with
``PROVSTREAM_WORKER_FOLD_PROCESS=1`` batches are folded in a helper process
(:mod:`.offload`) while the agent takes the next batch (no faster end to end
on two cores, where the helper's core is the one Neo4j and the sink need; more
workers scale out instead).

:func:`create_app` installs :mod:`.faust_fixes`: after a rebalance the events
partitions are seeked before they are resumed, and records the consumer
thread fetched for a partition Faust was not reading are read again (either
could drop events or leave a restarted worker idle, see that module).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import faust
from faust.serializers import codecs as faust_codecs
from faust.types import EventT, StreamT

from provstream import topics
from provstream.core.fold import FoldState
from provstream.publish import BatchPublisher
from provstream.security import faust_options
from provstream.settings import Settings
from provstream.streams import faust_fence, faust_fixes, faust_speedups, spans_agent
from provstream.streams.batch import Accepted, Message, Outcome, Rejected, fold_batch
from provstream.streams.expiry import TOUCHED, idle_keys, sweep_interval
from provstream.streams.offload import FoldProcess, StateDict, from_wire
from provstream.streams.take import take_ready

log = logging.getLogger("provstream.worker")
Folded = tuple[tuple[Outcome, ...], dict[str, StateDict]]  # outcomes in batch order, changed session states

TABLE = "sessions"


@dataclass(frozen=True)
class WorkerOptions:
    """How the worker batches: ``batch_size`` 1 means per-event processing.

    ``fold_process``: fold batches in a helper process (:mod:`.offload`);
    off (the default), or with per-event processing, the worker folds in its own process.
    """

    batch_size: int = 2000
    batch_within: float = 0.05
    datadir: Path | None = None
    fold_process: bool = False


def datadir(settings: Settings, options: WorkerOptions) -> Path:
    """Faust's data directory: never the current directory."""
    return options.datadir or settings.stack_dir / "faust" / settings.worker_app_id


def create_app(settings: Settings, options: WorkerOptions = WorkerOptions()) -> faust.App:
    """A Faust app wired from ``settings`` (no environment reads here)."""
    faust_fence.check_versions()
    faust_fixes.apply()
    faust_speedups.apply()
    app = faust.App(settings.worker_app_id, **_config(settings, options))
    faust_speedups.without_monitor(app)
    events = _raw_topic(app, settings.events_topic)
    fold = _Fold(
        app=app,
        table=app.Table(TABLE, default=None, partitions=settings.partitions, key_type=bytes, use_partitioner=True,
                        extra_topic_configs=topics.replication_configs(settings)),
        triples_topic=settings.triples_topic,
        dlq_topic=settings.events_dlq_topic,
        max_bytes=settings.max_message_bytes,
        helper=FoldProcess() if options.fold_process and options.batch_size > 1 else None,
    )
    agent = fold.per_event if options.batch_size <= 1 else fold.batched(options.batch_size, options.batch_within)
    app.agent(events, name="provstream-fold")(agent)
    if settings.session_retention_s > 0:
        fold.retention_s = settings.session_retention_s
        app.timer(sweep_interval(settings.session_retention_s), name="provstream-forget-idle")(fold.forget_idle)
    spans_agent.attach(app, settings)  # OTLP spans -> events (docs/integrations.md)
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
        "topic_replication_factor": settings.replication_factor,  # the changelog's too
        "topic_disable_leader": True,
        "processing_guarantee": "at_least_once",
        "consumer_auto_offset_reset": "earliest",
        "web_enabled": False,
        "table_standby_replicas": 0,
        "worker_redirect_stdouts": False,
        "broker_session_timeout": 10.0,
        "broker_heartbeat_interval": 1.0,
        "producer_linger_ms": 5,
        "producer_partitioner": topics.KeyPartitioner(),  # the changelog's: murmur2 in C
        "producer_max_batch_size": 256 * 1024,
        "producer_max_request_size": max(settings.max_message_bytes + 64 * 1024, 1_048_576),
        "stream_buffer_maxsize": 8192,
        **faust_options(settings, "worker"),  # TLS/SASL for its consumer, producer and changelog
    }


@dataclass
class _Fold:
    """The agent bodies: read the batch, fold it, write state, triples and dead letters.

    Triples, changelog records and dead letters go straight to the producer. Faust flushes the
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
    publisher: BatchPublisher | None = None
    helper: FoldProcess | None = None
    retention_s: float = 0.0  # 0: sessions are never forgotten
    started: float = field(default_factory=time.time)

    changelog: BatchPublisher | None = None
    # held while changelog records are submitted, and by forget_idle from choosing the sessions to drop
    # until their tombstones are submitted: the changelog gets the table's changes in the order made
    changelog_lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def __post_init__(self) -> None:
        # the table's own value codec (json): its changelog records are the bytes Faust would send
        self.state_codec = faust_codecs.get_codec(self.table.value_serializer)

    async def per_event(self, stream: StreamT) -> None:
        async for event in stream.events():
            await self.handle([event])

    def batched(self, size: int, within: float) -> Callable[[StreamT], Any]:
        async def agent(stream: StreamT) -> None:
            # a batch changes up to ``size`` table keys at once; Faust's default (100 pending changelog
            # records) would throttle delivery with a warning after every batch
            self.app.producer.buffer.max_messages = max(self.app.producer.buffer.max_messages, 2 * size)
            # take_ready (as take_events) acks each batch it yielded (below: once published). It also sets
            # enable_acks back when it closes, after which the stream's background drainer acks every event
            # it still takes from the queue, folded or not, and a stop would commit over them; so acks stay
            # off for good.
            stream.enable_acks = False
            batches: AsyncIterator[Sequence[EventT]] = take_ready(stream, size, within)
            if self.helper is None:
                async for batch in batches:
                    await self.handle(batch)
                return
            await self.helper.start()
            try:
                await self._pipelined(batches)
            finally:
                await self.helper.close()

        return agent

    async def _pipelined(self, batches: AsyncIterator[Sequence[EventT]]) -> None:
        """Take the next batch while the helper process folds the one before.

        ``take_ready`` acks a batch's events when the next batch is asked
        for; each message is given one extra reference first, released by
        :meth:`_process` only once the batch is published, so Faust counts
        the events as processed (and may commit their offsets) no earlier
        than before. On a stop, the batches already taken are finished first.
        """
        queue: asyncio.Queue[Sequence[EventT] | None] = asyncio.Queue(maxsize=1)
        processing = asyncio.ensure_future(self._process(queue))
        try:
            async for batch in batches:
                for event in batch:
                    event.message.incref()
                await _put_unless_done(queue, batch, processing)
        finally:
            if not processing.done():  # finish what was taken, then stop (nothing taken is dropped)
                await _put_unless_done(queue, None, processing)
                await processing

    async def _process(self, queue: asyncio.Queue[Sequence[EventT] | None]) -> None:
        """Fold, store and publish the queued batches in order; any failure ends the process (see :meth:`handle`).

        The next batch goes to the helper as soon as this one's states are in
        the table (its folding needs them), so it is folded while this one
        is published.
        """
        try:
            await self._process_in_order(queue)
        except BaseException as exc:  # noqa: BLE001 - nothing of an unfinished batch may be committed
            log.critical("cannot publish a batch (%s: %s); exiting before its offsets are committed",
                         type(exc).__name__, exc)
            os._exit(75)

    async def _process_in_order(self, queue: asyncio.Queue[Sequence[EventT] | None]) -> None:
        consumer = self.app.consumer
        batch = await queue.get()
        folding = self._fold_in_helper(batch) if batch is not None else None
        while batch is not None and folding is not None:
            outcomes, changed = await folding
            changelog = self._store(changed)
            ready = not queue.empty()
            upcoming = queue.get_nowait() if ready else None
            if upcoming is not None:
                folding = self._fold_in_helper(upcoming)
            await self._publish(batch, outcomes, changelog)
            for event in batch:
                event.message.ack(consumer)
            if not ready:
                upcoming = await queue.get()
                folding = self._fold_in_helper(upcoming) if upcoming is not None else None
            batch = upcoming

    async def handle(self, batch: Sequence[EventT]) -> None:
        """Fold (in this process) and publish ``batch``; any failure here ends the process.

        Faust acks a batch's events even when its handler fails or is
        cancelled, and would then commit their offsets; exiting at once
        instead leaves them uncommitted, to be folded again on restart.
        """
        try:
            self._check(batch)
            result = fold_batch([Message(e.message.key, e.message.value) for e in batch], self._lookup, self.max_bytes)
            changelog = self._store({sid: state.to_dict() for sid, state in result.changed.items()})
            await self._publish(batch, result.outcomes, changelog)
        except asyncio.CancelledError:  # only a send waiting on a full producer buffer can be interrupted
            log.critical("stopped while publishing a batch; exiting before its offsets are committed")
            os._exit(75)
        except Exception as exc:
            log.critical("cannot publish a batch (%s: %s); exiting before its offsets are committed",
                         type(exc).__name__, exc)
            os._exit(75)

    def _check(self, batch: Sequence[EventT]) -> None:
        """End the process if events were skipped before ``batch`` (see :class:`OffsetGuard`)."""
        if log.isEnabledFor(logging.DEBUG):
            log.debug("batch of %d: %s", len(batch), offset_ranges(e.message for e in batch))
        committed = faust_fence.committed_offsets(self.app.consumer)
        skipped = self.guard.check(batch, committed.get)
        if skipped:
            log.critical("events were skipped before this batch (%s); exiting before its offsets are committed, "
                         "the restart reads them again", skipped)
            os._exit(75)

    def _fold_in_helper(self, batch: Sequence[EventT]) -> asyncio.Future[Folded]:
        """Start folding ``batch`` in the helper, with the states the table holds now."""
        assert self.helper is not None
        self._check(batch)
        messages = [(e.message.key, e.message.value) for e in batch]
        states = {sid: self.table.get(sid.encode()) for sid in {_session_of(key) for key, _ in messages} if sid}
        return asyncio.ensure_future(self._helper_fold(self.helper, messages, states))

    async def _helper_fold(
        self, helper: FoldProcess, messages: list[tuple[bytes | None, bytes | None]], states: dict[str, Any],
    ) -> Folded:
        while True:
            folded = await helper.fold(messages, states, self.max_bytes)
            if not isinstance(folded, set):
                return from_wire(folded[0]), folded[1]
            # sessions other than the keys' (the fold rejects those events, so this is a safety net)
            states.update((sid, self.table.get(sid.encode())) for sid in folded)

    def _store(self, changed: dict[str, StateDict]) -> list[tuple[bytes, bytes | None]]:
        """Put the changed sessions' states in the table; return their changelog records, for :meth:`_publish`.

        What ``table[key] = state`` does in Faust (``Table.on_key_set``: one changelog record through its
        producer buffer, then the store), with the records sent as whole record batches like the triples:
        the same key and value bytes, on the same partition, under the same guarantee (Faust flushes the
        producer before it commits the events' offsets). The store is Faust's memory store, for which that
        record's delivery callback does nothing (``faust_fence`` holds the functions this follows).

        :param changed: session id -> its new state (``FoldState.to_dict()``), stamped here with ``touched``.
        :returns: the changelog records ``(key, value)``, in the order of ``changed``.
        """
        now = time.time()
        store = self.table.data
        records: list[tuple[bytes, bytes | None]] = []
        for session_id, state in changed.items():
            state[TOUCHED] = now  # for forget_idle; the fold ignores it
            key = session_id.encode()
            store[key] = state
            records.append((key, self.state_codec.dumps(state)))
        return records

    async def _publish(self, batch: Sequence[EventT], outcomes: Sequence[Outcome],
                       changelog: list[tuple[bytes, bytes | None]]) -> None:
        await self._send_changelog(changelog)
        triples = [(o.session_id.encode(), o.triples,  # the headers name the event: offset lineage
                    topics.lineage_headers(e.message.topic, e.message.partition, e.message.offset))
                   for e, o in zip(batch, outcomes, strict=True) if isinstance(o, Accepted)]
        for delivery in await self._publisher().publish(triples):
            delivery.add_done_callback(_delivered)
        for event, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Rejected):
                cast(asyncio.Future[Any], await self._dead_letter(event.message, outcome)).add_done_callback(_delivered)

    def _publisher(self) -> BatchPublisher:
        if self.publisher is None:
            self.publisher = BatchPublisher(faust_fence.raw_producer(self.app), self.triples_topic)
        return self.publisher

    async def _send_changelog(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Publish the table's changelog records (a value of ``None`` is a tombstone); a refused one ends the
        process before the next commit, as a refused triples record does."""
        if records:
            async with self.changelog_lock:
                await self._submit_changelog(records)

    async def _submit_changelog(self, records: list[tuple[bytes, bytes | None]]) -> None:
        if self.changelog is None:
            topic = self.table.changelog_topic.get_topic_name()
            self.changelog = BatchPublisher(faust_fence.raw_producer(self.app), topic)
        for delivery in await self.changelog.publish(records):
            delivery.add_done_callback(_delivered)

    async def _dead_letter(self, m: Any, outcome: Rejected) -> Awaitable[Any]:
        level = logging.ERROR if outcome.internal else logging.WARNING
        log.log(level, "dead letter %s/%d@%d: %s", m.topic, m.partition, m.offset, outcome.reason)
        headers = dead_letter_headers(m, outcome.reason)
        return await self.app.producer.send(self.dlq_topic, m.key, m.value, None, None, headers)

    async def forget_idle(self, *_app: Any) -> None:
        """Drop the sessions unchanged for the retention (see :mod:`.expiry`); not while partitions move.

        Faust's timer passes the app; one sweep walks the whole table.
        """
        if not self.retention_s or self.app.rebalancing or faust_fence.in_recovery(self.app):
            return
        async with self.changelog_lock:
            if self.app.rebalancing or faust_fence.in_recovery(self.app):  # began while a batch was published
                return
            idle = idle_keys(self.table.items(), time.time(), self.retention_s, unstamped=self.started)
            store = self.table.data
            for key in idle:
                del store[key]
            if idle:  # tombstones on the changelog, through the publisher the states go through
                await self._submit_changelog([(key, None) for key in idle])
        if idle:
            log.info("forgot %d session(s) unchanged for %ds; %d kept", len(idle), self.retention_s, len(self.table))

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


async def _put_unless_done(queue: asyncio.Queue[Any], item: Any, task: asyncio.Future[Any]) -> None:
    """``queue.put(item)``, or ``task``'s exception if it ends first (it takes from that queue)."""
    put = asyncio.ensure_future(queue.put(item))
    await asyncio.wait((put, task), return_when=asyncio.FIRST_COMPLETED)
    if not put.done():
        put.cancel()
        task.result()
        raise RuntimeError("the batch processor stopped")


def _session_of(key: bytes | None) -> str | None:
    """The session a message key names (the emitter keys events by session id), if it is text."""
    try:
        return None if key is None else key.decode()
    except UnicodeDecodeError:
        return None


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
    """The original headers plus the reason and where the message came from (:func:`topics.dead_letter_headers`)."""
    original = list(message.headers.items()) if isinstance(message.headers, dict) else list(message.headers or [])
    return topics.dead_letter_headers(message.topic, message.partition, message.offset, reason, original)
