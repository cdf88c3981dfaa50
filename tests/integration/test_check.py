"""provstream check against the real Neo4j: stalled open sessions and concluded sessions with missing steps."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from provstream import cli
from provstream import testing as samples
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def scope(isolated: Settings, unique: str) -> Iterator[tuple[Settings, str]]:
    """``done`` complete; ``stalled`` open since an hour; ``fresh`` open since now; ``gap`` concluded without i2."""
    records = samples.load_trajectories()
    now = datetime.now(UTC)
    kw = {"user": isolated.user, "collection": isolated.collection}
    gap = samples.agent_events(records[1], f"{unique}-gap", start=now - timedelta(hours=2), **kw)
    events = [*samples.agent_events(records[0], f"{unique}-done", start=now - timedelta(hours=3), **kw),
              *samples.agent_events(records[2], f"{unique}-stalled", start=now - timedelta(hours=1), conclude=False,
                                    **kw),
              *samples.agent_events(records[3], f"{unique}-fresh", start=now, conclude=False, **kw),
              *[e for e in gap if e.seq != 2]]
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(samples.fold_all(events))
        try:
            yield isolated, unique
        finally:
            store.reset_graph(user=isolated.user, collection=isolated.collection)


def test_check_lists_stalled_and_incomplete_sessions(scope, capsys: pytest.CaptureFixture[str]) -> None:
    settings, u = scope
    assert cli.main(["check", "-C", settings.collection, "--format", "json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert [(p["session"], p["status"]) for p in found] == [(f"{u}-gap", "incomplete"), (f"{u}-stalled", "open")]
    assert found[0]["missing_steps"] == ["i2"] and "missing steps: i2" in found[0]["reason"]
    assert found[1]["reason"].startswith("open for 1h")
    assert cli.main(["check", "-C", settings.collection, "--older-than", "2h"]) == 1
    text = capsys.readouterr().out
    assert f"{u}-gap" in text and f"{u}-stalled" not in text and text.startswith("1 session needs a look")


def test_check_of_a_clean_scope_exits_0(isolated: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", "-C", isolated.collection]) == 0
    assert capsys.readouterr().out.startswith("all sessions complete")
    assert cli.main(["check", "-C", isolated.collection, "--older-than", "soon"]) == 1
    assert "--older-than wants a duration" in capsys.readouterr().err
