"""The dead-letter topics, read back: what was rejected, why, and where from.

The worker dead-letters events it cannot fold (``provstream.events.dlq``) and
the sink triples messages Neo4j refused (``provstream.triples.dlq``); each
record keeps its original key and value and carries ``provstream.error`` (the
reason) and ``provstream.source.topic`` / ``.partition`` / ``.offset``
(:mod:`provstream.topics`). :func:`read_dead_letters` reads them with a plain
consumer (no group, nothing committed); :func:`summary` and
:func:`render_letters` are pure.

Example::

    letters = read_dead_letters(settings, settings.events_dlq_topic, limit=20)
    print(render_letters(letters))
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError

from provstream.codec.records import decode_event, decode_triples
from provstream.errors import ProvstreamError
from provstream.read.text import truncate
from provstream.security import kafka_python_options
from provstream.settings import Settings
from provstream.topics import ERROR_HEADER, SOURCE_HEADERS

NO_REASON = "(no provstream.error header)"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One dead-letter record; ``session``, ``user``, ``collection`` when its value still decodes."""

    topic: str
    partition: int
    offset: int
    time: datetime | None
    key: str
    reason: str
    source: str  # topic/partition@offset it was read from, "" if not said
    size: int
    session: str = ""
    user: str = ""
    collection: str = ""


@dataclass(frozen=True, slots=True)
class TopicSummary:
    """How many records a dead-letter topic holds (all partitions) and its most frequent reasons."""

    topic: str
    exists: bool
    count: int
    reasons: tuple[tuple[str, int], ...] = ()


def read_dead_letters(settings: Settings, topic: str, *, limit: int | None = None, from_offset: int = 0,
                      timeout_s: float = 30.0) -> list[DeadLetter]:
    """The records of ``topic`` from ``from_offset`` (every partition), oldest first, at most ``limit``.

    :param settings: the Kafka address.
    :param topic: a dead-letter topic.
    :param limit: at most this many records (``None``: all).
    :param from_offset: the first offset read in each partition.
    :returns: the records; an empty list when the topic is empty.
    :raises ProvstreamError: Kafka unreachable or the topic missing (one line naming it).
    """
    with _consumer(settings) as consumer:
        tps = _partitions(consumer, settings, topic)
        if tps is None:
            raise ProvstreamError(f"topic {topic} does not exist on {settings.kafka_bootstrap} "
                                  "(nothing was ever dead-lettered there, or another PROVSTREAM_*_DLQ_TOPIC)")
        try:
            consumer.assign(tps)
            ends = consumer.end_offsets(tps)
            starts = consumer.beginning_offsets(tps)
            for tp in tps:
                consumer.seek(tp, max(from_offset, starts[tp]))
            found: list[DeadLetter] = []
            remaining = {tp for tp in tps if max(from_offset, starts[tp]) < ends[tp]}
            deadline = _now() + timeout_s
            while remaining and (limit is None or len(found) < limit) and _now() < deadline:
                for tp, records in consumer.poll(timeout_ms=500).items():
                    for record in records:
                        if record.offset < ends[tp]:
                            found.append(_letter(record))
                        if record.offset >= ends[tp] - 1:
                            remaining.discard(tp)
        except KafkaError as exc:
            raise ProvstreamError(f"cannot read topic {topic} on {settings.kafka_bootstrap}: {exc}") from exc
    found.sort(key=lambda x: (x.time or datetime.min.replace(tzinfo=UTC), x.partition, x.offset))
    return found if limit is None else found[:limit]


def summary(settings: Settings, topics: Sequence[str], *, top: int = 5,
            keep: Callable[[DeadLetter], bool] | None = None) -> list[TopicSummary]:
    """For each topic: whether it exists, its record count and its ``top`` most frequent reasons.

    :param keep: count only the records it accepts (e.g. one user's); ``None``: all.
    :returns: one summary per topic, in order.

    Reasons are grouped by :func:`reason_kind` (error type and the start of the message).
    """
    out = []
    for topic in topics:
        with _consumer(settings) as consumer:
            tps = _partitions(consumer, settings, topic)
            if tps is None:
                out.append(TopicSummary(topic, False, 0))
                continue
            try:
                ends, starts = consumer.end_offsets(tps), consumer.beginning_offsets(tps)
            except KafkaError as exc:
                raise ProvstreamError(f"cannot read topic {topic} on {settings.kafka_bootstrap}: {exc}") from exc
        count = sum(ends[tp] - starts[tp] for tp in tps)
        letters = read_dead_letters(settings, topic) if count else []
        if keep is not None:
            letters = [x for x in letters if keep(x)]
            count = len(letters)
        reasons = Counter(reason_kind(x.reason) for x in letters).most_common(top)
        out.append(TopicSummary(topic, True, count, tuple(reasons)))
    return out


