"""tg-show-explain-trace --as-of / --as-of-offset on the real pipeline (worker + sink).

A session's steps arrive in three bursts; after each, once the graph holds
them, the live trace is captured with the wall time and the session's last
events-topic offset. Afterwards the trace shown as of each of those moments
equals what the live graph held then.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from kafka import KafkaConsumer, TopicPartition
from rdflib import Dataset, URIRef
from sink_support import produce_events, sink_process, wait_until
from worker_support import running_worker

from provstream import cli
from provstream import testing as samples
from provstream.cli.read import show_main
from provstream.core import vocab as v
from provstream.settings import Settings
from provstream.topics import partition_for

pytestmark = pytest.mark.integration

START = datetime(2025, 3, 5, 8, 0, tzinfo=UTC)


def _env(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> None:
    monkeypatch.setenv("PROVSTREAM_EVENTS_TOPIC", settings.events_topic)
    monkeypatch.setenv("PROVSTREAM_PARTITIONS", str(settings.partitions))


def _show(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert show_main([*argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _last_offset(settings: Settings, partition: int) -> int:
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(settings.events_topic, partition)
        return int(consumer.end_offsets([tp])[tp]) - 1
    finally:
        consumer.close()


def test_the_trace_as_of_three_moments_equals_the_live_graph_then(
        isolated: Settings, unique: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _env(monkeypatch, isolated)
    session = f"{unique}-grow"
    question = v.question_iri(v.Mechanism.AGENT, session)
    events = samples.agent_events(samples.load_trajectories()[0], session, start=START, user=isolated.user,
                                  collection=isolated.collection)
    bursts = [events[:2], events[2:4], events[4:]]
    partition = partition_for(session.encode(), isolated.partitions)
    scope = ["-C", isolated.collection]
    captured: list[tuple[dict, str, str]] = []
    with running_worker(isolated), sink_process(isolated):
        sent = 0
        for burst in bursts:
            produce_events(isolated, burst)
            sent += len(burst)

            def caught_up(n: int = sent) -> bool:
                try:
                    return _show(capsys, question, *scope)["steps"] == n
                except AssertionError:
                    capsys.readouterr()
                    return False

            wait_until(caught_up, 90, f"{sent} steps in Neo4j")
            live = _show(capsys, question, *scope)
            moment = datetime.now(UTC).isoformat().replace("+00:00", "Z")
            captured.append((live, moment, f"{partition}:{_last_offset(isolated, partition)}"))
            time.sleep(0.05)  # the next burst's timestamps come strictly after the moment
    statuses = [live["status"] for live, _, _ in captured]
    assert statuses == ["open", "open", "complete"]
    for live, moment, offset in captured:
        assert _show(capsys, question, *scope, "--as-of", moment) == live
        assert _show(capsys, question, *scope, "--as-of-offset", offset) == live
    assert show_main([question, *scope, "--as-of", "2000-01-01T00:00:00Z"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tg-show-explain-trace: ") and "as of 2000-01-01T00:00:00Z" in err
    # export as of the middle moment: the steps of the first two bursts only
    assert cli.main(["export", question, *scope, "--format", "trig", "--as-of", captured[1][1]]) == 0
    ds = Dataset()
    ds.parse(data=capsys.readouterr().out, format="trig")
    subjects = {str(s) for s in ds.graph(URIRef(v.GRAPH)).subjects()}
    assert v.analysis_iri(session, 3) in subjects and v.analysis_iri(session, 4) not in subjects


def test_bad_as_of_values_are_one_clear_line(isolated: Settings, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    _env(monkeypatch, isolated)
    question = v.question_iri(v.Mechanism.AGENT, "s1")
    for argv, needle in ((["--as-of", "yesterday"], "ISO 8601"), (["--as-of-offset", "x"], "PARTITION:OFFSET"),
                         (["--as-of-offset", "99:0"], "has no partition 99"),
                         (["--as-of-offset", "0:0", "--follow"], "cannot be combined")):
        assert show_main([question, "-C", isolated.collection, *argv]) == 1
        err = capsys.readouterr().err
        assert needle in err and len(err.strip().splitlines()) == 1, err
