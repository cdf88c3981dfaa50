"""Replay on the real Kafka and Neo4j: the events topic rebuilds the same graph.

Resets here are scoped to the test's own collection: the CLI's
``--reset-graph`` wipes every scope, which would disturb other tests sharing
the server, so the CLI is exercised without it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest
from kafka import KafkaConsumer
from kafka.structs import TopicPartition
from rdflib.compare import isomorphic
from sink_support import (
    env_for,
    interleave,
    produce_events,
    produce_triples,
    sessions,
    sink_process,
    wait_until,
)

from provstream.codec import records as wire
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.connectors.replay import Reset, StartAt, replay
from provstream.core import events as ev
from provstream.core.triples import Triple
from provstream.read.rdf import to_graph
from provstream.settings import Settings
from provstream.testing import fold_all, triples_of

pytestmark = pytest.mark.integration


def _scope(store: Neo4jStore, settings: Settings) -> set[Triple]:
    return store.scope_triples(user=settings.user, collection=settings.collection)


def _reset(settings: Settings) -> Reset:
    return Reset(user=settings.user, collection=settings.collection)


def test_wipe_and_replay_gives_the_live_graph_again(isolated: Settings, unique: str) -> None:
    events = interleave(sessions(isolated, f"replay-{unique}", copies=2))
    messages = fold_all(events)
    produce_events(isolated, events)
    produce_triples(isolated, messages)  # what the worker would have written
    try:
        with sink_process(isolated) as proc:
            wait_until(lambda: _count(isolated) == len(triples_of(messages)), 90, "the live graph")
            proc.terminate()
            assert proc.wait(timeout=30) == 0
        with Neo4jStore(isolated) as store:
            live = _scope(store, isolated)
        stats = replay(isolated, StartAt.beginning(), reset=_reset(isolated))
        assert stats.deleted > 0
        assert (stats.events, stats.skipped, len(stats.sessions)) == (len(events), 0, 24)
        assert stats.triples == sum(len(m.triples) for m in messages)
        with Neo4jStore(isolated) as store:
            rebuilt = _scope(store, isolated)
        assert isomorphic(to_graph(rebuilt), to_graph(live))
        assert rebuilt == live == triples_of(messages)
    finally:
        _wipe(isolated)


def test_replay_command_from_an_offset_reads_only_that_part(isolated: Settings, unique: str) -> None:
    per_session = sessions(isolated, f"offset-{unique}")
    events = [e for s in per_session for e in s]
    produce_events(isolated, events)
    partition, offset = _second_half_start(isolated)
    try:
        done = subprocess.run([sys.executable, "-m", "provstream", "replay", "--from-offset", f"{partition}:{offset}"],
                              env=env_for(isolated), capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("replayed ") and "triples written in" in done.stdout
        assert done.stderr == ""  # piped, a short replay draws no progress (test_first_hour_progress.py: a terminal)
        wanted = _events_from(isolated, partition, offset)
        with Neo4jStore(isolated) as store:
            assert _scope(store, isolated) == triples_of(fold_all(wanted))
    finally:
        _wipe(isolated)


def test_replay_from_a_time_starts_at_the_first_later_event(isolated: Settings, unique: str) -> None:
    per_session = sessions(isolated, f"time-{unique}")
    old, new = per_session[:6], per_session[6:]
    cut = int(time.time() * 1000)
    produce_events(isolated, [e for s in old for e in s], timestamp_ms=cut - 60_000)
    produce_events(isolated, [e for s in new for e in s], timestamp_ms=cut)
    try:
        stats = replay(isolated, StartAt(time=_ms_to_datetime(cut - 1000)))
        assert stats.events == sum(len(s) for s in new)
        with Neo4jStore(isolated) as store:
            assert _scope(store, isolated) == triples_of(fold_all(e for s in new for e in s))
    finally:
        _wipe(isolated)


# -- helpers --------------------------------------------------------------------

def _count(settings: Settings) -> int:
    with Neo4jStore(settings) as store:
        return len(_scope(store, settings))


def _wipe(settings: Settings) -> None:
    with Neo4jStore(settings) as store:
        store.reset_graph(user=settings.user, collection=settings.collection)


def _second_half_start(settings: Settings) -> tuple[int, int]:
    """The fullest partition and the offset halfway into it."""
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, group_id=None)
    try:
        parts = [TopicPartition(settings.events_topic, p) for p in consumer.partitions_for_topic(settings.events_topic)]
        ends = consumer.end_offsets(parts)
        fullest = max(parts, key=lambda tp: ends[tp])
        return fullest.partition, ends[fullest] // 2
    finally:
        consumer.close(autocommit=False)


def _events_from(settings: Settings, partition: int, offset: int) -> list[ev.Event]:
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, group_id=None)
    tp = TopicPartition(settings.events_topic, partition)
    try:
        consumer.assign([tp])
        consumer.seek(tp, offset)
        end = consumer.end_offsets([tp])[tp]
        out: list[ev.Event] = []
        while consumer.position(tp) < end:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(wire.decode_event(r.value) for r in records)
        return out
    finally:
        consumer.close(autocommit=False)


def _ms_to_datetime(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
