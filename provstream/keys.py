"""The keys topic and the master key: where :mod:`provstream.crypto` finds its data keys.

The keys topic (``PROVSTREAM_KEYS_TOPIC``, default ``provstream.keys``) has one
partition and ``cleanup.policy=compact``: a record per data key (key: the
key id, value: the scope in clear and the key wrapped by the master key), a
tombstone once erased. ``segment.ms`` and ``max.compaction.lag.ms`` are
``PROVSTREAM_KEYS_COMPACTION_MS`` so the log cleaner removes an erased key
from the log files within about twice that (docs/security.md).

The master key (base64 of 32 random bytes) is the file
``PROVSTREAM_MASTER_KEY_FILE`` (default ``<stack dir>/secrets/master-key``,
mode 0600), made by the deploy scripts or the first emitter that needs it;
it is never printed.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kafka.structs import TopicPartition

from provstream.crypto import KeyRing, new_master_key, parse_master_key
from provstream.errors import ConfigError, ProvstreamError
from provstream.security import kafka_python_options
from provstream.settings import Settings

PUT_TIMEOUT_S = 30


def keys_topic_spec(settings: Settings) -> NewTopic:
    """The keys topic: one partition, replicated like every topic, compacted; erased keys are cleaned
    within about ``keys_compaction_ms``.

    >>> keys_topic_spec(Settings()).topic_configs["cleanup.policy"]
    'compact'
    """
    lag = str(settings.keys_compaction_ms)
    return NewTopic(settings.keys_topic, 1, settings.replication_factor, topic_configs={
        "min.insync.replicas": str(settings.min_insync_replicas),
        "cleanup.policy": "compact", "segment.ms": lag, "max.compaction.lag.ms": lag,
        "min.compaction.lag.ms": "0", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": lag,
    })


def load_master_key(settings: Settings, *, create: bool = False) -> AESGCM:
    """The master key's cipher, from ``settings.master_key_path``.

    :param settings: where the file is.
    :param create: make the file (mode 0600, a fresh random key) when it does not exist.
    :returns: the AES-GCM cipher of the master key.
    :raises ConfigError: the file is missing (and ``create`` is false) or malformed.

    Example: ``load_master_key(Settings.from_env(), create=True)`` on the first start of a stack.
    """
    path = settings.master_key_path
    if create and not path.exists():
        _create(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"no master key at {path} ({exc.strerror}): set PROVSTREAM_MASTER_KEY_FILE or start "
                          "the stack (make up) so that it exists") from exc
    return parse_master_key(text, str(path))


def _create(path: Path) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return  # another process made it first
    with os.fdopen(fd, "wb") as out:
        out.write(new_master_key() + b"\n")


class KafkaKeyStore:
    """The :class:`provstream.crypto.KeyStore` on the keys topic.

    :param settings: the topic and the Kafka client settings.
    :param role: the principal (``emitter`` writes, ``sink`` / ``reader`` read, ``admin`` erases).

    Example: ``KeyRing(KafkaKeyStore(settings, "sink"), load_master_key(settings))``.
    """

    def __init__(self, settings: Settings, role: str) -> None:
        self.settings, self.role = settings, role
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._tp = TopicPartition(settings.keys_topic, 0)
        self._lock = threading.Lock()

    def _options(self) -> dict[str, Any]:
        return kafka_python_options(self.settings, self.role)

    def put(self, kid: str, record: bytes | None) -> None:
        """Store the record (or tombstone) and wait for the broker's acknowledgement."""
        with self._lock:
            try:
                if self._producer is None:
                    self._producer = KafkaProducer(**self._options(), acks="all", linger_ms=0,
                                                   client_id=f"provstream-keys-{self.role}")
                self._producer.send(self.settings.keys_topic, key=kid.encode(), value=record).get(PUT_TIMEOUT_S)
            except KafkaError as exc:
                raise ProvstreamError(f"cannot write the keys topic {self.settings.keys_topic}: {exc}") from exc

    def put_many(self, records: list[tuple[str, bytes]]) -> None:
        """Store several records together (sent at once, then every acknowledgement awaited)."""
        if not records:
            return
        with self._lock:
            try:
                if self._producer is None:
                    self._producer = KafkaProducer(**self._options(), acks="all", linger_ms=0,
                                                   client_id=f"provstream-keys-{self.role}")
                sent = [self._producer.send(self.settings.keys_topic, key=kid.encode(), value=record)
                        for kid, record in records]
                self._producer.flush(PUT_TIMEOUT_S)
                for future in sent:
                    future.get(PUT_TIMEOUT_S)
            except KafkaError as exc:
                raise ProvstreamError(f"cannot write the keys topic {self.settings.keys_topic}: {exc}") from exc

    def read_new(self) -> list[tuple[str, bytes | None]]:
        """The records appended since the last call, up to the topic's end when called."""
        with self._lock:
            try:
                consumer = self._open_consumer()
                end = consumer.end_offsets([self._tp])[self._tp]
                out: list[tuple[str, bytes | None]] = []
                while consumer.position(self._tp) < end:
                    for records in consumer.poll(timeout_ms=1000).values():
                        out += [(r.key.decode(), r.value) for r in records if r.key is not None]
                return out
            except KafkaError as exc:
                raise ProvstreamError(f"cannot read the keys topic {self.settings.keys_topic}: {exc}") from exc

    def _open_consumer(self) -> KafkaConsumer:
        if self._consumer is None:
            self._consumer = KafkaConsumer(**self._options(), enable_auto_commit=False, group_id=None,
                                           client_id=f"provstream-keys-{self.role}")
            self._consumer.assign([self._tp])
            self._consumer.seek_to_beginning(self._tp)
        return self._consumer

    def close(self) -> None:
        """Release the Kafka clients (idempotent)."""
        with self._lock:
            if self._producer is not None:
                self._producer.close(timeout=10)
                self._producer = None
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None


def open_ring(settings: Settings, role: str, *, create_master: bool = False) -> KeyRing | None:
    """The key ring of a process with ``settings``, ``None`` when encryption is off (``PROVSTREAM_ENCRYPT=0``).

    :param settings: the settings (``encrypt``, the keys topic, the master key file).
    :param role: the Kafka principal reading or writing the keys topic.
    :param create_master: make the master key file if missing (the emitter's first start).
    :returns: the :class:`KeyRing`, or ``None``.
    :raises ConfigError: encryption is on and the master key is missing or malformed.

    Example: ``ring = open_ring(settings, "sink")``, then ``ring.open_triples(msg)`` for each message.
    """
    if not settings.encrypt:
        return None
    return KeyRing(KafkaKeyStore(settings, role), load_master_key(settings, create=create_master))


def close_ring(ring: KeyRing | None) -> None:
    """Release a ring's Kafka clients, if it has any."""
    close = getattr(ring.store, "close", None) if ring is not None else None
    if close is not None:
        close()
