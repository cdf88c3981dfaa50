"""Issue 17, the read side against the real Neo4j: control characters (item 5), step IRIs (item 6)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

import pytest

from provstream import testing as samples
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core import vocab as v
from provstream.settings import Settings

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
HOSTILE = "x \x1b[2J\x1b[31mRED \x9b31m \u202eevil"


def run(settings: Settings, prog: str, *args: str) -> subprocess.CompletedProcess[str]:
    import os

    env = {k: val for k, val in os.environ.items() if not k.startswith("PROVSTREAM_")}
    for f in fields(settings):
        env["PROVSTREAM_" + f.name.upper()] = str(getattr(settings, f.name))
    return subprocess.run([str(BIN / prog), *args], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.fixture
def hostile(isolated: Settings, unique: str) -> Iterator[tuple[Settings, str]]:
    """An agent trace whose question, thought, observation and answer carry terminal escapes."""
    trajectory = {"question": HOSTILE, "answer": HOSTILE, "steps": [
        {"thought": HOSTILE, "action": "search", "arguments": {"q": HOSTILE}, "observation": HOSTILE},
        {"thought": "done", "action": "finish", "arguments": {}, "observation": ""},
    ]}
    events = samples.agent_events(trajectory, unique, start=START, user=isolated.user,
                                  collection=isolated.collection)
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(samples.fold_all(events))
        try:
            yield isolated, unique
        finally:
            store.reset_graph(user=isolated.user, collection=isolated.collection)


def assert_inert(text: str) -> None:
    for bad in ("\x1b", "\x9b", "\u202e", "\r"):
        assert bad not in text, f"{bad!r} reached the terminal"


def test_list_and_show_render_control_characters_visibly(hostile: tuple[Settings, str]) -> None:
    settings, session = hostile
    listed = run(settings, "tg-list-explain-traces")
    assert listed.returncode == 0, listed.stderr
    assert_inert(listed.stdout)
    assert "\\u001b[2J" in listed.stdout
    shown = run(settings, "tg-show-explain-trace", v.question_iri(v.Mechanism.AGENT, session))
    assert shown.returncode == 0, shown.stderr
    assert_inert(shown.stdout)
    assert shown.stdout.count("\\u001b[31mRED") >= 3  # question, thought, observation, answer
    as_json = run(settings, "tg-show-explain-trace", v.question_iri(v.Mechanism.AGENT, session), "--format", "json")
    assert_inert(as_json.stdout)
    loaded = json.loads(as_json.stdout)
    assert loaded["question"] == HOSTILE and loaded["conclusion"]["answer"] == HOSTILE  # JSON keeps the exact text
    exported = run(settings, "provstream", "export", v.question_iri(v.Mechanism.AGENT, session),
                   "--format", "nquads")
    assert exported.returncode == 0, exported.stderr
    assert_inert(exported.stdout)


def test_a_step_iri_shows_its_trace_with_the_step_marked(hostile: tuple[Settings, str]) -> None:
    settings, session = hostile
    question = v.question_iri(v.Mechanism.AGENT, session)
    shown = run(settings, "tg-show-explain-trace", v.analysis_iri(session, 2))
    assert shown.returncode == 0, shown.stderr
    assert f"Agent trace  {question}" in shown.stdout
    assert "(not recorded)" not in shown.stdout and "unknown" not in shown.stdout
    assert "Step i2  ◀ the step you asked for" in shown.stdout
    assert "Step i1\n" in shown.stdout
    final = run(settings, "tg-show-explain-trace", v.conclusion_iri(session))
    assert final.returncode == 0 and "Conclusion  ◀ the step you asked for" in final.stdout
    bogus = run(settings, "tg-show-explain-trace", "urn:example:not-a-trace")
    assert bogus.returncode == 1
    assert bogus.stderr.startswith("tg-show-explain-trace: 'urn:example:not-a-trace' is not a trace or step IRI")
    assert len(bogus.stderr.splitlines()) == 1
