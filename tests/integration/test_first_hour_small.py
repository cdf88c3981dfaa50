"""Issue 17 item 10 on the real stack: an oversized step is recorded as a
marker step saying so; ``provstream dlq`` lists and inspects the dead-letter
topics with their reasons."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from worker_support import producer, read_topic, running_worker, send_events

from provstream import testing as samples
from provstream.codec.records import decode_event
from provstream.connectors.emitter import TOO_LARGE, Emitter
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
TRAJECTORY = samples.load_trajectories(REACT_TRAJECTORIES)[0]


def run(settings: Settings, prog: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: val for k, val in os.environ.items() if not k.startswith("PROVSTREAM_")}
    for f in fields(settings):
        env["PROVSTREAM_" + f.name.upper()] = str(getattr(settings, f.name))
    env.update(extra, COLUMNS="200")
    return subprocess.run([str(BIN / prog), *args], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_an_oversized_step_is_recorded_as_a_marker_that_show_displays(isolated: Settings, unique: str) -> None:
    with Emitter(isolated) as emitter:
        session = emitter.agent("How big can one step be?", session_id=f"big-{unique}")
        session.iteration(thought="small", action="search", observation="fits")
        session.iteration(thought="huge", action="search", observation="x" * (2 * isolated.max_message_bytes))
        session.conclude("done")
        assert emitter.too_large == 1
    events = [decode_event(r.value) for r in read_topic(isolated, isolated.events_topic, 4, timeout=30)]  # type: ignore
    events.sort(key=lambda e: e.seq)
    assert [type(e.payload).__name__ for e in events] == ["AgentQuestion", "AgentIteration", "AgentIteration",
                                                         "AgentConclusion"]
    marker = events[2].payload
    assert marker.iteration == 2 and marker.thought.startswith(TOO_LARGE)  # type: ignore[union-attr]
    size = int(marker.thought.removeprefix(TOO_LARGE + ": ").split()[0])  # type: ignore[union-attr]
    assert size > 2 * isolated.max_message_bytes and marker.observation == ""  # type: ignore[union-attr]
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(samples.fold_all(events))
    shown = run(isolated, "tg-show-explain-trace", session.uri)
    assert shown.returncode == 0, shown.stderr
    assert "complete · 4 steps" in shown.stdout and "step too large to record" in shown.stdout, shown.stdout


def test_dlq_lists_and_inspects_dead_letters_with_their_reasons(isolated: Settings, unique: str,
                                                                tmp_path: Path) -> None:
    empty = run(isolated, "provstream", "dlq")
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout == f"{isolated.events_dlq_topic}: 0 records\n{isolated.triples_dlq_topic}: 0 records\n"
    [good] = [samples.agent_events(TRAJECTORY, f"g-{unique}", start=datetime.now(UTC), user=isolated.user,
                                   collection=isolated.collection)]
    bad_scope = replace(good[1], event_id=f"other-{unique}", user="mallory")
    with running_worker(replace(isolated, stack_dir=tmp_path)):
        p = producer(isolated)
        p.send(isolated.events_topic, key=b"junk", value=b"\x00not avro at all")
        send_events(isolated, good[:1], p)
        send_events(isolated, [bad_scope], p)
        p.close()
        read_topic(isolated, isolated.events_dlq_topic, 2, timeout=60)

    listed = run(isolated, "provstream", "dlq")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == f"{isolated.events_dlq_topic}: 2 records", listed.stdout
    assert any("DecodeError" in line for line in lines[1:3]) and any("InvalidEvent" in line for line in lines[1:3])
    assert lines[3] == f"{isolated.triples_dlq_topic}: 0 records"

    shown = run(isolated, "provstream", "dlq", "events", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    letters = json.loads(shown.stdout)
    by_key = {x["key"]: x for x in letters}
    assert by_key["junk"]["reason"].startswith("DecodeError") and by_key["junk"]["session"] is None
    invalid = by_key[f"g-{unique}"]
    assert invalid["reason"].startswith("InvalidEvent") and invalid["user"] == "mallory"
    assert invalid["source"].startswith(f"{isolated.events_topic} ") and "@" in invalid["source"]
    text = run(isolated, "provstream", "dlq", "events")
    assert "reason  DecodeError" in text.stdout and "reason  InvalidEvent" in text.stdout, text.stdout
    mallory = json.loads(run(isolated, "provstream", "dlq", "events", "-U", "mallory", "--format", "json").stdout)
    assert [x["key"] for x in mallory] == [f"g-{unique}"]
    missing = run(isolated, "provstream", "dlq", "events", PROVSTREAM_EVENTS_DLQ_TOPIC=f"test.{unique}.none")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "does not exist" in missing.stderr
