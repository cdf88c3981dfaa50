"""Creation of provstream's Kafka topics (idempotent).

The events topic is the source of truth: unbounded retention
(``retention.ms=-1``, ``retention.bytes=-1``). The triples topic can be rebuilt
from it but is kept unbounded too so that any consumer can replay it. With
``PROVSTREAM_ENCRYPT=1`` the compacted keys topic (:mod:`provstream.keys`) is
created too. Events
and triples share the partition count so sessions stay co-partitioned.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import (
    ClusterAuthorizationFailedError,
    KafkaError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
)

from provstream.errors import ProvstreamError
from provstream.keys import keys_topic_spec
from provstream.native import c_extensions_off
from provstream.security import check_kafka, kafka_python_options
from provstream.settings import Settings

UNBOUNDED = {"retention.ms": "-1", "retention.bytes": "-1"}

# A dead-letter record keeps the original key and value and says why and where from.
ERROR_HEADER: Final = "provstream.error"
SOURCE_HEADERS: Final = ("provstream.source.topic", "provstream.source.partition", "provstream.source.offset")
REASON_LIMIT: Final = 4000


def dead_letter_headers(topic: str, partition: int, offset: int, reason: str,
                        original: Iterable[tuple[str, bytes]] = ()) -> list[tuple[str, bytes]]:
    """The headers of a dead-letter record (worker and sink alike).

    :param topic: the topic, partition and offset the rejected record was read from.
    :param reason: why it was rejected (cut to :data:`REASON_LIMIT` characters).
    :param original: the rejected record's own headers, kept first.
    :returns: ``original`` + ``provstream.error`` + the three ``provstream.source.*`` headers.

    >>> dead_letter_headers("provstream.events", 2, 41, "DecodeError: wrong magic")[0]
    ('provstream.error', b'DecodeError: wrong magic')
    """
    source = (topic, partition, offset)
    return [*original, (ERROR_HEADER, reason[:REASON_LIMIT].encode()),
            *((name, str(value).encode()) for name, value in zip(SOURCE_HEADERS, source, strict=True))]


def lineage_headers(topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    """The headers of a triples record naming the events record it was folded from (offset lineage).

    The same ``provstream.source.*`` names a dead-letter record carries.

    >>> lineage_headers("provstream.events", 1, 7)[2]
    ('provstream.source.offset', b'7')
    """
    return [(_TOPIC_HEADER, _encoded(topic)), (_PARTITION_HEADER, b"%d" % partition), (_OFFSET_HEADER, b"%d" % offset)]


_TOPIC_HEADER, _PARTITION_HEADER, _OFFSET_HEADER = SOURCE_HEADERS


@functools.lru_cache(maxsize=64)
def _encoded(topic: str) -> bytes:
    return topic.encode()


def source_of(headers: Iterable[tuple[str, bytes]] | None) -> tuple[int, int] | None:
    """The (partition, offset) of the events record a triples record was folded from, if its headers say.

    >>> source_of(lineage_headers("provstream.events", 1, 7))
    (1, 7)
    """
    partition = offset = None
    for name, value in headers or ():  # a plain loop: no dict per record on the sink's hot path
        if name == _PARTITION_HEADER:
            partition = value
        elif name == _OFFSET_HEADER:
            offset = value
    if partition is None or offset is None:
        return None
    try:
        return int(partition), int(offset)
    except ValueError:
        return None


RETRACTION_HEADER: Final = "provstream.retraction"


def retraction_record(user: str, collection: str, session: str) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """The (key, value, headers) of a retraction on the triples topic: ``provstream erase`` erased a session.

    Keyed by the session id, so it follows the session's triples on their
    partition; the value and the ``provstream.retraction`` header are the same
    JSON object (``user``, ``collection``, ``session``). Consumers drop the
    session's triples and keys (the sink deletes its nodes, follow says so).

    >>> retraction_record("alice", "c", "s1")[0]
    b's1'
    """
    body = json.dumps({"user": user, "collection": collection, "session": session}, sort_keys=True).encode()
    return session.encode(), body, [(RETRACTION_HEADER, body)]


def retraction_of(headers: Iterable[tuple[str, bytes]] | None) -> tuple[str, str, str] | None:
    """The (user, collection, session) a triples record retracts, ``None`` for a triples message.

    >>> retraction_of(retraction_record("alice", "c", "s1")[2])
    ('alice', 'c', 's1')
    """
    body = None
    for name, value in headers or ():  # a plain loop: no dict per record on the sink's hot path
        if name == RETRACTION_HEADER:
            body = value
    if body is None:
        return None
    data = json.loads(body)
    return str(data["user"]), str(data["collection"]), str(data["session"])


def _choose_murmur2() -> Callable[[bytes], int]:
    if not c_extensions_off():
        try:
            from provstream.codec._kafka_c import murmur2 as in_c
        except ImportError:
            pass
        else:
            return in_c
    from kafka.partitioner.default import murmur2 as in_python

    return in_python


# Java's murmur2 (Kafka's default partitioner): unsigned 32 bits of a key's bytes. In C (`_kafka_c`,
# chosen once here) unless the extension was not built or PROVSTREAM_NO_C_EXTENSIONS=1; else
# kafka-python's pure-Python one, which gives the same hash (about 3.6 us for a session id against 0.04).
murmur2: Final[Callable[[bytes], int]] = _choose_murmur2()


class KeyPartitioner:
    """aiokafka's ``DefaultPartitioner`` with :data:`murmur2`: every key goes where Java, kafka-python and
    aiokafka put it; a record without a key to a random available partition, as theirs.

    The worker's Faust producer (its changelog) and the emitter's producer use it (``partitioner=``).

    >>> KeyPartitioner()(b"s1", [0, 1, 2, 3], [0, 1, 2, 3]) == partition_for(b"s1", 4)
    True
    """

    def __call__(self, key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
        """The partition of ``key`` among ``all_partitions`` (sorted by id); ``available`` serves keyless records."""
        if key is None:
            return random.choice(available or all_partitions)
        return all_partitions[(murmur2(key) & 0x7FFFFFFF) % len(all_partitions)]


class PartitionMemo(dict[bytes, int]):
    """The partition of each key, computed once per key (a session's key repeats).

    Forgotten when the topic's partitions change (the partitioner would re-map
    keys too) or when it holds more than ``limit`` keys.

    >>> memo = PartitionMemo()
    >>> memo.refresh(3); memo[b"session"] = 1
    >>> memo.refresh(4); len(memo)
    0
    """

    def __init__(self, limit: int = 100_000) -> None:
        super().__init__()
        self.limit = limit
        self.partitions: object = None

    def refresh(self, partitions: object) -> None:
        """Keep the memo for ``partitions`` (a count or a list); empty it if they changed or it is full."""
        if partitions != self.partitions or len(self) > self.limit:
            self.clear()
            self.partitions = partitions


def partition_for(key: bytes, count: int) -> int:
    """The partition the producers put ``key`` on: Kafka's default partitioner (Java's :data:`murmur2`).

    :param key: the record key (a session id, encoded).
    :param count: the topic's partition count.
    :returns: the partition number.

    >>> partition_for(b"s1", 1)
    0
    """
    return (murmur2(key) & 0x7FFFFFFF) % count


def replication_configs(settings: Settings) -> dict[str, str]:
    """The topic configs every provstream topic (and the worker's changelog) carries for replication.

    >>> replication_configs(Settings(kafka_brokers=3))
    {'min.insync.replicas': '2'}
    """
    return {"min.insync.replicas": str(settings.min_insync_replicas)}


def topic_specs(settings: Settings) -> list[NewTopic]:
    n, rf = settings.partitions, settings.replication_factor
    kept = {**UNBOUNDED, **replication_configs(settings)}
    max_bytes = {"max.message.bytes": str(settings.max_message_bytes)}
    return [
        NewTopic(settings.events_topic, n, rf, topic_configs={**kept, **max_bytes}),
        NewTopic(settings.triples_topic, n, rf, topic_configs={**kept, **max_bytes}),
        NewTopic(settings.events_dlq_topic, 1, rf, topic_configs=kept),
        NewTopic(settings.triples_dlq_topic, 1, rf, topic_configs=kept),
        NewTopic(settings.otlp_spans_topic, n, rf, topic_configs={**kept, **max_bytes}),
        NewTopic(settings.otlp_spans_dlq_topic, 1, rf, topic_configs=kept),
        *([keys_topic_spec(settings)] if settings.encrypt else []),
    ]


def describe_cluster(settings: Settings, timeout_ms: int = 10_000) -> list[str]:
    """Lines for ``make status``: each broker of the cluster, then leader and ISR of each partition of the
    provstream topics and the worker's internal (changelog) topics.

    :raises ProvstreamError: Kafka cannot be reached.
    """
    try:
        admin = KafkaAdminClient(**kafka_python_options(settings, "admin"), request_timeout_ms=timeout_ms,
                                 client_id="provstream-status")
    except KafkaError as exc:
        raise ProvstreamError(f"cannot reach Kafka at {settings.kafka_bootstrap}: {exc}") from exc
    try:
        cluster = admin.describe_cluster()
        controller = cluster.get("controller_id")
        lines = [f"broker {b['broker_id']} {b['host']}:{b['port']}"
                 + (" controller" if b["broker_id"] == controller else "") + (" fenced" if b.get("is_fenced") else "")
                 for b in sorted(cluster.get("brokers", []), key=lambda b: b["broker_id"])]
        ours = {t.name for t in topic_specs(settings)}
        names = sorted(t for t in admin.list_topics() if t in ours or t.startswith(settings.worker_app_id + "-"))
        for topic in sorted(admin.describe_topics(names) if names else [], key=lambda t: t["name"]):
            parts = sorted(topic.get("partitions", []), key=lambda p: p["partition_index"])
            lines.append(f"{topic['name']}: " + ", ".join(
                f"p{p['partition_index']} leader {p['leader_id']} isr {','.join(map(str, sorted(p['isr_nodes'])))}"
                for p in parts))
        return lines
    except KafkaError as exc:
        raise ProvstreamError(f"cannot describe the cluster at {settings.kafka_bootstrap}: {exc}") from exc
    finally:
        admin.close()


def ensure_topics(settings: Settings, timeout_ms: int = 30_000, role: str = "admin") -> list[str]:
    """Create any missing provstream topic; return the names created.

    :param settings: the topics and the Kafka client settings.
    :param timeout_ms: the longest wait per admin request.
    :param role: the principal asking (:mod:`provstream.security`); on a
        secured cluster only ``admin`` may create topics, and a topic the
        role may not create (or not even see) is left to the admin.
    :returns: the names of the topics this call created.
    """
    check_kafka(settings, role)
    try:
        admin = KafkaAdminClient(**kafka_python_options(settings, role), request_timeout_ms=timeout_ms,
                                 client_id="provstream-admin")
    except KafkaError as exc:
        raise ProvstreamError(f"cannot reach Kafka at {settings.kafka_bootstrap}: {exc} "
                              "(check PROVSTREAM_KAFKA_BOOTSTRAP / PROVSTREAM_KAFKA_PORT)") from exc
    try:
        existing = set(admin.list_topics())
        missing = [t for t in topic_specs(settings) if t.name not in existing]
        for spec in missing:
            try:
                admin.create_topics([spec], timeout_ms=timeout_ms)
            except TopicAlreadyExistsError:
                pass
            except (TopicAuthorizationFailedError, ClusterAuthorizationFailedError):
                missing = [t for t in missing if t is not spec]  # not this principal's to create
        return [t.name for t in missing]
    except KafkaError as exc:
        raise ProvstreamError(f"cannot create topics on {settings.kafka_bootstrap}: {exc}") from exc
    finally:
        admin.close()
