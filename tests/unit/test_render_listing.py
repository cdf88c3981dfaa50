"""Listing rows -> table / JSON, and live step lines (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from provstream import testing as samples
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.data import REACT_TRAJECTORIES
from provstream.read.listing import EMPTY, render_table, row_from_record, rows_json, trace_type
from provstream.read.steps import describe, format_line, in_scope

START = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


def _record(iri: str, labels: list[str], query: str, minute: int, subtraces: list | None = None) -> dict:
    return {"iri": iri, "session": iri.rsplit(":", 1)[-1], "labels": ["Resource", "Question", *labels],
            "query": query, "time": START.replace(minute=minute), "steps": 3, "status": "complete",
            "subtraces": subtraces or []}


def test_type_comes_from_the_labels() -> None:
    assert trace_type(["Resource", "Question", "AgentQuestion", "Activity"]) == "Agent"
    assert trace_type(["GraphRagQuestion"]) == "GraphRAG"
    assert trace_type(["DocRagQuestion"]) == "DocRAG"
    assert trace_type(["Question"]) == "?"


def test_subtraces_nest_under_their_parent_in_table_and_json() -> None:
    sub = _record("urn:trustgraph:docrag:d1", ["DocRagQuestion"], "Where?", 31)
    rows = [row_from_record(_record("urn:trustgraph:agent:a1", ["AgentQuestion"], "Why? " * 40, 35, [sub])),
            row_from_record(_record("urn:trustgraph:question:g1", ["GraphRagQuestion"], "Who?", 20))]
    table = render_table(rows, 120).splitlines()
    header = [c.strip() for c in table[0].split(" | ")]
    assert header == ["Session ID", "Type", "Question", "Time (UTC)", "Steps", "Status"]
    assert table[2].startswith("urn:trustgraph:agent:a1") and "…" in table[2]
    assert table[3].startswith("  └ urn:trustgraph:docrag:d1") and "DocRAG" in table[3]
    assert table[4].startswith("urn:trustgraph:question:g1")
    assert all(len(line) <= 120 for line in table)
    narrow = render_table(rows, 60).splitlines()
    assert "Why? Why? Why? Why? Why? Why?…" in narrow[2]  # the question keeps a readable width
    data = json.loads(rows_json(rows))
    assert [d["type"] for d in data] == ["Agent", "GraphRAG"]
    assert data[0]["subtraces"][0]["session_id"] == "urn:trustgraph:docrag:d1"
    assert set(data[0]) >= {"session_id", "type", "question", "time", "steps", "status", "subtraces"}
    assert data[0]["time"] == "2025-03-01T09:35:00Z"


def test_empty_message_names_the_scope() -> None:
    assert EMPTY.format(user="u", collection="c") == "No traces for user 'u' in collection 'c'."


def test_live_lines_name_session_type_step_and_text() -> None:
    t = samples.load_trajectories(REACT_TRAJECTORIES)[0]
    msgs = samples.fold_all(samples.agent_events(t, "live", start=START))
    lines = [describe(m) for m in msgs]
    assert [x.step for x in lines] == ["question", "i1", "i2", "i3", "i4", "i5", "conclusion"]
    assert lines[0].text == t["question"] and lines[0].type == "Agent" and lines[0].session_id == "live"
    assert lines[1].text.startswith("I need to search Colorado orogeny") and 'Search {"input"' in lines[1].text
    assert lines[-1].text == t["answer"] and lines[-1].status == "complete"
    out = format_line(lines[1], 80)
    assert len(out) <= 80 and out.startswith("urn:trustgraph:agent:live  Agent    i1") and out.endswith("[open]")
    rag = samples.fold_all(samples.docrag_events("d", "q?", ["c1", "c2"], "answer", start=START))
    assert [describe(m).text for m in rag] == ["q?", "2 chunks: c1, c2", "answer"]
    edges = [ev.SelectedEdge("http://ex.org/a", "http://ex.org/p", "x")]
    graph = samples.fold_all(samples.graphrag_events("g", "q?", 9, edges, "answer", start=START))
    assert [describe(m).step for m in graph] == ["question", "exploration", "focus", "synthesis"]
    assert describe(graph[2]).text == "1 edges selected" and describe(graph[1]).text == "9 edges"


def test_scope_filter() -> None:
    msg = samples.fold_all(samples.docrag_events("d", "q?", [], "a", start=START, user="u", collection="c"))[0]
    assert in_scope(msg, user="u", collection="c")
    assert not in_scope(msg, user="u", collection="other")
    assert not in_scope(msg, user="x", collection="c")
    assert in_scope(msg, user="u", collection="c", question=v.question_iri(v.Mechanism.DOCRAG, "d"))
    assert not in_scope(msg, user="u", collection="c", question="urn:trustgraph:docrag:other")
