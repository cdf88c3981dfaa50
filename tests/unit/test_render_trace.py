"""Triples -> trace model -> text / JSON, on the bundled ReAct trajectories (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from provstream import testing as samples
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.core.triples import Iri, Triple
from provstream.data import REACT_TRAJECTORIES
from provstream.errors import TraceNotFound
from provstream.read import render_json
from provstream.read.model import AgentTrace, Completeness, RagTrace
from provstream.read.parse import build_trace, trace_mechanism
from provstream.read.render_text import render_trace

START = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)
AGENT = v.Mechanism.AGENT


@pytest.fixture(scope="module")
def trajectories() -> list[dict]:
    return samples.load_trajectories(REACT_TRAJECTORIES)


def _trace(question: str, events: list[ev.Event]):
    msgs = samples.fold_all(events)
    return build_trace(question, samples.triples_of(msgs), Completeness.from_status(msgs[-1].status))


def _docrag(sid: str = "doc-1") -> list[ev.Event]:
    return samples.docrag_events(sid, "Where do the High Plains rise?", ["wiki:high-plains#3", "wiki:plains#1"],
                                 "From about 1,800 to 7,000 ft.", start=START)


def test_every_bundled_trajectory_renders_in_chain_order(trajectories) -> None:
    for n, t in enumerate(trajectories):
        sid = f"t{n}"
        trace = _trace(v.question_iri(AGENT, sid), samples.agent_events(t, sid, start=START))
        assert isinstance(trace, AgentTrace)
        assert [a.step for a in trace.analyses] == [f"i{k}" for k in range(1, len(t["steps"]) + 1)]
        assert trace.conclusion is not None and trace.conclusion.answer == t["answer"]
        assert trace.completeness.status == "complete"
        text = render_trace(trace, 100)
        assert text.index("Step i1") < text.index("Conclusion")
        assert "uses:" not in text  # linear chains never show DAG links


def test_agent_text_shows_question_steps_pretty_arguments_and_answer(trajectories) -> None:
    t = trajectories[0]
    text = render_trace(_trace(v.question_iri(AGENT, "a1"), samples.agent_events(t, "a1", start=START)), 100)
    assert text.startswith("Agent trace  urn:trustgraph:agent:a1\n")
    assert "2025-03-01 09:30:00 UTC" in text
    assert "complete · 7 steps" in text
    assert '{\n' in text and '"input": "Colorado orogeny"' in text  # pretty-printed JSON arguments
    assert "Answer       1,800 to 7,000 ft" in text


def test_long_texts_wrap_to_the_width(trajectories) -> None:
    t = trajectories[0]
    trace = _trace(v.question_iri(AGENT, "w"), samples.agent_events(t, "w", start=START))
    for width in (60, 100):
        lines = render_trace(trace, width).splitlines()
        assert max(len(line) for line in lines if "urn:" not in line) <= width


def test_dag_uses_are_shown_and_typed(trajectories) -> None:
    t = trajectories[0]
    events = samples.agent_events(t, "dag", start=START, used={3: (1,), 4: (1, 3)})
    trace = _trace(v.question_iri(AGENT, "dag"), events)
    assert isinstance(trace, AgentTrace)
    assert [a.uses for a in trace.analyses] == [(), ("i1",), ("i1",), ("i1", "i3"), ("i4",)]
    text = render_trace(trace, 100)
    assert "uses:        i1, i3" in text
    step3 = text[text.index("Step i3"):text.index("Step i4")]
    assert "uses:        i1\n" in step3
    assert "uses:" not in text[text.index("Step i5"):]


def test_subtrace_is_shown_inline_where_it_attaches(trajectories) -> None:
    t = trajectories[0]
    sub = ev.SubTrace(v.Mechanism.DOCRAG, "doc-1")
    trace = _trace(v.question_iri(AGENT, "p"), samples.agent_events(t, "p", start=START, subtraces={2: sub}))
    assert isinstance(trace, AgentTrace)
    synthesis = v.synthesis_iri(v.Mechanism.DOCRAG, "doc-1")
    assert trace.analyses[1].calls == (synthesis,)
    assert "(not recorded in this scope)" in render_trace(trace, 100)
    doc = _trace(v.question_iri(v.Mechanism.DOCRAG, "doc-1"), _docrag())
    assert isinstance(doc, RagTrace)
    full = AgentTrace(trace.question, trace.completeness, trace.analyses, trace.conclusion, ((synthesis, doc),))
    text = render_trace(full, 100)
    block = text[text.index("Step i2"):text.index("Step i3")]
    assert "Sub-trace:" in block and "DocRAG trace  urn:trustgraph:docrag:doc-1" in block
    assert "wiki:high-plains#3" in block
    data = render_json.trace_json(full)
    assert data["analyses"][1]["subtraces"][0]["type"] == "DocRAG"


def test_graphrag_and_docrag_render_their_stages() -> None:
    edges = [ev.SelectedEdge("http://ex.org/HighPlains", "http://ex.org/elevation", "1,800-7,000 ft",
                             "states the range"),
             ev.SelectedEdge("http://ex.org/HighPlains", "http://ex.org/partOf", "http://ex.org/GreatPlains")]
    g = _trace(v.question_iri(v.Mechanism.GRAPHRAG, "g1"),
               samples.graphrag_events("g1", "How high are the High Plains?", 120, edges, "Up to 7,000 ft.",
                                       start=START))
    text = render_trace(g, 100)
    assert text.startswith("GraphRAG trace  urn:trustgraph:question:g1")
    assert "Edges        120" in text and "Focus (2 edges selected)" in text
    assert "http://ex.org/HighPlains http://ex.org/elevation 1,800-7,000 ft" in text
    assert "reasoning: states the range" in text and "Up to 7,000 ft." in text
    d = render_trace(_trace(v.question_iri(v.Mechanism.DOCRAG, "doc-1"), _docrag()), 100)
    assert "Chunks       2" in d and "wiki:high-plains#3, wiki:plains#1" in d and "Focus" not in d


def test_type_comes_from_rdf_type_not_from_the_iri() -> None:
    iri = "urn:trustgraph:agent:odd"
    triples = [Triple(Iri(iri), Iri(v.RDF_TYPE), Iri(t)) for t in (v.TG_QUESTION, v.TG_DOCRAG_QUESTION)]
    assert trace_mechanism(iri, triples) is v.Mechanism.DOCRAG
    assert trace_mechanism(iri, triples[:1]) is None
    with pytest.raises(TraceNotFound):
        build_trace(iri, [])


def test_open_and_incomplete_sessions_show_what_is_missing(trajectories) -> None:
    t = trajectories[1]
    events = samples.agent_events(t, "gap", start=START)
    gap = [e for e in events if not (isinstance(e.payload, ev.AgentIteration) and e.payload.iteration == 2)]
    text = render_trace(_trace(v.question_iri(AGENT, "gap"), gap), 100)
    assert "incomplete · 4 of 5 steps · missing: i2" in text
    opened = _trace(v.question_iri(AGENT, "o"), samples.agent_events(t, "o", start=START, conclude=False))
    assert "open · 4 steps" in render_trace(opened, 100)
    assert "(not recorded yet)" in render_trace(opened, 100)


def test_question_step_missing_still_shows_the_trace(trajectories) -> None:
    events = samples.agent_events(trajectories[1], "nq", start=START)[1:]
    trace = _trace(v.question_iri(AGENT, "nq"), events)
    assert isinstance(trace, AgentTrace) and trace.question.query == ""
    assert "missing: question" in render_trace(trace, 100)


def test_json_is_a_structured_object(trajectories) -> None:
    t = trajectories[0]
    trace = _trace(v.question_iri(AGENT, "j"), samples.agent_events(t, "j", start=START, used={3: (1, 2)}))
    data = json.loads(render_json.dumps(trace))
    assert data["type"] == "Agent" and data["status"] == "complete"
    assert data["session_id"] == "urn:trustgraph:agent:j" and data["session"] == "j"
    assert data["time"] == "2025-03-01T09:30:00Z"
    assert data["analyses"][0]["arguments"] == {"input": "Colorado orogeny"}
    assert data["analyses"][2]["uses"] == ["i1", "i2"]
    assert data["analyses"][4]["arguments"] is None
    assert data["conclusion"]["answer"] == t["answer"]


def test_the_agent_name_and_conversation_show_when_recorded(trajectories) -> None:
    events = samples.agent_events(trajectories[0], "named", start=START)
    first = events[0]
    assert isinstance(first.payload, ev.AgentQuestion)
    named = ev.Event(first.event_id, first.session_id, first.mechanism, first.seq, first.event_time,
                     ev.AgentQuestion(first.payload.query, conversation_id="thread-4", agent_name="researcher"),
                     first.user, first.collection)
    trace = _trace(v.question_iri(AGENT, "named"), [named, *events[1:]])
    text = render_trace(trace, 100)
    assert "  Agent        researcher" in text and "  Conversation thread-4" in text
    data = render_json.trace_json(trace)
    assert (data["agent_name"], data["conversation_id"]) == ("researcher", "thread-4")
    plain = render_json.trace_json(_trace(v.question_iri(AGENT, "plain"),
                                          samples.agent_events(trajectories[0], "plain", start=START)))
    assert (plain["agent_name"], plain["conversation_id"]) == (None, None)
    assert "Agent  " not in render_trace(_trace(v.question_iri(AGENT, "plain"),
                                                samples.agent_events(trajectories[0], "plain", start=START)), 100)
