"""provstream diff against the real Neo4j: two recordings of one trajectory, then one changed observation."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from provstream import cli
from provstream import testing as samples
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core import vocab as v
from provstream.settings import Settings

pytestmark = pytest.mark.integration

START = datetime(2025, 3, 4, 10, 0, tzinfo=UTC)
AGENT = v.Mechanism.AGENT


@pytest.fixture
def runs(isolated: Settings, unique: str) -> Iterator[tuple[Settings, str, str, str]]:
    """Three runs: ``a`` and ``b`` record the same trajectory, ``c`` the same with step 2's observation changed."""
    record = samples.load_trajectories()[0]
    changed = copy.deepcopy(record)
    changed["steps"][1]["observation"] = "The page was empty."
    scope = {"user": isolated.user, "collection": isolated.collection}
    events = [*samples.agent_events(record, f"{unique}-a", start=START, **scope),
              *samples.agent_events(record, f"{unique}-b", start=START.replace(hour=11), **scope),
              *samples.agent_events(changed, f"{unique}-c", start=START.replace(hour=12), **scope)]
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(samples.fold_all(events))
        try:
            yield isolated, *(v.question_iri(AGENT, f"{unique}-{s}") for s in "abc")  # type: ignore[misc]
        finally:
            store.reset_graph(user=isolated.user, collection=isolated.collection)


def test_two_recordings_of_the_same_trajectory_are_equivalent(runs, capsys: pytest.CaptureFixture[str]) -> None:
    settings, a, b, _ = runs
    assert cli.main(["diff", a, b, "-C", settings.collection]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("equivalent:") and "\x1b[" not in out  # no colour when not a terminal
    assert cli.main(["diff", a, b, "-C", settings.collection, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["equivalent"] is True and data["first_divergence"] is None
    assert all(s["same"] for s in data["steps"])


def test_one_changed_observation_is_the_exact_divergence(runs, capsys: pytest.CaptureFixture[str]) -> None:
    settings, a, _, c = runs
    assert cli.main(["diff", a, c, "-C", settings.collection, "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["equivalent"] is False
    assert data["first_divergence"] == {"index": 1, "a": "i2", "b": "i2"}
    differing = [s for s in data["steps"] if not s["same"]]
    assert len(differing) == 1 and differing[0]["matches"] is True
    assert differing[0]["differences"] == [{"field": "observation", "a": samples.load_trajectories()[0]["steps"][1][
        "observation"], "b": "The page was empty."}]
    assert cli.main(["diff", a, c, "-C", settings.collection]) == 1
    text = capsys.readouterr().out
    assert "≠ i2" in text and "◀ first divergence" in text and "A: " in text and "B: The page was empty." in text
    assert cli.main(["diff", a, c, "-C", settings.collection, "--format", "mermaid"]) == 1
    assert "a_1 -. differs .- b_1" in capsys.readouterr().out


def test_an_unknown_run_is_one_clear_line(runs, capsys: pytest.CaptureFixture[str]) -> None:
    settings, a, _, _ = runs
    assert cli.main(["diff", a, "urn:trustgraph:agent:nope", "-C", settings.collection]) == 1
    err = capsys.readouterr().err
    assert err.startswith("provstream: ") and len(err.strip().splitlines()) == 1
