"""A trace as the graph held it at a past moment: its session's events up to that point, folded again.

The events topic is the source of truth and the fold is deterministic, so
the graph of a session *as of* a time or an events-topic offset is the fold
of that session's events up to there. The session's partition is the one the
producers chose (murmur2 of the session id, :func:`provstream.topics.partition_for`);
only that partition is read, from its beginning up to the bound found with
Kafka's ``offsets_for_times`` (a time) or given (``PARTITION:OFFSET``), and
only records keyed by the session are decoded. Undecodable or invalid events
are skipped, as the worker dead-letters them.

:class:`AsOfSource` has the store and reader ports of
:func:`provstream.read.loader.load_trace`, so the as-of trace is rendered
(text, JSON, pictures, export) exactly like the live one; a sub-trace on
another partition is read as of the same moment (with an offset, as of that
record's timestamp).

Example::

    with AsOfSource(settings, AsOf.parse(time="2026-12-04T10:15:00Z")) as source:
        trace = load_trace(source, source, "urn:trustgraph:agent:s1", user="trustgraph", collection="default")
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from provstream.codec import records as wire
from provstream.connectors.neo4j.reader import TraceReader
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.connectors.replay import parse_offset
from provstream.core import vocab as v
from provstream.core.fold import FoldState, fold
from provstream.core.triples import StepTriples, Triple
from provstream.crypto import KeyRing
from provstream.errors import ConfigError, DecodeError, InvalidEvent, ProvstreamError, TraceNotFound
from provstream.keys import close_ring, open_ring
from provstream.read.loader import StatusSource, TripleSource
from provstream.read.model import Completeness
from provstream.security import kafka_python_options
from provstream.settings import Settings
from provstream.topics import partition_for


@dataclass(frozen=True)
class AsOf:
    """The moment: a time (events with a timestamp up to and including it), or an events-topic offset (inclusive)."""

    time: datetime | None = None
    offset: tuple[int, int] | None = None

    @classmethod
    def parse(cls, time: str | None = None, offset: str | None = None) -> AsOf:
        """From ``--as-of`` (ISO 8601; no zone means UTC) or ``--as-of-offset PARTITION:OFFSET``.

        :raises ConfigError: an unreadable value, or both given.

        >>> AsOf.parse(offset="2:15").offset
        (2, 15)
        """
        if (time is None) == (offset is None):
            raise ConfigError("give one of --as-of TIME or --as-of-offset PARTITION:OFFSET")
        if time is not None:
            try:
                moment = datetime.fromisoformat(time.replace("Z", "+00:00") if time.endswith("Z") else time)
            except ValueError as exc:
                raise ConfigError(f"--as-of wants an ISO 8601 time such as 2026-12-04T10:15:00Z, got {time!r}") \
                    from exc
            return cls(time=moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC))
        assert offset is not None
        return cls(offset=parse_offset(offset, "--as-of-offset"))

    def describe(self) -> str:
        if self.time is not None:
            return "as of " + self.time.isoformat().replace("+00:00", "Z")
        assert self.offset is not None
        return f"as of events offset {self.offset[0]}:{self.offset[1]}"


class AsOfSource:
    """The store and reader ports of :func:`~provstream.read.loader.load_trace`, answered from the events topic."""

    def __init__(self, settings: Settings, moment: AsOf) -> None:
        self._settings = settings
        self._moment = moment
        self._consumer: KafkaConsumer | None = None
        self._partitions: list[int] = []
        self._records: dict[tuple[int, int], list[tuple[bytes | None, bytes | None]]] = {}
        self._folded: dict[str, list[StepTriples]] = {}
        self._time_ms: int | None = None
        self._ring: KeyRing | None = None  # PROVSTREAM_ENCRYPT=1: sealed fields opened, or [erased]

    # -- lifecycle -------------------------------------------------------------------

    def open(self) -> AsOfSource:
        topic = self._settings.events_topic
        try:
            self._consumer = KafkaConsumer(**kafka_python_options(self._settings, "reader"), group_id=None,
                                           enable_auto_commit=False, client_id="provstream-as-of")
            self._partitions = sorted(self._consumer.partitions_for_topic(topic) or ())
        except KafkaError as exc:
            self.close()
            raise ProvstreamError(f"cannot reach Kafka at {self._settings.kafka_bootstrap}: {exc}") from exc
        self._ring = open_ring(self._settings, "reader")
        if not self._partitions:
            self.close()
            raise ProvstreamError(f"topic {topic} does not exist (run `provstream stack up` or create it)")
        if self._moment.offset is not None and self._moment.offset[0] not in self._partitions:
            self.close()
            raise ConfigError(f"topic {topic} has no partition {self._moment.offset[0]} "
                              f"(it has {len(self._partitions)})")
        return self

    def close(self) -> None:
        close_ring(self._ring)
        self._ring = None
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __enter__(self) -> AsOfSource:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- the ports ---------------------------------------------------------------------

    def trace_triples(self, question_iri: str, *, user: str, collection: str) -> set[Triple]:
        """Every triple of the session's steps folded up to the moment.

        :raises TraceNotFound: the session had no event in that scope by then.
        """
        return {t for m in self.messages(question_iri, user=user, collection=collection) for t in m.triples}

    def completeness(self, question_iri: str, *, user: str, collection: str) -> Completeness:
        """The session's status after its last event up to the moment."""
        return Completeness.from_status(self.messages(question_iri, user=user, collection=collection)[-1].status)

    def subtrace_question(self, end_iri: str, *, user: str, collection: str) -> str | None:
        """The Question IRI of the sub-trace whose Synthesis / Conclusion is ``end_iri``, if it existed by then."""
        question = v.subtrace_question_iri(end_iri)
        if question is None:
            return None
        try:
            self.messages(question, user=user, collection=collection)
        except TraceNotFound:
            return None
        return question

    # -- folding -----------------------------------------------------------------------

    def messages(self, question_iri: str, *, user: str, collection: str) -> list[StepTriples]:
        """The session's triples messages up to the moment, in log order (a duplicate gives one again)."""
        parsed = v.parse_question_iri(question_iri)
        if parsed is None:
            raise ProvstreamError(f"{question_iri!r} is not a trace IRI")
        session = parsed[1]
        if session not in self._folded:
            self._folded[session] = self._fold(session)
        found = [m for m in self._folded[session] if m.user == user and m.collection == collection
                 and m.question == question_iri]
        if not found:
            raise TraceNotFound(f"{question_iri} had no step for user {user!r} in collection {collection!r} "
                                f"{self._moment.describe()}")
        return found

    def session_partition(self, session_id: str) -> int:
        """The events-topic partition of the session (murmur2 of its id, as the producers chose)."""
        return partition_for(session_id.encode(), len(self._partitions))

    def _fold(self, session: str) -> list[StepTriples]:
        key = session.encode()
        state: FoldState | None = None
        out: list[StepTriples] = []
        for record_key, value in self._read(self.session_partition(session)):
            if record_key != key or value is None:
                continue
            try:
                event = wire.decode_event(value)
                if event.session_id != session:
                    continue
                state, msg = fold(state, event)
            except (DecodeError, InvalidEvent):
                continue
            out.append(msg if self._ring is None else self._ring.open_triples(msg))
        return out

    def _read(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        """The (key, value) of the partition's records from its beginning up to the moment (cached)."""
        consumer = self._consumer
        if consumer is None:
            raise ProvstreamError("AsOfSource is not open")
        tp = TopicPartition(self._settings.events_topic, partition)
        try:
            first, end = consumer.beginning_offsets([tp])[tp], consumer.end_offsets([tp])[tp]
            stop = min(self._stop(consumer, tp), end)
            if (partition, stop) in self._records:
                return self._records[(partition, stop)]
            records: list[tuple[bytes | None, bytes | None]] = []
            if stop > first:
                consumer.assign([tp])
                consumer.seek(tp, first)
                while consumer.position(tp) < stop:
                    for batch in consumer.poll(timeout_ms=500).values():
                        records += [(r.key, r.value) for r in batch if r.offset < stop]
        except KafkaError as exc:
            raise ProvstreamError(f"reading {self._settings.events_topic} failed: {exc}") from exc
        self._records[(partition, stop)] = records
        return records

    def _stop(self, consumer: KafkaConsumer, tp: TopicPartition) -> int:
        """The first offset past the moment in ``tp`` (``offsets_for_times``; an offset given bounds its own
        partition and, through that record's timestamp, the others)."""
        if self._moment.offset is not None and tp.partition == self._moment.offset[0]:
            return self._moment.offset[1] + 1
        ms = self._moment_ms(consumer)
        found = consumer.offsets_for_times({tp: ms + 1})  # the first record after the moment
        hit = found.get(tp)
        return hit.offset if hit is not None else consumer.end_offsets([tp])[tp]

    def _moment_ms(self, consumer: KafkaConsumer) -> int:
        if self._time_ms is not None:
            return self._time_ms
        if self._moment.time is not None:
            self._time_ms = int(self._moment.time.timestamp() * 1000)
            return self._time_ms
        assert self._moment.offset is not None
        p, o = self._moment.offset
        tp = TopicPartition(self._settings.events_topic, p)
        consumer.assign([tp])
        consumer.seek(tp, o)
        for _ in range(20):
            for batch in consumer.poll(timeout_ms=500, max_records=1).values():
                self._time_ms = int(batch[0].timestamp)
                return self._time_ms
        raise ConfigError(f"there is no event at offset {o} of partition {p} of {self._settings.events_topic}")


@contextmanager
def trace_sources(settings: Settings, moment: AsOf | None) -> Iterator[tuple[TripleSource, StatusSource]]:
    """The store and reader to load traces through: Neo4j (``moment`` ``None``), or the events topic as of then.

    Example::

        with trace_sources(settings, AsOf.parse(offset="0:41")) as (store, reader):
            trace = load_trace(store, reader, question, user=user, collection=collection)
    """
    if moment is None:
        with Neo4jStore(settings) as store, TraceReader(settings) as reader:
            yield store, reader
        return
    with AsOfSource(settings, moment) as source:
        yield source, source


def moment_of(args: Any) -> AsOf | None:
    """The ``--as-of`` / ``--as-of-offset`` of parsed arguments, ``None`` when neither was given."""
    time, offset = getattr(args, "as_of", None), getattr(args, "as_of_offset", None)
    return None if time is None and offset is None else AsOf.parse(time, offset)


def add_as_of(parser: Any) -> None:
    """Add the mutually exclusive ``--as-of TIME`` and ``--as-of-offset PARTITION:OFFSET`` options."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--as-of", metavar="TIME", help="as the graph held it at TIME (ISO 8601, e.g. "
                       "2026-12-04T10:15:00Z): the session's events up to then, folded again")
    group.add_argument("--as-of-offset", metavar="PARTITION:OFFSET",
                       help="as of that events-topic record (inclusive)")
