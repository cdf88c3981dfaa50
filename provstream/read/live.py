"""Live tail of the triples topic (kafka-python adapter).

A plain consumer without a consumer group: it assigns itself every partition
of ``settings.triples_topic``, starts at the current end (or the beginning),
commits nothing and leaves no trace on the broker. The start offsets are
looked up explicitly (``end_offsets`` / ``beginning_offsets``) and seeked to,
so the tail is positioned before :meth:`TriplesTail.open` returns: a step
produced after that is never missed.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from provstream.codec.records import decode_triples
from provstream.core.triples import StepTriples
from provstream.errors import DecodeError, ProvstreamError
from provstream.keys import close_ring, open_ring
from provstream.security import check_kafka, kafka_python_options
from provstream.settings import Settings
from provstream.topics import retraction_of


class TriplesTail:
    """Iterate over triples messages as they arrive; undecodable records are reported, never fatal."""

    def __init__(self, settings: Settings, *, from_beginning: bool = False, poll_ms: int = 500) -> None:
        self._settings = settings
        self._from_beginning = from_beginning
        self._poll_ms = poll_ms
        self._consumer: KafkaConsumer | None = None
        self.ring = open_ring(settings, "reader")  # PROVSTREAM_ENCRYPT=1: sealed literals opened
        self.retracted: list[tuple[str, str, str]] = []  # (user, collection, session) erased while following
        self.skipped = 0

    def open(self) -> TriplesTail:
        topic = self._settings.triples_topic
        try:
            check_kafka(self._settings, "reader")
            consumer = KafkaConsumer(**kafka_python_options(self._settings, "reader"), group_id=None,
                                     enable_auto_commit=False, client_id="provstream-follow")
        except KafkaError as exc:
            raise ProvstreamError(f"cannot reach Kafka at {self._settings.kafka_bootstrap}: {exc}") from exc
        try:
            self._position(consumer, topic)
        except BaseException:
            consumer.close()
            raise
        self._consumer = consumer
        return self

    def _position(self, consumer: KafkaConsumer, topic: str) -> None:
        try:
            partitions = consumer.partitions_for_topic(topic)
            if not partitions:
                raise ProvstreamError(f"topic {topic} does not exist (run `provstream stack up` or create it)")
            tps = [TopicPartition(topic, p) for p in sorted(partitions)]
            consumer.assign(tps)
            offsets = consumer.beginning_offsets(tps) if self._from_beginning else consumer.end_offsets(tps)
        except KafkaError as exc:
            raise ProvstreamError(f"cannot read topic {topic} on {self._settings.kafka_bootstrap}: {exc}") from exc
        for tp in tps:
            consumer.seek(tp, offsets[tp])

    def close(self) -> None:
        close_ring(self.ring)
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def __enter__(self) -> TriplesTail:
        return self.open()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def poll(self) -> list[StepTriples]:
        """The messages that arrived within one poll interval (possibly none), in partition order."""
        if self._consumer is None:
            raise ProvstreamError("TriplesTail is not open")
        try:
            batches = self._consumer.poll(timeout_ms=self._poll_ms)
        except KafkaError as exc:
            raise ProvstreamError(f"reading {self._settings.triples_topic} failed: {exc}") from exc
        out: list[StepTriples] = []
        for records in batches.values():
            for record in records:
                retraction = retraction_of(record.headers)
                if retraction is not None:  # provstream erase: forget the session's keys
                    self.retracted.append(retraction)
                    if self.ring is not None:
                        self.ring.forget(*retraction)
                    continue
                try:
                    msg = decode_triples(record.value)
                    out.append(msg if self.ring is None else self.ring.open_triples(msg))
                except DecodeError:
                    self.skipped += 1
        return out

    def __iter__(self) -> Iterator[StepTriples]:
        while True:
            yield from self.poll()
