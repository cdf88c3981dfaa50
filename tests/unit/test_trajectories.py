"""Trajectory files (bundled ReAct data + docrag/graphrag lines) and their replay."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from provstream.codec.records import decode_event
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.core import events as ev
from provstream.core.trajectories import AgentTrajectory, DocRagRun, GraphRagRun, load, parse_line, replay
from provstream.data import REACT_TRAJECTORIES
from provstream.errors import InvalidInput
from provstream.settings import Settings

DOCRAG = {"mechanism": "docrag", "question": "d?", "chunks": ["c1", "c2"], "answer": "da"}
GRAPHRAG = {"mechanism": "graphrag", "question": "g?", "edge_count": 9,
            "selected": [{"edge": ["http://x/s", "http://x/p", "o"], "reasoning": "r"}], "answer": "ga"}


def test_the_bundled_trajectories_load() -> None:
    records = [r for _, r in load(REACT_TRAJECTORIES)]
    assert len(records) == 12 and all(isinstance(r, AgentTrajectory) for r in records)
    first = records[0]
    assert isinstance(first, AgentTrajectory)
    assert first.steps[0].action == "Search" and first.steps[0].arguments == {"input": "Colorado orogeny"}
    assert first.answer == "1,800 to 7,000 ft"


def test_docrag_and_graphrag_lines() -> None:
    assert parse_line(json.dumps(DOCRAG)) == DocRagRun("d?", "da", ("c1", "c2"), 2)
    assert parse_line(json.dumps({**DOCRAG, "chunk_count": 7})).chunk_count == 7  # type: ignore[union-attr]
    assert parse_line(json.dumps(GRAPHRAG)) == GraphRagRun(
        "g?", "ga", 9, (ev.SelectedEdge("http://x/s", "http://x/p", "o", "r"),))


@pytest.mark.parametrize("line, message", [
    ("not json", "not JSON"),
    ("[1]", "expected a JSON object"),
    ('{"answer": "a"}', "missing 'question'"),
    ('{"question": "q"}', "missing 'answer'"),
    ('{"mechanism": "bogus", "question": "q", "answer": "a"}', "unknown mechanism"),
    ('{"question": "q", "answer": "a", "steps": [{"arguments": "x"}]}', "step 1: 'arguments' must be an object"),
    ('{"question": "q", "answer": "a", "steps": [{"thought": 1}]}', "step 1: 'thought' must be a string"),
    ('{"question": "q", "answer": "a", "steps": [{"used": [1]}]}', "step 1: 'used'"),
    ('{"mechanism": "docrag", "question": "q", "answer": "a", "chunks": [1]}', "chunk id"),
    ('{"mechanism": "graphrag", "question": "q", "answer": "a"}', "missing 'edge_count'"),
    ('{"mechanism": "graphrag", "question": "q", "answer": "a", "edge_count": 1, "selected": [{"edge": ["s"]}]}',
     "selected edge 1"),
])
def test_bad_lines_name_the_problem(line: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_line(line, "f.jsonl:3")


def test_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(DOCRAG) + "\n\n" + "{broken\n", encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"runs.jsonl:3: not JSON"):
        list(load(path))
    with pytest.raises(InvalidInput, match="cannot read"):
        list(load(tmp_path / "missing.jsonl"))


def test_replay_emits_each_run_as_a_session() -> None:
    transport = MemoryTransport()
    emitter = Emitter(Settings(), transport=transport)
    uris = [replay(emitter, r) for _, r in load(REACT_TRAJECTORIES)]
    uris.append(replay(emitter, parse_line(json.dumps(DOCRAG)), user="u", collection="c"))
    uris.append(replay(emitter, parse_line(json.dumps(GRAPHRAG)), session_id="g-1"))
    assert all(u.startswith("urn:trustgraph:agent:") for u in uris[:12])
    assert uris[12].startswith("urn:trustgraph:docrag:") and uris[13] == "urn:trustgraph:question:g-1"
    events = [decode_event(v) for _, v in transport.sent]
    steps = sum(len(r.steps) + 2 for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory))
    assert len(events) == steps + 3 + 4
    assert (events[-4].user, events[-5].user, events[-5].collection) == ("trustgraph", "u", "c")
