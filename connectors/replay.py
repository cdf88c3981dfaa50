"""Rebuild the Neo4j graph from the events topic, the source of truth.

A fresh consumer with no group (nothing committed, no other reader disturbed)
is assigned the events topic's partitions and positioned at the chosen start:

* the beginning of every partition;
* given offsets (``PARTITION:OFFSET``; only the partitions named are read);
* a time: for each partition the first event with a timestamp at or after it
  (Kafka's ``offsets_for_times``).

It reads up to the end offsets seen when it started, folds the events offline
with :func:`provstream.core.fold.fold` (one state per session, exactly as
the worker does) and writes the triples with :meth:`Neo4jStore.write` in
batches of ``sink_batch_size`` messages, each as the sink writes one (split
between ``sink_writers`` parallel transactions that share no node; a writer
thread writes one batch while the next is read and folded). Undecodable or
invalid events are skipped and counted (the worker dead-letters the same
events).

Starting after the beginning, a session whose earlier events precede the
start is folded from what is read: its triples are those of the events read,
and its status counts only those steps. Because the status on a Question
never regresses to fewer steps, replaying part of the log over the live
graph adds nothing wrong; replaying part of the log after a reset gives the
graph of that part only.

``reset`` deletes the retrieval graph first: all of it (the CLI's
``--reset-graph``) or one user/collection scope.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kafka import KafkaConsumer
from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from provstream.codec import records as wire
from provstream.connectors.neo4j.rows import node_iris
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.connectors.sink import backoff, join_all, split_lanes
from provstream.core.fold import FoldState, fold
from provstream.core.triples import StepTriples
from provstream.crypto import KeyRing
from provstream.errors import ConfigError, DecodeError, InvalidEvent, ProvstreamError, StoreUnavailable
from provstream.keys import close_ring, open_ring
from provstream.security import check_kafka, kafka_python_options
from provstream.settings import Settings

WRITE_ATTEMPTS = 10


@dataclass(frozen=True)
class StartAt:
    """Where replay starts: the beginning, explicit partition offsets, or a time."""

    offsets: tuple[tuple[int, int], ...] = ()
    time: datetime | None = None

    @classmethod
    def beginning(cls) -> StartAt:
        return cls()


@dataclass(frozen=True)
class Reset:
    """Which part of the retrieval graph to delete first (``None`` = every user / collection)."""

    user: str | None = None
    collection: str | None = None


@dataclass
class ReplayStats:
    events: int = 0
    skipped: int = 0
    total: int = 0
    messages: int = 0
    triples: int = 0
    deleted: int = 0
    seconds: float = 0.0
    sessions: set[str] = field(default_factory=set)

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    @property
    def triples_per_second(self) -> float:
        return self.triples / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        return (f"replayed {self.events} events ({self.skipped} skipped) of {len(self.sessions)} sessions: "
                f"{self.triples} triples written in {self.seconds:.1f} s "
                f"({self.events_per_second:.0f} events/s, {self.triples_per_second:.0f} triples/s)")


# -- argument parsing (pure) -------------------------------------------------------

def parse_offset(text: str, option: str = "--from-offset") -> tuple[int, int]:
    """A ``PARTITION:OFFSET`` position: ``"2:1500"`` -> ``(2, 1500)``.

    :param text: what the user gave.
    :param option: the option it came from, for the error message.
    :raises ConfigError: not two non-negative numbers around a colon.
    """
    partition, sep, offset = text.partition(":")
    try:
        if not sep:
            raise ValueError(text)
        p, o = int(partition), int(offset)
    except ValueError as exc:
        raise ConfigError(f"{option} wants PARTITION:OFFSET (e.g. 0:1500), got {text!r}") from exc
    if p < 0 or o < 0:
        raise ConfigError(f"{option} wants non-negative numbers, got {text!r}")
    return p, o


def parse_time(text: str) -> datetime:
    """An ISO 8601 date/time; without a zone it is taken as UTC."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConfigError(f"--from-time wants an ISO 8601 time, got {text!r}") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


# -- the offline fold --------------------------------------------------------------

class OfflineFold:
    """Per-session fold state held in memory for one replay."""

    def __init__(self, ring: KeyRing | None = None) -> None:
        self.states: dict[str, FoldState] = {}
        self.ring = ring  # PROVSTREAM_ENCRYPT=1: sealed fields opened, or [erased] once their key is gone

    def add(self, data: bytes | None) -> StepTriples | None:
        """The step's triples, or ``None`` for an undecodable or invalid event."""
        try:
            if data is None:
                raise DecodeError("empty record value")
            event = wire.decode_event(data)
            state, msg = fold(self.states.get(event.session_id), event)
        except (DecodeError, InvalidEvent):
            return None
        self.states[event.session_id] = state
        return msg if self.ring is None else self.ring.open_triples(msg)


# -- Kafka positioning ---------------------------------------------------------------

