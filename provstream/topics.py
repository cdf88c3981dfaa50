"""Creation of provstream's Kafka topics (idempotent).

The events topic is the source of truth: unbounded retention
(``retention.ms=-1``, ``retention.bytes=-1``). The triples topic can be rebuilt
from it but is kept unbounded too so that any consumer can replay it. Events
and triples share the partition count so sessions stay co-partitioned.
"""

from __future__ import annotations

from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

from provstream.errors import ProvstreamError
from provstream.settings import Settings

UNBOUNDED = {"retention.ms": "-1", "retention.bytes": "-1"}


def topic_specs(settings: Settings) -> list[NewTopic]:
    n = settings.partitions
    max_bytes = {"max.message.bytes": str(settings.max_message_bytes)}
    return [
        NewTopic(settings.events_topic, n, 1, topic_configs={**UNBOUNDED, **max_bytes}),
        NewTopic(settings.triples_topic, n, 1, topic_configs={**UNBOUNDED, **max_bytes}),
        NewTopic(settings.events_dlq_topic, 1, 1, topic_configs=UNBOUNDED),
        NewTopic(settings.triples_dlq_topic, 1, 1, topic_configs=UNBOUNDED),
        NewTopic(settings.otlp_spans_topic, n, 1, topic_configs={**UNBOUNDED, **max_bytes}),
        NewTopic(settings.otlp_spans_dlq_topic, 1, 1, topic_configs=UNBOUNDED),
    ]


def ensure_topics(settings: Settings, timeout_ms: int = 30_000) -> list[str]:
    """Create any missing provstream topic; return the names created."""
    try:
        admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, request_timeout_ms=timeout_ms,
                                 client_id="provstream-admin")
    except KafkaError as exc:
        raise ProvstreamError(f"cannot reach Kafka at {settings.kafka_bootstrap}: {exc}") from exc
    try:
        existing = set(admin.list_topics())
        missing = [t for t in topic_specs(settings) if t.name not in existing]
        for spec in missing:
            try:
                admin.create_topics([spec], timeout_ms=timeout_ms)
            except TopicAlreadyExistsError:
                pass
        return [t.name for t in missing]
    except KafkaError as exc:
        raise ProvstreamError(f"cannot create topics on {settings.kafka_bootstrap}: {exc}") from exc
    finally:
        admin.close()
