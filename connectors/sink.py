"""The Neo4j sink: the triples topic → Neo4j, batched, with a dead-letter topic.

Delivery guarantee: **at-least-once + idempotent writes = effectively once.**
Offsets are committed to Kafka only after Neo4j committed the batch (and any
dead-lettered record was acknowledged by Kafka), so a crash at any point
redelivers uncommitted records; every write is a ``MERGE`` on unique IRIs with
values from the message, so writing a record twice leaves the graph as
writing it once.

Per batch (up to ``sink_batch_size`` records; closed as soon as Neo4j has
finished the previous batch, and at the latest ``sink_batch_ms`` after its
first record, so an idle pipeline writes a step at once and a busy one writes
what arrived during the previous write; with ``sink_linger_ms``, a batch that
follows a write also waits until its first record is that old, so a moderate
stream of steps makes fewer, larger transactions): decode; undecodable records go to
``triples_dlq_topic``; the rest are written in one transaction. If Neo4j rejects the batch as bad data
(:class:`StoreError`), the batch is bisected to isolate the record(s) at fault,
which are dead-lettered while the others are written. If Neo4j is unavailable
(:class:`StoreUnavailable`), the sink keeps the batch, pauses its partitions
and retries with exponential backoff (capped at 5 s) without committing; it
stays in its consumer group meanwhile. Dead-letter records keep the original
key and value and carry the headers ``provstream.error`` (the reason) and
``provstream.source.topic`` / ``.partition`` / ``.offset``.

Writing batch *n* overlaps with polling and decoding batch *n + 1* (a writer
thread), committing batch *n*'s offsets overlaps with writing batch *n + 1*
(queued for the writer first: Neo4j never waits for Kafka's offset commit),
and a batch is split between ``sink_writers`` parallel transactions that
share no node (:func:`split_lanes`: a session's messages, and sessions a
sub-trace links, all in one of them, in order), so Neo4j executes one while
Python builds the next; offsets are still committed batch by batch, in order,
each after every part of its batch is written. A transient error in one part
(a deadlock with another sink's writes) retries that part. The sink scales out by partitions: run
several with the same ``sink_group``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, TypeVar

from kafka import ConsumerRebalanceListener, KafkaConsumer, KafkaProducer
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata, TopicPartition

from provstream.codec import records as wire
from provstream.connectors.neo4j import cypher as q
from provstream.connectors.neo4j.rows import node_iris, triple_count
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core.triples import StepTriples
from provstream.crypto import KeyRing
from provstream.errors import ConfigError, DecodeError, DeliveryFailed, ProvstreamError, StoreError, StoreUnavailable
from provstream.keys import close_ring, open_ring
from provstream.security import kafka_python_options
from provstream.settings import Settings
from provstream.topics import dead_letter_headers, retraction_of, source_of

log = logging.getLogger("provstream.sink")

BACKOFF_CAP = 5.0
POLL_RETRY_CAP = 1.0  # the longest pause between polls while Kafka is away
IDLE_POLL_MS = 200
BUSY_POLL_MS = 5
LANE_MIN = 50  # messages per parallel transaction below which a batch is not split
T = TypeVar("T")
Record = Any  # kafka.consumer.fetcher.ConsumerRecord
Failure = tuple[Record, str]


class _Stopped(Exception):
    """Shutdown was requested while waiting for Neo4j or Kafka."""


@dataclass
class SinkStats:
    messages: int = 0
    triples: int = 0
    rows: int = 0
    dead_lettered: int = 0
    batches: int = 0


# -- pure helpers ----------------------------------------------------------------

def backoff(attempt: int, cap: float = BACKOFF_CAP) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): 0.1, 0.2, 0.4, ... capped."""
    return float(min(cap, 0.1 * 2 ** min(attempt, 16)))


