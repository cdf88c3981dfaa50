"""Helpers for the sink and replay integration tests (imported by them; holds no tests).

Sessions come from the bundled ReAct trajectories
(``provstream/data/react/hotpot_fever.jsonl``); triples messages are
made with the pure fold, so these tests do not need the worker.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition
from neo4j import GraphDatabase

from provstream.codec import records as wire
from provstream.core import events as ev
from provstream.core.triples import StepTriples
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings
from provstream.testing import load_trajectories, trajectory_events

REPO = Path(__file__).resolve().parents[2]
TRAJECTORIES = REACT_TRAJECTORIES
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def sessions(settings: Settings, prefix: str, copies: int = 1) -> list[list[ev.Event]]:
    """``copies`` × the 12 bundled trajectories as agent sessions in the settings' scope."""
    records = load_trajectories(TRAJECTORIES)
    return [
        trajectory_events(records[n % len(records)], f"{prefix}-{n}", START, settings.user, settings.collection)
        for n in range(copies * len(records))
    ]




def interleave(per_session: Sequence[Sequence[Any]]) -> list[Any]:
    """Round-robin over sessions, keeping each session's order (as live agents would)."""
    out, longest = [], max((len(s) for s in per_session), default=0)
    for i in range(longest):
        out.extend(s[i] for s in per_session if i < len(s))
    return out


def produce(settings: Settings, topic: str, items: Iterable[tuple[str | None, bytes, int | None]]) -> int:
    """Send (key, value, timestamp ms or None) records and wait for all acks."""
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all", linger_ms=5)
    try:
        futures = [producer.send(topic, key=None if k is None else k.encode(), value=v, timestamp_ms=ts)
                   for k, v, ts in items]
        producer.flush()
        for f in futures:
            f.get(timeout=30)
        return len(futures)
    finally:
        producer.close(timeout=10)


def produce_triples(settings: Settings, messages: Iterable[StepTriples]) -> int:
    return produce(settings, settings.triples_topic, ((m.session_id, wire.encode_triples(m), None) for m in messages))


def produce_events(settings: Settings, events: Iterable[ev.Event], timestamp_ms: int | None = None) -> int:
    return produce(settings, settings.events_topic,
                   ((e.session_id, wire.encode_event(e), timestamp_ms) for e in events))


def committed_total(settings: Settings) -> tuple[int, int]:
    """(offsets committed by the sink group, end offsets) summed over the triples topic."""
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, group_id=settings.sink_group,
                             enable_auto_commit=False)
    try:
        parts = [TopicPartition(settings.triples_topic, p)
                 for p in consumer.partitions_for_topic(settings.triples_topic) or ()]
        ends = consumer.end_offsets(parts)
        done = sum(consumer.committed(tp) or 0 for tp in parts)
        return done, sum(ends.values())
    finally:
        consumer.close(autocommit=False)


def read_topic(settings: Settings, topic: str, expected: int, timeout: float = 30) -> list[Any]:
    consumer = KafkaConsumer(topic, bootstrap_servers=settings.kafka_bootstrap, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    records: list[Any] = []
    try:
        deadline = time.monotonic() + timeout
        while len(records) < expected and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                records.extend(batch)
        return records
    finally:
        consumer.close(autocommit=False)


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def env_for(settings: Settings, **extra: str) -> dict[str, str]:
    """The environment that makes a child process read these settings."""
    env = dict(os.environ)
    for f in fields(settings):
        if f.repr:  # secrets (repr=False) are read by the child from the stack's secret file
            env["PROVSTREAM_" + f.name.upper()] = str(getattr(settings, f.name))
    env.update(extra)
    return env


@contextmanager
def sink_process(settings: Settings, timeout: float = 60, **extra_env: str) -> Iterator[subprocess.Popen[str]]:
    """``provstream sink`` as a child process, ready when yielded; always killed on exit."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "provstream", "sink"], env=env_for(settings, **extra_env),
                                stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            line = proc.stdout.readline() if ready else ""
            if "provstream sink ready" not in line:
                proc.kill()
                proc.wait(timeout=30)
                err.seek(0)
                raise AssertionError(f"sink not ready after {timeout} s: {line!r} {err.read()[-2000:]}")
            yield proc
        except BaseException:
            err.seek(0)
            print(f"--- sink stderr ---\n{err.read()[-5000:]}")  # shown by pytest with the failure
            raise
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            if proc.stdout is not None:
                proc.stdout.close()


@contextmanager
def cypher(settings: Settings) -> Iterator[Callable[..., list[dict[str, Any]]]]:
    """Run read queries against the shared Neo4j (for assertions)."""
    with GraphDatabase.driver(settings.neo4j_uri, auth=settings.neo4j_auth) as driver:
        def run(query: Any, **params: Any) -> list[dict[str, Any]]:
            records, _, _ = driver.execute_query(query, params, database_=settings.neo4j_database,
                                                 routing_="r")
            return [r.data() for r in records]
        yield run
