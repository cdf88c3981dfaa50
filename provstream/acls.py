"""Least-privilege Kafka ACLs: one principal per role, only what it needs (docs/security.md has the table).

``admin`` is a super user (``super.users`` of the secured broker) and needs
no ACL; the broker's own certificate principal ``kafka-broker`` likewise.
Consumers that only ``assign()`` partitions (replay, follow) use no consumer
group, so ``reader`` has no group ACL.

Example::

    ensure_acls(settings)     # as the admin, after the topics exist (provstream stack up does it)
"""

from __future__ import annotations

from typing import Final, NamedTuple

from provstream.errors import ProvstreamError
from provstream.settings import Settings


class Grant(NamedTuple):
    """One ALLOW ACL: ``role`` may ``operation`` on ``resource`` ``name`` (``prefixed``: every name starting so)."""

    role: str
    resource: str  # TOPIC or GROUP
    name: str
    operation: str  # READ, WRITE, DESCRIBE, ALL, ...
    prefixed: bool = False


ROLE_DESCRIPTIONS: Final = {
    "emitter": "writes the events topic",
    "otlp": "writes the OTLP spans topic (and, encrypting, reads and writes the keys topic)",
    "worker": "reads events and spans; writes triples, events (from spans), dead letters, its own topics",
    "sink": "reads triples; writes the triples dead letters",
    "reader": "reads events, triples and the dead letters (replay, follow, as-of, dlq)",
}


def grants(settings: Settings) -> list[Grant]:
    """Every ACL of the secured stack for ``settings``' topics and groups.

    :param settings: the topic names, the worker's app id and the sink's group.
    :returns: the grants, role by role.

    >>> [g.operation for g in grants(Settings()) if g.role == "emitter"]
    ['WRITE', 'DESCRIBE']
    """
    s = settings
    out = [Grant("emitter", "TOPIC", s.events_topic, "WRITE"), Grant("emitter", "TOPIC", s.events_topic, "DESCRIBE"),
           Grant("otlp", "TOPIC", s.otlp_spans_topic, "WRITE"), Grant("otlp", "TOPIC", s.otlp_spans_topic, "DESCRIBE")]
    for topic in (s.events_topic, s.otlp_spans_topic):
        out.append(Grant("worker", "TOPIC", topic, "READ"))
    for topic in (s.triples_topic, s.events_dlq_topic, s.otlp_spans_dlq_topic, s.events_topic):
        out.append(Grant("worker", "TOPIC", topic, "WRITE"))
    out += [Grant("worker", "TOPIC", s.worker_app_id, "ALL", prefixed=True),  # changelog, assignor topics
            Grant("worker", "GROUP", s.worker_app_id, "READ")]
    out += [Grant("sink", "TOPIC", s.triples_topic, "READ"), Grant("sink", "TOPIC", s.triples_dlq_topic, "WRITE"),
            Grant("sink", "GROUP", s.sink_group, "READ")]
    out += [Grant("reader", "TOPIC", topic, "READ")  # replay, follow, as-of; provstream dlq
            for topic in (s.events_topic, s.triples_topic, s.events_dlq_topic, s.triples_dlq_topic,
                          s.otlp_spans_dlq_topic)]
    if s.encrypt:  # the keys topic: the emitters and the OTLP receiver write data keys (the receiver also reads
        # it, to seal a trace under the key another receiver made), the readers read them; only admin erases
        out += [Grant(role, "TOPIC", s.keys_topic, op) for role, op in (
            ("emitter", "WRITE"), ("emitter", "DESCRIBE"), ("otlp", "WRITE"), ("otlp", "DESCRIBE"),
            ("otlp", "READ"), ("sink", "READ"), ("reader", "READ"))]
    return out


def ensure_acls(settings: Settings, timeout_ms: int = 30_000) -> int:
    """Create the :func:`grants` as the ``admin`` principal (idempotent: Kafka keeps one copy of an ACL).

    :returns: how many ACLs were asked for.
    :raises ProvstreamError: the broker refused or could not be reached.
    """
    from kafka.admin import (
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourceType,
    )
    from kafka.errors import KafkaError

    from provstream.security import kafka_python_options

    acls = [ACL(principal=f"User:{g.role}", host="*", operation=ACLOperation[g.operation],
                permission_type=ACLPermissionType.ALLOW,
                resource_pattern=ResourcePattern(ResourceType[g.resource], g.name,
                                                 ACLResourcePatternType.PREFIXED if g.prefixed
                                                 else ACLResourcePatternType.LITERAL))
            for g in grants(settings)]
    admin = KafkaAdminClient(**kafka_python_options(settings, "admin"), request_timeout_ms=timeout_ms,
                             client_id="provstream-acls")
    try:
        result = admin.create_acls(acls)
    except KafkaError as exc:
        raise ProvstreamError(f"cannot create the ACLs on {settings.kafka_bootstrap}: {exc}") from exc
    finally:
        admin.close()
    failed = result.get("failed", []) if isinstance(result, dict) else []
    if failed:
        raise ProvstreamError(f"Kafka refused {len(failed)} ACL(s), first: {failed[0]}")
    return len(acls)
