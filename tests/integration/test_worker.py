"""The Faust worker on the real broker: triples out, crash recovery, dead letters."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient
from rdflib.compare import isomorphic
from worker_support import (
    TRAJECTORIES,
    alive,
    missing_report,
    producer,
    read_topic,
    running_worker,
    send_events,
    start_worker,
)

from provstream import testing
from provstream.codec import records as wire
from provstream.connectors.emitter import Emitter
from provstream.core import events as ev
from provstream.core.fold import fold
from provstream.core.triples import SessionState, StepTriples, Triple
from provstream.read.rdf import to_graph
from provstream.settings import Settings
from provstream.streams.expiry import TOUCHED
from provstream.topics import ERROR_HEADER, SOURCE_HEADERS, partition_for

pytestmark = pytest.mark.integration
T0 = datetime(2025, 3, 1, 12, tzinfo=UTC)


@pytest.fixture(scope="session")
def stack(kafka_stack: Settings) -> Settings:
    """The worker needs Kafka only: the shared ``isolated`` fixture, without Neo4j."""
    return kafka_stack


@pytest.fixture
def settings(isolated: Settings, tmp_path: Path) -> Settings:
    return replace(isolated, stack_dir=tmp_path)


def bundled_sessions(s: Settings, prefix: str, copies: int = 1) -> list[list[ev.Event]]:
    records = testing.load_trajectories(TRAJECTORIES)
    assert len(records) == 12
    return list(testing.sessions(records, prefix, T0, 12 * copies, collection=s.collection))


def offline(sessions: list[list[ev.Event]]) -> dict[str, StepTriples]:
    """The fold applied without Kafka: event id -> its triples message."""
    out = {}
    for session in sessions:
        state = None
        for e in session:
            state, step = fold(state, e)
            out[e.event_id] = step
    return out


def triples_messages(s: Settings, count: int, timeout: float = 60.0) -> list[StepTriples]:
    return [wire.decode_triples(r.value) for r in read_topic(s, s.triples_topic, count, timeout)]  # type: ignore[attr-defined]


def triples_covering(s: Settings, event_ids: set[str], timeout: float = 60.0) -> list[StepTriples]:
    """Triples messages from the start until every event id has one (duplicates are allowed)."""
    got = triples_messages(s, len(event_ids), timeout=timeout)
    deadline = time.monotonic() + timeout
    while not event_ids <= {m.event_id for m in got} and time.monotonic() < deadline:
        time.sleep(0.5)
        got = triples_messages(s, len(got) + 1, timeout=2)
    return got


def union(messages: list[StepTriples]) -> set[Triple]:
    return {t for m in messages for t in m.triples}


def emit_bundled(s: Settings) -> int:
    """The 12 bundled trajectories through the emitter, as an agent would record them; the event count."""
    records = testing.load_trajectories(TRAJECTORIES)
    assert len(records) == 12
    with Emitter(s) as emitter:
        for r in records:
            session = emitter.agent(r["question"])
            for step in r["steps"]:
                session.iteration(step["thought"], step["action"], step["arguments"], step["observation"])
            session.conclude(r["answer"])
        emitter.flush(30)
    return sum(len(r["steps"]) + 2 for r in records)


def test_bundled_trajectories_give_exactly_the_expected_triples(settings: Settings) -> None:
    count = emit_bundled(settings)
    events = [wire.decode_event(r.value) for r in read_topic(settings, settings.events_topic, count)]  # type: ignore[attr-defined]
    by_session: dict[str, list[ev.Event]] = {}
    for e in sorted(events, key=lambda e: e.seq):
        by_session.setdefault(e.session_id, []).append(e)
    expected = offline(list(by_session.values()))
    assert len(by_session) == 12 and len(expected) == count
    with running_worker(settings, log=settings.stack_dir / "worker.log") as worker:
        got = triples_covering(settings, set(expected))
        assert worker.descendants() == set(), "by default the worker folds in its own process"
        assert worker.stop() == 0, "SIGTERM must shut the worker down cleanly"
    assert {m.event_id for m in got} == set(expected)
    for m in got:
        assert m.triples == expected[m.event_id].triples
        assert (m.user, m.collection, m.question) == (settings.user, settings.collection, expected[m.event_id].question)
    assert isomorphic(to_graph(union(got)), to_graph(union(list(expected.values()))))
    last = {m.session_id: m for m in got}
    assert {m.status.state for m in last.values()} == {SessionState.CONCLUDED}


def _committed(s: Settings) -> int:
    admin = KafkaAdminClient(bootstrap_servers=s.kafka_bootstrap)
    try:
        offsets = admin.list_group_offsets(s.worker_app_id).get(s.worker_app_id, {})
        return sum(o.offset for o in offsets.values() if o.offset > 0)
    finally:
        admin.close()


def test_sigkill_mid_stream_loses_and_duplicates_nothing(settings: Settings, unique: str) -> None:
    """With the fold in a helper process (the default in-process fold is killed in ``make faults``)."""
    settings = replace(settings, worker_fold_process=1)
    sessions = bundled_sessions(settings, f"k{unique}", copies=10)
    expected = offline(sessions)
    # Round-robin by step: every session is still open when the worker dies.
    paced = sorted((e for s in sessions for e in s), key=lambda e: (e.seq, e.session_id))
    log = settings.stack_dir / "worker.log"
    first = start_worker(settings, log=log)
    p = producer(settings)

    def feed() -> None:
        for i in range(0, len(paced), 10):  # ~8 s: the worker commits (every 2.8 s) mid-way
            send_events(settings, paced[i:i + 10], p)
            time.sleep(0.12)

    feeder = threading.Thread(target=feed)
    second = None
    try:
        first.wait_ready()
        feeder.start()
        deadline = time.monotonic() + 30
        while _committed(settings) < len(paced) // 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        committed = _committed(settings)
        helpers = first.descendants()
        first.kill()
        assert helpers and alive(helpers, timeout=10) == set(), "a SIGKILLed worker's helper processes exit too"
        assert 0 < committed < len(paced), "the worker should die with part of the stream committed"
        feeder.join(30)
        second = start_worker(settings, log=log)
        second.wait_ready()
        got = triples_covering(settings, set(expected))
    finally:
        first.kill()
        if feeder.is_alive():
            feeder.join(30)
        p.close()
        if second is not None:
            assert second.stop() == 0
    missing = set(expected) - {m.event_id for m in got}
    assert not missing, missing_report(settings, missing)
    assert {m.event_id for m in got} == set(expected)
    assert union(got) == union(list(expected.values()))
    last = {m.session_id: m for m in got}
    assert len(last) == len(sessions)
    assert [s for s, m in last.items() if m.status.state is not SessionState.CONCLUDED] == []
    assert all(m.status.steps == m.status.expected for m in last.values())


def test_sigterm_to_the_process_group_mid_stream_stops_cleanly(settings: Settings, unique: str) -> None:
    """As ``provstream stack down`` stops it: the worker finishes the batch in hand, exits 0, its helper too."""
    settings = replace(settings, worker_fold_process=1)
    sessions = bundled_sessions(settings, f"t{unique}", copies=10)
    expected = offline(sessions)
    paced = sorted((e for s in sessions for e in s), key=lambda e: (e.seq, e.session_id))
    log = settings.stack_dir / "worker.log"
    first = start_worker(settings, log=log, own_group=True)
    p = producer(settings)
    try:
        first.wait_ready()
        helpers = first.descendants()
        send_events(settings, paced[: len(paced) // 2], p)
        deadline = time.monotonic() + 30
        while _committed(settings) == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        send_events(settings, paced[len(paced) // 2:], p)
        os.killpg(first.proc.pid, signal.SIGTERM)
        assert first.proc.wait(60) == 0, "a stop mid-stream is a clean exit"
        assert alive(helpers, timeout=10) == set()
    finally:
        first.kill()
        p.close()
    with running_worker(settings, log=log) as second:
        got = triples_covering(settings, set(expected))
        assert second.stop() == 0
    assert {m.event_id for m in got} == set(expected)
    assert union(got) == union(list(expected.values()))


@pytest.mark.parametrize("helper", [True, False], ids=["helper process", "in process"])
def test_garbage_and_invalid_events_go_to_the_dead_letter_topic(
    settings: Settings, unique: str, helper: bool,
) -> None:
    [good] = bundled_sessions(settings, f"g{unique}")[:1]
    bad_scope = replace(good[1], event_id="other", user="mallory")
    mode = replace(settings, worker_fold_process=int(helper))  # PROVSTREAM_WORKER_FOLD_PROCESS
    with running_worker(mode, log=settings.stack_dir / "worker.log") as worker:
        assert bool(worker.descendants()) == helper
        p = producer(settings)
        p.send(settings.events_topic, key=b"junk", value=b"\x00not avro at all", headers=[("origin", b"test")])
        send_events(settings, good[:1], p)
        send_events(settings, [bad_scope], p)
        send_events(settings, good[1:], p)
        p.close()
        got = triples_covering(settings, {e.event_id for e in good})
        dead = read_topic(settings, settings.events_dlq_topic, 2, timeout=60)
    # At-least-once: a rebalance may redeliver, so compare distinct records.
    assert list(dict.fromkeys(m.event_id for m in got)) == [e.event_id for e in good]
    assert got[-1].status.state is SessionState.CONCLUDED
    distinct = {(r.key, r.value): r for r in dead}  # type: ignore[attr-defined]
    assert len(distinct) == 2
    garbage = distinct[(b"junk", b"\x00not avro at all")]
    [invalid] = [r for k, r in distinct.items() if k[0] != b"junk"]
    assert wire.decode_event(invalid.value) == bad_scope  # type: ignore[attr-defined]
    for record, reason in ((garbage, "DecodeError"), (invalid, "InvalidEvent")):
        headers = dict(record.headers)  # type: ignore[attr-defined]
        assert headers[ERROR_HEADER].decode().startswith(reason)
        assert headers[SOURCE_HEADERS[0]].decode() == settings.events_topic
        assert int(headers[SOURCE_HEADERS[1]]) in range(settings.partitions)
        assert int(headers[SOURCE_HEADERS[2]]) >= 0
    assert dict(garbage.headers)["origin"] == b"test"  # type: ignore[attr-defined]


def test_the_changelog_holds_each_sessions_state_on_its_keys_partition(settings: Settings, unique: str) -> None:
    sessions = bundled_sessions(settings, f"c{unique}")
    expected = offline(sessions)
    final: dict[bytes, dict[str, object]] = {}
    for session in sessions:
        state = None
        for e in session:
            state, _ = fold(state, e)
        assert state is not None
        final[session[0].session_id.encode()] = state.to_dict()
    changelog = f"{settings.worker_app_id}-sessions-changelog"
    with running_worker(settings):
        send_events(settings, [e for session in sessions for e in session])
        triples_covering(settings, set(expected))
        last: dict[bytes, dict[str, object]] = {}
        deadline = time.monotonic() + 30
        while last != final and time.monotonic() < deadline:
            last = {}
            for r in read_topic(settings, changelog, 10**9, timeout=1.0):
                assert r.partition == partition_for(r.key, settings.partitions)  # type: ignore[attr-defined]
                value = json.loads(r.value)  # type: ignore[attr-defined]
                assert isinstance(value.pop(TOUCHED), float)
                last[r.key] = value  # type: ignore[attr-defined]
    assert last == final, "the last changelog record of each session is its final state"


def _tombstoned(s: Settings, key: bytes, timeout: float) -> bool:
    """Whether the worker's table changelog gets a tombstone for ``key`` within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        records = read_topic(s, f"{s.worker_app_id}-sessions-changelog", 10**9, timeout=1.0)
        if any(r.key == key and r.value is None for r in records):  # type: ignore[attr-defined]
            return True
    return False


def test_an_idle_session_is_forgotten_and_a_later_step_still_comes_through(settings: Settings, unique: str) -> None:
    s = replace(settings, session_retention_s=2)
    session = bundled_sessions(s, f"i{unique}")[0]
    expected = offline([session])
    log = s.stack_dir / "worker.log"
    with running_worker(s, "--log-level", "INFO", log=log):
        send_events(s, session)
        got = triples_covering(s, set(expected))
        assert got[-1].status.state is SessionState.CONCLUDED and not any(m.duplicate for m in got)
        key = session[0].session_id.encode()
        assert _tombstoned(s, key, timeout=30), "the idle session's state is deleted from the changelog"
        send_events(s, session[:1])  # the question again, after the session was forgotten
        again = triples_messages(s, len(got) + 1)[len(got):]
    assert "forgot 1 session(s) unchanged for 2s" in log.read_text()
    assert [m.event_id for m in again] == [session[0].event_id]
    assert again[0].triples == expected[session[0].event_id].triples, "its triples are the same as before"
    assert not again[0].duplicate and again[0].status.steps == 1, "a fresh state: the earlier steps are forgotten"