def reason_kind(reason: str) -> str:
    """The reason's error type and the start of its message (``InvalidEvent: invalid session id``)."""
    first = reason.splitlines()[0] if reason else NO_REASON
    kind, sep, rest = first.partition(": ")
    return f"{kind}: {truncate(rest, 60)}" if sep else truncate(first, 80)


def render_summary(summaries: Sequence[TopicSummary]) -> str:
    lines = []
    for s in summaries:
        if not s.exists:
            lines.append(f"{s.topic}: no such topic")
            continue
        lines.append(f"{s.topic}: {s.count} record{'s' if s.count != 1 else ''}")
        lines += [f"  {n:>6}  {reason}" for reason, n in s.reasons]
    return "\n".join(lines) + "\n"


def render_letters(letters: Sequence[DeadLetter], width: int = 120) -> str:
    """One block per record: where it is, where it came from, its session if it decodes, and the reason."""
    if not letters:
        return "No dead letters.\n"
    blocks = []
    for x in letters:
        when = x.time.strftime("%Y-%m-%d %H:%M:%S UTC") if x.time else "-"
        head = f"{x.topic} {x.partition}@{x.offset}  {when}  from {x.source or '?'}  key {x.key!r}  {x.size} bytes"
        scope = f"\n  session {x.session} (user {x.user!r}, collection {x.collection!r})" if x.session else ""
        blocks.append(f"{head}{scope}\n  reason  {truncate(' '.join(x.reason.split()), max(width - 10, 40))}")
    return "\n".join(blocks) + "\n"


def letters_json(letters: Sequence[DeadLetter]) -> str:
    return json.dumps([_json(x) for x in letters], indent=2, ensure_ascii=False) + "\n"


def summary_json(summaries: Sequence[TopicSummary]) -> str:
    return json.dumps([{"topic": s.topic, "exists": s.exists, "count": s.count,
                        "reasons": [{"reason": r, "count": n} for r, n in s.reasons]} for s in summaries],
                      indent=2, ensure_ascii=False) + "\n"


def _json(x: DeadLetter) -> dict[str, Any]:
    return {"topic": x.topic, "partition": x.partition, "offset": x.offset,
            "time": x.time.isoformat() if x.time else None, "key": x.key, "reason": x.reason,
            "source": x.source, "size": x.size, "session": x.session or None, "user": x.user or None,
            "collection": x.collection or None}


def _letter(record: Any) -> DeadLetter:
    headers = {name: value.decode("utf-8", "replace") for name, value in (record.headers or ()) if value is not None}
    source = ""
    if all(h in headers for h in SOURCE_HEADERS):
        topic, partition, offset = (headers[h] for h in SOURCE_HEADERS)
        source = f"{topic} {partition}@{offset}"
    value: bytes = record.value or b""
    session = user = collection = ""
    for decode in (decode_event, decode_triples):
        try:
            msg = decode(value)
        except Exception:  # DecodeError or anything a damaged value raises: shown by key and size only
            continue
        session, user, collection = msg.session_id, msg.user, msg.collection
        break
    when = datetime.fromtimestamp(record.timestamp / 1000, UTC) if record.timestamp and record.timestamp > 0 else None
    return DeadLetter(record.topic, record.partition, record.offset, when,
                      (record.key or b"").decode("utf-8", "replace"), headers.get(ERROR_HEADER, NO_REASON), source,
                      len(value), session, user, collection)


class _consumer:
    """A group-less consumer as a context manager; Kafka unreachable is one clear line."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._consumer: KafkaConsumer | None = None

    def __enter__(self) -> KafkaConsumer:
        try:
            self._consumer = KafkaConsumer(**kafka_python_options(self._settings, "reader"), group_id=None,
                                           enable_auto_commit=False, client_id="provstream-dlq")
        except KafkaError as exc:
            raise ProvstreamError(f"cannot reach Kafka at {self._settings.kafka_bootstrap}: {exc} "
                                  "(check PROVSTREAM_KAFKA_BOOTSTRAP / PROVSTREAM_KAFKA_PORT)") from exc
        return self._consumer

    def __exit__(self, *exc: object) -> None:
        if self._consumer is not None:
            self._consumer.close()


def _partitions(consumer: KafkaConsumer, settings: Settings, topic: str) -> list[TopicPartition] | None:
    try:
        partitions = consumer.partitions_for_topic(topic)
    except KafkaError as exc:
        raise ProvstreamError(f"cannot read topic {topic} on {settings.kafka_bootstrap}: {exc}") from exc
    return [TopicPartition(topic, p) for p in sorted(partitions)] if partitions else None


def _now() -> float:
    import time

    return time.monotonic()
