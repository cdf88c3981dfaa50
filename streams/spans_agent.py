"""The worker's OTLP side: spans topic -> per-trace table -> events topic (+ dead letters).

Faust wiring only; the translation is :func:`provstream.streams.spans.step` (pure).

* Source: ``settings.otlp_spans_topic``: each message one protobuf
  ``ExportTraceServiceRequest`` (the OpenTelemetry Collector's ``otlp_proto``
  Kafka encoding), keyed by trace id (``provstream otlp`` and the Collector's
  ``partition_traces_by_id`` both key by the trace id in hex).
* State: the table ``otlp_traces`` (key: trace id hex, value: the trace's
  :data:`~provstream.streams.spans.State`), backed by its changelog topic
  ``<app id>-otlp_traces-changelog``; a trace unchanged for
  ``settings.session_retention_s`` is forgotten.
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import faust
from faust.types import StreamT

from provstream.otlp_codec import OtlpError, span_records
from provstream.settings import Settings
from provstream.streams.spans import Record, Scope, Translated, pending, step
from provstream.wire import encode_event

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
            await self._produce(trace, result)

    async def tick(self, *_app: Any) -> None:
        """Translate the traces that settled; forget those idle past the retention (not while partitions move)."""
        if self.app.rebalancing or self.app.tables.recovery.in_recovery:  # type: ignore[attr-defined]
            return
        now = time.time()
        for key, state in list(self.table.items()):
            if not isinstance(state, dict):
                continue
            if pending(state) and now - state["last"] >= self.settle_s:
                result = step(state, (), now, scope=self.scope, settle_s=self.settle_s)
                self.table[key] = result.state
                await self._produce(key.decode() if isinstance(key, bytes) else str(key), result)
            elif self.retention_s and now - state["last"] >= self.retention_s:
                del self.table[key]

    async def _produce(self, trace: str, result: Translated) -> None:
        for e in result.events:
            fut = await self.app.producer.send(self.events_topic, e.session_id.encode(), encode_event(e),
                                               None, None, None)
            cast(asyncio.Future[Any], fut).add_done_callback(_delivered)
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
        from provstream.streams.app import dead_letter_headers

        self.stats.dead_letters += 1
        log.warning("otlp dead letter %s/%d@%d: %s", m.topic, m.partition, m.offset, reason)
        fut = await self.app.producer.send(self.dlq_topic, m.key, m.value, None, None,
                                           dead_letter_headers(m, reason))
        cast(asyncio.Future[Any], fut).add_done_callback(_delivered)


def _by_trace(records: Sequence[Record]) -> dict[str, list[Record]]:
    out: dict[str, list[Record]] = {}
    for r in records:
        out.setdefault(r["t"], []).append(r)
    return out


def _delivered(delivery: Any) -> None:
    from provstream.streams.app import _delivered as fold_delivered

    fold_delivered(delivery)


def attach(app: faust.App, settings: Settings) -> SpanTranslator:
    """Add the spans agent, its table and its settle timer to the worker's Faust ``app``.

    :param app: the worker's app (:func:`provstream.streams.app.create_app`)
    :param settings: topics, partitions, default scope, ``otlp_settle_ms``, ``session_retention_s``
    :returns: the translator (its ``stats`` count what it did)

    Example (what ``create_app`` does)::

        app = faust.App(settings.worker_app_id, ...)
        attach(app, settings)
    """
    from provstream.streams.app import _raw_topic

    translator = SpanTranslator(
        app=app,
        table=app.Table(TABLE, default=None, partitions=settings.partitions, key_type=bytes, use_partitioner=True),
        events_topic=settings.events_topic,
        dlq_topic=settings.otlp_spans_dlq_topic,
        scope=Scope(settings.user, settings.collection),
        settle_s=settings.otlp_settle_ms / 1000,
        retention_s=float(settings.session_retention_s),
    )
    app.agent(_raw_topic(app, settings.otlp_spans_topic), name="provstream-otlp-spans")(translator.per_message)
    app.timer(max(0.2, min(1.0, translator.settle_s / 4)), name="provstream-otlp-settle")(translator.tick)
    return translator
