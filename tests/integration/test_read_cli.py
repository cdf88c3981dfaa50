"""tg-list-explain-traces and tg-show-explain-trace against the real Neo4j (data written with Neo4jStore)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from provstream import testing as samples
from provstream.cli.read import list_main, show_main
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core import vocab as v
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TRAJECTORIES = samples.load_trajectories(REACT_TRAJECTORIES)
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
AGENT, DOCRAG, GRAPHRAG = v.Mechanism.AGENT, v.Mechanism.DOCRAG, v.Mechanism.GRAPHRAG


@pytest.fixture
def recorded(isolated: Settings, unique: str) -> Iterator[tuple[Settings, str]]:
    """The sample scenario written to Neo4j in this test's collection; removed afterwards."""
    msgs = samples.fold_all(samples.scenario(TRAJECTORIES, unique, start=START, user=isolated.user,
                                                collection=isolated.collection))
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(msgs)
        try:
            yield isolated, unique
        finally:
            store.reset_graph(user=isolated.user, collection=isolated.collection)


def _run(main, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_empty_scope_says_so_in_one_line(isolated: Settings, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(list_main, ["-C", isolated.collection], capsys)
    assert code == 0
    assert out == f"No traces for user 'trustgraph' in collection {isolated.collection!r}.\n"
    code, out, _ = _run(list_main, ["-C", isolated.collection, "--format", "json"], capsys)
    assert code == 0 and json.loads(out) == []


def test_list_is_newest_first_with_subtraces_nested(recorded, capsys: pytest.CaptureFixture[str]) -> None:
    settings, p = recorded
    code, out, _ = _run(list_main, ["-C", settings.collection, "--format", "json"], capsys)
    assert code == 0
    rows = json.loads(out)
    iri = v.question_iri
    assert [r["session_id"] for r in rows] == [iri(AGENT, f"{p}-open"), iri(AGENT, f"{p}-parent"),
                                               iri(GRAPHRAG, f"{p}-rag"), iri(AGENT, f"{p}-dag")]
    assert [r["type"] for r in rows] == ["Agent", "Agent", "GraphRAG", "Agent"]
    assert [r["status"] for r in rows] == ["open", "complete", "complete", "complete"]
    assert rows[1]["subtraces"] == [{
        "session_id": iri(DOCRAG, f"{p}-sub"), "session": f"{p}-sub", "type": "DocRAG",
        "question": "Who was Milhouse named after?", "time": "2025-03-01T09:02:02Z", "steps": 3,
        "status": "complete", "subtraces": []}]
    assert rows[3]["steps"] == len(TRAJECTORIES[0]["steps"]) + 2 and rows[3]["time"] == "2025-03-01T09:00:00Z"
    code, out, _ = _run(list_main, ["-C", settings.collection, "--limit", "2"], capsys)
    lines = out.splitlines()
    assert lines[0].split(" | ")[0].strip() == "Session ID" and len(lines) == 2 + 3 + 2  # 2 sessions + 1 sub-trace
    assert lines[-2] == "" and lines[-1].startswith("Neo4j Browser: http")  # + the Browser link
    assert lines[2].startswith(iri(AGENT, f"{p}-open")) and lines[4].startswith(f"  └ {iri(DOCRAG, f'{p}-sub')}")


def test_other_scopes_never_see_the_traces(recorded, capsys: pytest.CaptureFixture[str]) -> None:
    settings, p = recorded
    question = v.question_iri(AGENT, f"{p}-dag")
    for scope in (["-U", "someone-else", "-C", settings.collection], ["-C", settings.collection + "-other"]):
        code, out, _ = _run(list_main, [*scope, "--format", "json"], capsys)
        assert code == 0 and json.loads(out) == []
        code, out, err = _run(show_main, [question, *scope], capsys)
        assert code == 1 and out == ""
        assert err.startswith("tg-show-explain-trace: no trace urn:trustgraph:agent:") and err.count("\n") == 1


def test_unknown_uri_is_a_clear_error(recorded, capsys: pytest.CaptureFixture[str]) -> None:
    settings, _ = recorded
    code, out, err = _run(show_main, ["urn:trustgraph:agent:nope", "-C", settings.collection], capsys)
    assert code == 1 and out == ""
    assert "no trace urn:trustgraph:agent:nope" in err


def test_show_dag_trace_text_and_json(recorded, capsys: pytest.CaptureFixture[str]) -> None:
    settings, p = recorded
    question = v.question_iri(AGENT, f"{p}-dag")
    code, out, _ = _run(show_main, [question, "-C", settings.collection], capsys)
    assert code == 0
    assert out.startswith(f"Agent trace  {question}\n")
    assert "Time         2025-03-01 09:00:00 UTC" in out and "complete · 7 steps" in out
    assert "uses:        i1, i2" in out[out.index("Step i3"):out.index("Step i4")]
    assert '"input": "Colorado orogeny"' in out and "Answer       1,800 to 7,000 ft" in out
    code, out, _ = _run(show_main, [question, "-C", settings.collection, "--format", "json"], capsys)
    data = json.loads(out)
    assert data["type"] == "Agent" and [a["step"] for a in data["analyses"]] == ["i1", "i2", "i3", "i4", "i5"]
    assert data["analyses"][2]["uses"] == ["i1", "i2"] and data["conclusion"]["answer"] == "1,800 to 7,000 ft"


def test_show_subtrace_inline_and_rag_traces(recorded, capsys: pytest.CaptureFixture[str]) -> None:
    settings, p = recorded
    code, out, _ = _run(show_main, [v.question_iri(AGENT, f"{p}-parent"), "-C", settings.collection], capsys)
    assert code == 0
    step2 = out[out.index("Step i2"):out.index("Step i3")]
    assert f"DocRAG trace  {v.question_iri(DOCRAG, f'{p}-sub')}" in step2 and "simpsons.txt#12" in step2
    code, out, _ = _run(show_main, [v.question_iri(GRAPHRAG, f"{p}-rag"), "-C", settings.collection], capsys)
    assert out.startswith("GraphRAG trace") and "Edges        240" in out and "Focus (2 edges selected)" in out
    assert "reasoning: The edge states the elevation range asked for." in out
    code, out, _ = _run(show_main, [v.question_iri(DOCRAG, f"{p}-sub"), "-C", settings.collection,
                                    "--format", "json"], capsys)
    data = json.loads(out)
    assert data["type"] == "DocRAG" and data["exploration"]["chunks"] == ["nixon.txt#3", "simpsons.txt#12"]
    code, out, _ = _run(show_main, [v.question_iri(AGENT, f"{p}-open"), "-C", settings.collection], capsys)
    assert "open · " in out and "(not recorded yet)" in out


def test_console_scripts_and_neo4j_down(recorded) -> None:
    settings, p = recorded
    bin_dir = Path(sys.executable).parent
    done = subprocess.run([bin_dir / "tg-list-explain-traces", "-C", settings.collection],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and v.question_iri(AGENT, f"{p}-dag") in done.stdout
    env = {**os.environ, "PROVSTREAM_NEO4J_URI": "bolt://127.0.0.1:1"}
    for script in ("tg-list-explain-traces", "tg-show-explain-trace"):
        args = [bin_dir / script] + (["urn:trustgraph:agent:x"] if script.endswith("trace") else [])
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 1 and done.stdout == ""
        assert done.stderr.startswith(f"{script}: Neo4j unavailable") and done.stderr.count("\n") == 1

