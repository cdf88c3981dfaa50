"""The worker's OTLP side: spans topic -> per-trace table -> events topic (+ dead letters).

Faust wiring only; the translation is :func:`provstream.streams.spans.step` (pure).

* Source: ``settings.otlp_spans_topic``: each message one protobuf
  ``ExportTraceServiceRequest`` (the OpenTelemetry Collector's ``otlp_proto``
  Kafka encoding), keyed by trace id (``provstream otlp`` and the Collector's
  ``partition_traces_by_id`` both key by the trace id in hex).
* State: the table ``otlp_traces`` (key: trace id hex, value: the trace's
  :data:`~provstream.streams.spans.State`), backed by its changelog topic
  ``<app id>-otlp_traces-changelog``; once all its sessions are translated
  a trace keeps only its span ids and kinds (re-sent spans are recognised);
  a trace unchanged for ``settings.session_retention_s`` is forgotten.
* Output: ordinary provstream events on ``settings.events_topic`` keyed by
  session id, which the fold agent of the same worker folds like any other;
  undecodable messages go to ``settings.otlp_spans_dlq_topic`` with the
  reason in the ``provstream.error`` header.
* A timer translates the traces whose spans came out of order once they had
  no new span for ``settings.otlp_settle_ms``.

Delivery is at-least-once: Faust flushes the producer (events, changelog)
before it commits a message's offset; event ids are derived from the span
ids, so a message translated twice gives the same events (the fold flags
them as duplicates).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import faust
from faust.types import StreamT

from provstream.codec.otlp import OtlpError, span_records
from provstream.codec.records import encode_event
from provstream.settings import Settings
from provstream.streams.spans import Record, Scope, Translated, pending, step
from provstream.topics import replication_configs

log = logging.getLogger("provstream.worker.otlp")
TABLE = "otlp_traces"


@dataclass
class SpanStats:
    """Counters of the translation since the worker started (logged; see :meth:`SpanTranslator.report`)."""

    messages: int = 0
    spans: int = 0
    events: int = 0
    unmapped: int = 0
    late: int = 0
    duplicates: int = 0
    dead_letters: int = 0


@dataclass
class SpanTranslator:
    """The agent body and the settle timer; see the module docstring."""

    app: faust.App
    table: Any
    events_topic: str
    dlq_topic: str
    scope: Scope
    settle_s: float
    retention_s: float = 0.0
    stats: SpanStats = field(default_factory=SpanStats)
    dead_letter_headers: Callable[[Any, str], list[tuple[str, bytes]]] = lambda _m, _r: []
    delivered: Callable[[Any], None] = lambda _d: None
    _pending: set[bytes] | None = None  # traces waiting to settle; rebuilt from the table after a restart

    async def per_message(self, stream: StreamT) -> None:
        async for event in stream.events():
            await self.handle(event.message)

    async def handle(self, message: Any) -> None:
        """Translate one spans-topic message; an undecodable one goes to the dead-letter topic."""
        self.stats.messages += 1
        try:
            records = span_records(message.value or b"")
        except OtlpError as exc:
            await self._dead_letter(message, str(exc))
            return
        self.stats.spans += len(records)
        now = time.time()
        for trace, recs in _by_trace(records).items():
            key = trace.encode()
            result = step(self.table.get(key), recs, now, scope=self.scope, settle_s=self.settle_s)
            self.table[key] = result.state
            self._track(key, result.state)
            await self._produce(trace, result)

    def _track(self, key: bytes, state: Any) -> None:
        if self._pending is not None:
            if isinstance(state, dict) and pending(state):
                self._pending.add(key)
            else:
                self._pending.discard(key)

    def _busy(self) -> bool:
        return bool(self.app.rebalancing or self.app.tables.recovery.in_recovery)  # type: ignore[attr-defined]

    async def tick(self, *_app: Any) -> None:
        """Translate the traces that settled (not while partitions move)."""
        if self._busy():
            return
        if self._pending is None:  # first tick after a start: the recovered table says which traces wait
            self._pending = {k for k, v in self.table.items() if isinstance(v, dict) and pending(v)}
        now = time.time()
        for key in list(self._pending):
            state = self.table.get(key)
            if not isinstance(state, dict) or not pending(state):
                self._pending.discard(key)
            elif now - state["last"] >= self.settle_s:
                result = step(state, (), now, scope=self.scope, settle_s=self.settle_s)
                self.table[key] = result.state
                self._track(key, result.state)
                await self._produce(key.decode(), result)

    async def forget_idle(self, *_app: Any) -> None:
        """Drop the traces unchanged for the retention (a tombstone each), as the fold forgets sessions."""
        if not self.retention_s or self._busy():
            return
        now = time.time()
        idle = [k for k, v in self.table.items() if isinstance(v, dict) and now - v["last"] >= self.retention_s]
        for key in idle:
            del self.table[key]
            if self._pending is not None:
                self._pending.discard(key)
        if idle:
            log.info("forgot %d OTLP trace(s) unchanged for %ds", len(idle), self.retention_s)

    async def _produce(self, trace: str, result: Translated) -> None:
        for e in result.events:
            fut = await self.app.producer.send(self.events_topic, e.session_id.encode(), encode_event(e),
                                               None, None, None)
            cast(asyncio.Future[Any], fut).add_done_callback(self.delivered)
        s = self.stats
        s.events += len(result.events)
        s.unmapped += result.unmapped
        s.late += result.late
        s.duplicates += result.duplicates
        if result.unmapped or result.late:
            log.warning("otlp trace %s: %d span(s) not mapped, %d late (after their agent was translated); "
                        "totals: %d unmapped, %d late", trace, result.unmapped, result.late, s.unmapped, s.late)
        if result.events:
            log.info("otlp trace %s: %d event(s) -> %s", trace, len(result.events), self.events_topic)

    async def _dead_letter(self, m: Any, reason: str) -> None:
        self.stats.dead_letters += 1
        log.warning("otlp dead letter %s/%d@%d: %s", m.topic, m.partition, m.offset, reason)
        fut = await self.app.producer.send(self.dlq_topic, m.key, m.value, None, None,
                                           self.dead_letter_headers(m, reason))
        cast(asyncio.Future[Any], fut).add_done_callback(self.delivered)


def _by_trace(records: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for r in records:
        out.setdefault(r["t"], []).append(r)
    return out


def attach(app: faust.App, settings: Settings) -> SpanTranslator:
    """Add the spans agent, its table and its settle timer to the worker's Faust ``app``.

    :param app: the worker's app (:func:`provstream.streams.app.create_app`)
    :param settings: topics, partitions, default scope, ``otlp_settle_ms``, ``session_retention_s``
    :returns: the translator (its ``stats`` count what it did)

    Example (what ``create_app`` does)::

        app = faust.App(settings.worker_app_id, ...)
        attach(app, settings)
    """
    from provstream.streams.app import _delivered, _raw_topic, dead_letter_headers  # app imports this module
    from provstream.streams.expiry import sweep_interval

    translator = SpanTranslator(
        app=app,
        table=app.Table(TABLE, default=None, partitions=settings.partitions, key_type=bytes, use_partitioner=True,
                        extra_topic_configs=replication_configs(settings)),
        events_topic=settings.events_topic,
        dlq_topic=settings.otlp_spans_dlq_topic,
        scope=Scope(settings.user, settings.collection),
        settle_s=settings.otlp_settle_ms / 1000,
        retention_s=float(settings.session_retention_s),
        dead_letter_headers=dead_letter_headers,
        delivered=_delivered,
    )
    app.agent(_raw_topic(app, settings.otlp_spans_topic), name="provstream-otlp-spans")(translator.per_message)
    app.timer(max(0.2, min(1.0, translator.settle_s / 4)), name="provstream-otlp-settle")(translator.tick)
    if settings.session_retention_s > 0:
        app.timer(sweep_interval(settings.session_retention_s), name="provstream-otlp-forget")(translator.forget_idle)
    return translator