def decode_records(records: Sequence[Record]) -> tuple[list[tuple[Record, StepTriples]], list[Failure]]:
    """Split records into decoded messages and (record, reason) failures."""
    good: list[tuple[Record, StepTriples]] = []
    bad: list[Failure] = []
    for record in records:
        try:
            if not isinstance(record.value, bytes):
                raise DecodeError("empty record value")
            good.append((record, wire.decode_triples(record.value)))
        except DecodeError as exc:
            bad.append((record, f"undecodable triples message: {exc}"))
    return good, bad


def split_lanes(items: Sequence[T], lanes: int, nodes: Callable[[T], Iterable[str]],
                minimum: int = LANE_MIN) -> list[list[T]]:
    """Split items into at most ``lanes`` groups that share no node, for parallel transactions (pure).

    Items that touch a common node (a session's messages share its Question; a
    sub-trace links an agent's step to another session's node) are kept in one
    group, so two parallel transactions never lock the same node and cannot
    deadlock each other. Connected items form components; the largest are placed
    first, each in the group holding the fewest items so far.

    :param items: the batch's items (the sink's (record, message) pairs, replay's messages), in order.
    :param lanes: the most groups (``sink_writers``).
    :param nodes: the IRIs of the nodes writing an item touches (:func:`.rows.node_iris`).
    :param minimum: fewer groups so that each holds about this many items or more.
    :returns: the non-empty groups, each in batch order.

    Example: ``split_lanes(messages, 2, node_iris)`` of 400 messages of 40
    unrelated sessions is two lists that together hold the 400 messages, each
    session in one of them.
    """
    count = max(1, min(lanes, len(items) // max(1, minimum)))
    if count == 1:
        return [list(items)] if items else []
    parent: dict[str, str] = {}

    def find(iri: str) -> str:
        root = parent.setdefault(iri, iri)
        while parent[root] != root:
            root = parent[root]
        while parent[iri] != root:
            parent[iri], iri = root, parent[iri]
        return root

    firsts: list[str] = []
    for item in items:
        first = ""
        for iri in nodes(item):
            root = find(iri)
            if not first:
                first = root
            elif root != first:
                parent[root] = first
        firsts.append(first)
    components = [find(first) if first else "" for first in firsts]
    sizes: dict[str, int] = {}
    for component in components:
        sizes[component] = sizes.get(component, 0) + 1
    loads, lane_of = [0] * count, {}
    for component in sorted(sizes, key=lambda c: -sizes[c]):  # stable: ties in order of first appearance
        lane = loads.index(min(loads))
        lane_of[component] = lane
        loads[lane] += sizes[component]
    groups: list[list[T]] = [[] for _ in range(count)]
    for item, component in zip(items, components, strict=True):
        groups[lane_of[component]].append(item)
    return [group for group in groups if group]


def nodes_of_pair(item: tuple[Record, StepTriples]) -> list[str]:
    """The nodes a (record, message) pair's write touches (:func:`split_lanes`'s ``nodes`` in the sink)."""
    return node_iris(item[1])


def join_all(futures: Sequence[Future[None]]) -> None:
    """Wait for every future, then re-raise the first failure among them, if any."""
    failures = [future.exception() for future in futures]
    for failure in failures:
        if failure is not None:
            raise failure


def split_retractions(records: Sequence[Record]) -> tuple[list[tuple[str, str, str]], list[Record]]:
    """The sessions retraction records erase (``provstream erase``), and the other records."""
    retracted: list[tuple[str, str, str]] = []
    rest: list[Record] = []
    for record in records:
        scope = retraction_of(record.headers)
        if scope is None:
            rest.append(record)
        else:
            retracted.append(scope)
    return retracted, rest


def isolate_rejects(write: Callable[[list[T]], object], items: list[T]) -> list[tuple[T, StoreError]]:
    """Write ``items``; on :class:`StoreError` bisect to find and return the rejected ones.

    Everything not returned has been written. Other exceptions (e.g.
    :class:`StoreUnavailable`) propagate; rewriting is harmless because writes
    are idempotent.
    """
    if not items:
        return []
    try:
        write(items)
        return []
    except StoreError as exc:
        if len(items) == 1:
            return [(items[0], exc)]
        middle = len(items) // 2
        return isolate_rejects(write, items[:middle]) + isolate_rejects(write, items[middle:])


def next_offsets(records: Sequence[Record]) -> dict[TopicPartition, int]:
    """The offsets to commit after ``records``: last offset + 1 per partition."""
    out: dict[TopicPartition, int] = {}
    for r in records:
        tp = TopicPartition(r.topic, r.partition)
        out[tp] = max(out.get(tp, 0), r.offset + 1)
    return out


def dlq_headers(record: Record, reason: str) -> list[tuple[str, bytes]]:
    return dead_letter_headers(record.topic, record.partition, record.offset, reason)


# -- the sink --------------------------------------------------------------------

class _Revocations(ConsumerRebalanceListener):  # type: ignore[misc]
    """Drops pending records and pending commits of partitions this sink no longer owns.

    Only once the new assignment is known: kafka-python's eager rebalance
    "revokes" every partition, then keeps the fetch position of those it
    assigns again, so dropping their polled records at revocation would skip
    them for good (their later offsets get committed).
    """

    def __init__(self, sink: Sink) -> None:
        self._sink = sink
        self._revoked: set[TopicPartition] = set()

    def on_partitions_revoked(self, revoked: Any) -> None:
        self._revoked |= set(revoked)

    def on_partitions_assigned(self, assigned: Any) -> None:
        # Runs on kafka-python's IO loop: use the arguments, never call back into the consumer.
        gone, self._revoked = self._revoked - set(assigned), set()
        self._sink.pending = [r for r in self._sink.pending if TopicPartition(r.topic, r.partition) not in gone]
        for tp in gone:
            self._sink.forget_commit(tp)


class Sink:
    """One sink instance; :meth:`run` returns when ``stop`` is set.

    Two stages overlap: while a writer thread writes batch *n* into Neo4j, the
    consumer thread polls and decodes batch *n + 1*, queues it for the writer,
    then commits batch *n* once the writer reports it written (so the commit
    overlaps the next write). Only the consumer thread touches the consumer
    (kafka-python's consumer is not thread-safe); it also keeps the group
    membership alive (partitions paused) while a write is retrying.
    """

    def __init__(self, settings: Settings, store: Neo4jStore, consumer: KafkaConsumer, producer: KafkaProducer,
                 stop: threading.Event) -> None:
        self.settings, self.store, self.consumer, self.producer = settings, store, consumer, producer
        self.stop = stop
        self.ring: KeyRing | None = None  # PROVSTREAM_ENCRYPT=1: opens sealed literals (set by run_sink)
        self.pending: list[Record] = []
        self.stats = SinkStats()
        self._to_commit: dict[TopicPartition, int] = {}
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="provstream-sink-writer")
        self._lanes = ThreadPoolExecutor(max_workers=max(1, settings.sink_writers),
                                         thread_name_prefix="provstream-sink-lane")
        self._stats_lock = threading.Lock()
        self._poll_failures = 0  # polls in a row that Kafka failed

    def run(self) -> SinkStats:
        self.consumer.subscribe([self.settings.triples_topic], listener=_Revocations(self))
        # The topic's metadata, after subscribing and before the first join: kafka-python 3.0.12 otherwise
        # records its metadata snapshot only after the first join, rejoins because of it, and when a
        # poll() times out during that second join it never applies the assignment (the consumer then
        # holds unfetchable partitions with heartbeats off, spinning, until the group expels it).
        self.consumer.partitions_for_topic(self.settings.triples_topic)
        inflight: tuple[list[Record], Future[None]] | None = None
        try:
            while not self.stop.is_set():
                self._fill(inflight[1] if inflight is not None else None)
                if self.pending:
                    records, self.pending = self.pending, []
                    retracted, rest = split_retractions(records)
                    good, bad = decode_records(rest)
                    if self.ring is not None:  # sealed literals opened (or [erased]) before Neo4j sees them
                        good = [(record, self.ring.open_triples(msg)) for record, msg in good]
                    # The next write is queued before the last one's offsets are committed: the writer
                    # thread starts it as soon as that write ends, so Neo4j never waits for the commit.
                    written, inflight = inflight, (records, self._writer.submit(self._retrying, good, bad, retracted))
                    if written is not None:
                        self._settle(*written)
                elif inflight is not None and inflight[1].done():
                    self._settle(*inflight)
                    inflight = None
                elif self._to_commit:
                    self._commit([])
            if inflight is not None:
                self._settle(*inflight)
        except _Stopped:
            log.info("stopping with an unwritten batch; it stays uncommitted and will be redelivered")
        finally:
            # a batch queued behind one that was stopped is not started: it stays uncommitted anyway
            self._writer.shutdown(wait=True, cancel_futures=True)
            self._lanes.shutdown(wait=True)
        return self.stats

    def _fill(self, writing: Future[None] | None = None) -> None:
        """Poll until a full batch, stop, or an idle poll; with records, until ``writing`` is done
        (Neo4j is free for the next batch) and the first record is ``sink_linger_ms`` old, or
        ``sink_batch_ms`` after the first record.

        :param writing: the previous batch's write, if one is in flight (``None``: Neo4j is idle,
            and the batch closes at its first records whatever the linger).
        """
        size, deadline, lingered = self.settings.sink_batch_size, None, 0.0
        while not self.stop.is_set() and len(self.pending) < size:
            now = time.monotonic()
            if deadline is not None and (now >= deadline or writing is None or (writing.done() and now >= lingered)):
                return
            # While a write is in flight, poll in short slices so the batch closes soon after it ends.
            timeout = IDLE_POLL_MS if deadline is None else max(0, min(BUSY_POLL_MS, int((deadline - now) * 1000)))
            polled = self._poll(timeout, size - len(self.pending))
            for records in polled.values():
                self.pending.extend(records)
            if not self.pending:
                return  # idle: let the caller settle the batch in flight
            if deadline is None:
                first = time.monotonic()
                deadline = first + self.settings.sink_batch_ms / 1000
                lingered = first + self.settings.sink_linger_ms / 1000

    def _settle(self, records: list[Record], written: Future[None]) -> None:
        """Wait for a batch's write (keeping the group membership alive), then commit its offsets."""
        while True:
            try:
                written.result(timeout=1.0)  # re-raises _Stopped if stopped while retrying
                break
            except FutureTimeout:
                self._keep_alive()
        self._commit(records)
        self.stats.batches += 1
        self.stats.messages += len(records)

    def _keep_alive(self) -> None:
        """Poll with every partition paused, so a long Neo4j outage does not cost the group membership."""
        assigned = self.consumer.assignment()
        self.consumer.pause(*assigned)
        try:
            for records in self._poll(0).values():
                self.pending.extend(records)  # partitions assigned meanwhile: kept for the next batch
        finally:  # a rebalance during the poll may have moved some of them away
            self.consumer.resume(*(set(assigned) & self.consumer.assignment()))

    def _poll(self, timeout_ms: int, max_records: int | None = None) -> dict[Any, list[Record]]:
        """``consumer.poll``, riding out a Kafka outage.

        A retriable error (a broker, the group coordinator or the cluster's metadata out of reach: kafka-python
        raises it from ``poll``) is logged and, after a pause (0.1 s, doubling up to
        :data:`POLL_RETRY_CAP`), the poll returns nothing; the batch in flight and the records already
        taken stay as they are, and their offsets are committed once Kafka answers again.

        :param timeout_ms: as ``poll``'s.
        :param max_records: as ``poll``'s (``None``: the consumer's ``max_poll_records``).
        :returns: the records ``poll`` returned, by partition (empty after an error).
        :raises ProvstreamError: Kafka refused the poll for good (an authorization error, say).
        """
        try:
            polled: dict[Any, list[Record]] = self.consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        except KafkaError as exc:
            if not exc.retriable:
                raise ProvstreamError(f"cannot read {self.settings.triples_topic} from Kafka: {exc}") from exc
            delay = backoff(self._poll_failures, POLL_RETRY_CAP)
            self._poll_failures += 1
            log.warning("cannot poll Kafka (%s); polling again in %.1f s", exc, delay)
            self.stop.wait(delay)
            return {}
        self._poll_failures = 0
        return polled

    # -- writer thread ---------------------------------------------------------------

    def _retrying(self, good: list[tuple[Record, StepTriples]], bad: list[Failure],
                  retracted: Sequence[tuple[str, str, str]] = ()) -> None:
        """Write a batch (its sessions split between parallel transactions), then apply its retractions."""
        lanes = split_lanes(good, self.settings.sink_writers, nodes_of_pair)
        if len(lanes) > 1:
            join_all([self._lanes.submit(self._with_retries, self._write_and_dead_letter, lane, bad if i == 0 else [])
                      for i, lane in enumerate(lanes)])
        else:
            self._with_retries(self._write_and_dead_letter, good, bad)
        if retracted:
            self._with_retries(self._retract, retracted)

    def _with_retries(self, action: Callable[..., None], *args: Any) -> None:
        """Run ``action`` until it succeeds, backing off while Neo4j or Kafka is unavailable."""
        attempt = 0
        while True:
            try:
                return action(*args)
            except (StoreUnavailable, DeliveryFailed) as exc:
                delay = backoff(attempt)
                log.warning("%s; retrying in %.1f s (offsets not committed)", exc, delay)
                if self.stop.wait(delay):
                    raise _Stopped() from exc
                attempt += 1

    def _write_and_dead_letter(self, good: list[tuple[Record, StepTriples]], bad: list[Failure]) -> None:
        rejected = isolate_rejects(self._write, good)
        failures = bad + [(record, f"Neo4j rejected the message: {exc}") for (record, _), exc in rejected]
        if failures:
            self._dead_letter(failures)

    def _write(self, items: list[tuple[Record, StepTriples]]) -> None:
        messages = [msg for _, msg in items]
        began = time.monotonic()
        rows = self.store.write(messages, origins=[
            (source_of(record.headers), (record.partition, record.offset)) for record, _ in items])
        with self._stats_lock:
            self.stats.rows += rows
            self.stats.triples += triple_count(messages)
        log.info("wrote %d messages (%d triples) in %.2f s", len(messages), triple_count(messages),
                 time.monotonic() - began)

    def _retract(self, retracted: Sequence[tuple[str, str, str]]) -> None:
        """Erased sessions (retraction records, after their triples): delete their nodes, forget their keys."""
        for user, collection, session in retracted:
            if self.ring is not None:
                self.ring.forget(user, collection, session)
            deleted, _ = self.store.erase(user=user, collection=collection, session=session)
            log.info("retracted session %s: %d nodes deleted", session, deleted)

    def _dead_letter(self, failures: list[Failure]) -> None:
        futures = [
            self.producer.send(self.settings.triples_dlq_topic, key=record.key, value=record.value,
                               headers=dlq_headers(record, reason))
            for record, reason in failures
        ]
        self.producer.flush()
        try:
            for future in futures:
                future.get(timeout=30)
        except KafkaError as exc:
            raise DeliveryFailed(f"cannot dead-letter to {self.settings.triples_dlq_topic}: {exc}") from exc
        for record, reason in failures:
            log.warning("dead-lettered %s[%s]@%s: %s", record.topic, record.partition, record.offset, reason)
        with self._stats_lock:
            self.stats.dead_lettered += len(failures)

    # -- consumer thread ---------------------------------------------------------------

    def forget_commit(self, tp: TopicPartition) -> None:
        self._to_commit.pop(tp, None)

    def _commit(self, records: list[Record]) -> None:
        """Commit the offsets after ``records`` (plus any earlier commit that failed) for owned partitions."""
        for tp, offset in next_offsets(records).items():
            self._to_commit[tp] = max(offset, self._to_commit.get(tp, 0))
        owned = self.consumer.assignment()
        offsets = {tp: OffsetAndMetadata(o, "", -1) for tp, o in self._to_commit.items() if tp in owned}
        if not offsets:
            self._to_commit.clear()
            return
        try:
            self.consumer.commit(offsets)
            self._to_commit.clear()
        except (CommitFailedError, KafkaError) as exc:
            # Written but not committed yet: tried again with the next commit; until then a restart
            # redelivers these records, which MERGE makes harmless.
            log.warning("offset commit failed (%s); retrying with the next commit", exc)


# -- wiring ----------------------------------------------------------------------

def open_consumer(settings: Settings) -> KafkaConsumer:
    return KafkaConsumer(
        **kafka_python_options(settings, "sink"), group_id=settings.sink_group, client_id="provstream-sink",
        enable_auto_commit=False, auto_offset_reset="earliest", max_poll_records=settings.sink_batch_size,
        # A sink that died (SIGKILL) holds its partitions until its session times out: keep that short.
        session_timeout_ms=10_000, heartbeat_interval_ms=2_000,
    )


def open_producer(settings: Settings) -> KafkaProducer:
    return KafkaProducer(**kafka_python_options(settings, "sink"), client_id="provstream-sink-dlq", acks="all",
                         max_request_size=settings.max_message_bytes + 64 * 1024)


def connect(what: str, opener: Callable[[], T], stop: threading.Event,
            retry_on: tuple[type[Exception], ...] = (KafkaError,)) -> T:
    """Call ``opener`` until it succeeds, backing off while it raises one of ``retry_on``."""
    attempt = 0
    while True:
        try:
            return opener()
        except ConfigError:
            raise  # a bad certificate, protocol or password: retrying cannot help
        except retry_on as exc:
            delay = backoff(attempt)
            log.warning("cannot reach %s (%s); retrying in %.1f s", what, exc, delay)
            if stop.wait(delay):
                raise _Stopped() from exc
            attempt += 1


def _ready_store(store: Neo4jStore, lanes: int) -> None:
    store.open()
    store.setup()
    store.warm(lanes)


def run_sink(settings: Settings, stop: threading.Event,
             on_ready: Callable[[str], None] = lambda write: None) -> SinkStats:
    """Connect (waiting for Neo4j and Kafka), then sink until ``stop`` is set.

    :param on_ready: called once connected, with how batches are written
        (``"procedure provstream.writeBatch"`` or ``"Cypher statement"``).
    """
    from provstream.topics import ensure_topics

    store = Neo4jStore(settings)
    try:
        connect("Neo4j", lambda: _ready_store(store, max(1, settings.sink_writers)), stop, (StoreUnavailable,))
        connect("Kafka", lambda: ensure_topics(settings, role="sink"), stop, (KafkaError, ProvstreamError))
        consumer = connect("Kafka", lambda: open_consumer(settings), stop)
        try:
            producer = connect("Kafka", lambda: open_producer(settings), stop)
            try:
                ring = open_ring(settings, "sink")
                on_ready(f"procedure {q.PROCEDURE_NAME}" if store.write_statement == q.WRITE_BATCH_PROCEDURE
                         else "Cypher statement")
                sink = Sink(settings, store, consumer, producer, stop)
                sink.ring = ring
                try:
                    return sink.run()
                finally:
                    close_ring(ring)
            finally:
                producer.close(timeout=10)
        finally:
            consumer.close(autocommit=False)
    except _Stopped:
        return SinkStats()
    finally:
        store.close()