def start_positions(consumer: KafkaConsumer, topic: str, start: StartAt) -> dict[TopicPartition, int]:
    partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        raise ProvstreamError(f"topic {topic} does not exist or has no partitions")
    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    if start.offsets:
        unknown = sorted(p for p, _ in start.offsets if p not in partitions)
        if unknown:
            raise ConfigError(f"topic {topic} has no partition {unknown[0]} (it has {len(partitions)})")
        return {TopicPartition(topic, p): o for p, o in start.offsets}
    if start.time is not None:
        ends = consumer.end_offsets(tps)
        found = consumer.offsets_for_times({tp: int(start.time.timestamp() * 1000) for tp in tps})
        return {tp: (found[tp].offset if found.get(tp) is not None else ends[tp]) for tp in tps}
    return consumer.beginning_offsets(tps)  # type: ignore[no-any-return]


def _open_consumer(settings: Settings) -> KafkaConsumer:
    check_kafka(settings, "reader")
    return KafkaConsumer(**kafka_python_options(settings, "reader"), group_id=None, client_id="provstream-replay",
                         enable_auto_commit=False, max_poll_records=settings.sink_batch_size)


# -- replay ------------------------------------------------------------------------

Progress = Callable[[ReplayStats], None]


def replay(settings: Settings, start: StartAt, *, reset: Reset | None = None,
           progress: Progress | None = None) -> ReplayStats:
    """Read the events topic from ``start`` to its current end and write the folded triples to Neo4j."""
    stats = ReplayStats()
    began = time.monotonic()
    try:
        consumer = _open_consumer(settings)
    except KafkaError as exc:
        raise ProvstreamError(f"cannot reach Kafka at {settings.kafka_bootstrap}: {exc}") from exc
    ring = open_ring(settings, "reader")
    try:
        with Neo4jStore(settings) as store:
            store.setup()
            if reset is not None:
                stats.deleted = store.reset_graph(user=reset.user, collection=reset.collection)
            _read_all(consumer, store, settings, start, stats, progress, ring)
    except KafkaError as exc:
        raise ProvstreamError(f"replay failed reading {settings.events_topic}: {exc}") from exc
    finally:
        consumer.close(autocommit=False)
        close_ring(ring)
    stats.seconds = time.monotonic() - began
    return stats


def _read_all(consumer: KafkaConsumer, store: Neo4jStore, settings: Settings, start: StartAt,
              stats: ReplayStats, progress: Progress | None, ring: KeyRing | None = None) -> None:
    """Read, fold and write; a writer thread writes batch *n* while batch *n + 1* is read and folded."""
    positions = start_positions(consumer, settings.events_topic, start)
    ends = consumer.end_offsets(list(positions))
    todo = {tp: ends[tp] for tp, offset in positions.items() if offset < ends[tp]}
    stats.total = sum(ends[tp] - positions[tp] for tp in todo)
    consumer.assign(list(todo))
    for tp in todo:
        consumer.seek(tp, positions[tp])
    folder, batch = OfflineFold(ring), []
    inflight: Future[None] | None = None
    lanes = ThreadPoolExecutor(max_workers=max(1, settings.sink_writers), thread_name_prefix="provstream-replay-lane")
    with lanes, ThreadPoolExecutor(max_workers=1, thread_name_prefix="provstream-replay-writer") as writer:
        while todo:
            for tp, records in consumer.poll(timeout_ms=500).items():
                for record in records:
                    if record.offset < ends[tp]:  # later events arrived after the replay started
                        batch += _fold_one(folder, record.value, stats)
            for tp in [tp for tp in todo if consumer.position(tp) >= ends[tp]]:
                del todo[tp]
            if len(batch) >= settings.sink_batch_size or (batch and not todo):
                if inflight is not None:
                    inflight.result()  # one batch in flight at a time; re-raises its error
                inflight, batch = writer.submit(_write, store, batch, stats, lanes, settings.sink_writers), []
            if progress is not None:
                progress(stats)
        if inflight is not None:
            inflight.result()


def _fold_one(folder: OfflineFold, value: bytes | None, stats: ReplayStats) -> list[StepTriples]:
    stats.events += 1
    msg = folder.add(value)
    if msg is None:
        stats.skipped += 1
        return []
    stats.sessions.add(msg.session_id)
    return [msg]


def _write(store: Neo4jStore, batch: Sequence[StepTriples], stats: ReplayStats, lanes: ThreadPoolExecutor,
           writers: int) -> None:
    """Write a batch as the sink does: split between ``writers`` parallel transactions that share no node."""
    parts = split_lanes(batch, writers, node_iris)
    if len(parts) > 1:
        join_all([lanes.submit(_write_part, store, part) for part in parts])
    else:
        _write_part(store, batch)
    stats.messages += len(batch)
    stats.triples += sum(len(m.triples) for m in batch)


def _write_part(store: Neo4jStore, part: Sequence[StepTriples]) -> None:
    for attempt in range(WRITE_ATTEMPTS):
        try:
            store.write(part)
            return
        except StoreUnavailable:
            if attempt == WRITE_ATTEMPTS - 1:
                raise
            time.sleep(backoff(attempt))
