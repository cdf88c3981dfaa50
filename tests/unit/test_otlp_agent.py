"""The worker's OTLP agent body without Faust or Kafka: a dict as the table, a recording producer."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from otlp_support import Clock, Collected, emit_run, run_of, sdk_tracer

from provstream.codec import records as wire
from provstream.codec.otlp import split_by_trace
from provstream.core.trajectories import AgentTrajectory, load
from provstream.data import REACT_TRAJECTORIES
from provstream.streams.app import dead_letter_headers
from provstream.streams.spans import Scope, session_id
from provstream.streams.spans_agent import SpanTranslator

RUN = run_of(next(r for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory)))


class Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Any, Any, Any]] = []

    async def send(self, topic: str, key: Any, value: Any, partition: Any, timestamp: Any, headers: Any) -> Any:
        self.sent.append((topic, key, value, headers))
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def _translator() -> tuple[SpanTranslator, Producer]:
    producer = Producer()
    app = SimpleNamespace(producer=producer, rebalancing=False, tables=SimpleNamespace(
        recovery=SimpleNamespace(in_recovery=False)))
    return SpanTranslator(app=app, table={}, events_topic="ev", dlq_topic="dlq", scope=Scope("u", "c"),  # type: ignore
                          settle_s=0.0, dead_letter_headers=dead_letter_headers), producer


def _message(value: bytes, key: bytes = b"k") -> Any:
    return SimpleNamespace(topic="spans", partition=0, offset=7, key=key, value=value, headers=[])


def test_messages_become_events_and_unmapped_spans_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    collected = Collected()
    with sdk_tracer(collected) as tracer:
        rec = emit_run(tracer, RUN, Clock())
    collected.spans.insert(0, collected.spans[0].__class__(
        name="GET /health", context=collected.spans[0].context.__class__(
            trace_id=int(rec.trace, 16), span_id=0x1234, is_remote=False), parent=None,
        resource=collected.spans[0].resource))
    translator, producer = _translator()
    [(key, value)] = split_by_trace(encode_spans(collected.spans))
    with caplog.at_level(logging.WARNING, logger="provstream.worker.otlp"):
        asyncio.run(translator.handle(_message(value, key)))
        asyncio.run(translator.handle(_message(value, key)))  # re-sent: nothing more
    events = [wire.decode_event(v) for topic, _, v, _ in producer.sent if topic == "ev"]
    assert {e.session_id for e in events} == {session_id(rec.trace, rec.agent)}
    assert len(events) == len(RUN.turns) + 2 and {(e.user, e.collection) for e in events} == {("u", "c")}
    assert translator.stats.unmapped == 1 and translator.stats.duplicates == len(collected.spans)
    assert "1 span(s) not mapped" in caplog.text


def test_undecodable_messages_are_dead_lettered_with_the_reason() -> None:
    translator, producer = _translator()
    asyncio.run(translator.handle(_message(b"\xff\xff\xff")))
    [(topic, key, value, headers)] = producer.sent
    assert (topic, key, value) == ("dlq", b"k", b"\xff\xff\xff")
    reason = dict(headers)["provstream.error"].decode()
    assert reason.startswith("not an OTLP ExportTraceServiceRequest")


def test_the_timer_translates_a_trace_whose_agent_span_came_first() -> None:
    collected = Collected()
    with sdk_tracer(collected) as tracer:
        emit_run(tracer, RUN, Clock())
    translator, producer = _translator()
    translator.settle_s = 1000.0
    for span in reversed(collected.spans):
        [(key, value)] = split_by_trace(encode_spans([span]))
        asyncio.run(translator.handle(_message(value, key)))
    assert producer.sent == []
    asyncio.run(translator.tick())
    assert producer.sent == []  # not settled yet
    translator.settle_s = 0.0
    asyncio.run(translator.tick())
    assert len(producer.sent) == len(RUN.turns) + 2
    asyncio.run(translator.tick())
    assert len(producer.sent) == len(RUN.turns) + 2
