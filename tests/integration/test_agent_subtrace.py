"""An agent used as a tool (or handed off to): its session is a sub-trace of the calling step, read back from Neo4j."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from provstream import cli
from provstream import testing as samples
from provstream.cli.read import list_main, show_main
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.read.export import parse_rdf
from provstream.settings import Settings

pytestmark = pytest.mark.integration

START = datetime(2025, 3, 2, 9, 0, tzinfo=UTC)
AGENT = v.Mechanism.AGENT


@pytest.fixture
def recorded(isolated: Settings, unique: str) -> Iterator[tuple[Settings, str, str]]:
    """A parent agent whose step 2 called a sub-agent (trajectory 4 inside trajectory 3), written to Neo4j."""
    records = samples.load_trajectories()
    parent, child = f"{unique}-parent", f"{unique}-child"
    events = [
        *samples.agent_events(records[4], child, start=START + timedelta(seconds=1), user=isolated.user,
                              collection=isolated.collection, agent_name="researcher", conversation_id="thread-7"),
        *samples.agent_events(records[3], parent, start=START, user=isolated.user, collection=isolated.collection,
                              subtraces={2: ev.SubTrace(AGENT, child)}, agent_name="boss",
                              conversation_id="thread-7"),
    ]
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(samples.fold_all(events))
        try:
            yield isolated, v.question_iri(AGENT, parent), v.question_iri(AGENT, child)
        finally:
            store.reset_graph(user=isolated.user, collection=isolated.collection)


def test_the_sub_agent_is_nested_in_the_listing(recorded, capsys: pytest.CaptureFixture[str]) -> None:
    settings, parent, child = recorded
    assert list_main(["-C", settings.collection, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["session_id"] for r in rows] == [parent]
    assert [s["session_id"] for s in rows[0]["subtraces"]] == [child]


def test_show_renders_the_sub_agent_under_the_calling_step(recorded, capsys: pytest.CaptureFixture[str]) -> None:
    settings, parent, child = recorded
    records = samples.load_trajectories()
    assert show_main([parent, "-C", settings.collection]) == 0
    out = capsys.readouterr().out
    step2 = out[out.index("Step i2"):out.index("Step i3")]
    assert f"Agent trace  {child}" in step2 and records[4]["answer"] in step2
    assert show_main([parent, "-C", settings.collection, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    sub = data["analyses"][1]["subtraces"][0]
    assert sub["session_id"] == child and sub["conclusion"]["answer"] == records[4]["answer"]
    assert len(sub["analyses"]) == len(records[4]["steps"])


def test_the_agent_name_and_conversation_are_stored_shown_and_exported(
        recorded, capsys: pytest.CaptureFixture[str]) -> None:
    settings, parent, child = recorded
    with Neo4jStore(settings) as store:
        stored = store.trace_triples(child, user=settings.user, collection=settings.collection)
    extras = {(t.p.value, t.o.value) for t in stored if t.s.value == child and t.p.value in (
        v.TG_AGENT_NAME, v.TG_CONVERSATION_ID)}
    assert extras == {(v.TG_AGENT_NAME, "researcher"), (v.TG_CONVERSATION_ID, "thread-7")}
    assert show_main([parent, "-C", settings.collection, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["agent_name"], data["conversation_id"]) == ("boss", "thread-7")
    assert data["analyses"][1]["subtraces"][0]["agent_name"] == "researcher"
    assert cli.main(["export", child, "-C", settings.collection, "--format", "turtle"]) == 0
    assert parse_rdf(capsys.readouterr().out, "turtle") == stored
