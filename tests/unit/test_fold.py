"""The fold per mechanism, against hand-written expected graphs (rdflib ``isomorphic``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from rdflib import Graph
from rdflib.compare import graph_diff, isomorphic, to_isomorphic

from provstream.core import events as ev
from provstream.core.fold import FoldState, fold
from provstream.core.triples import SessionState, StepTriples
from provstream.core.vocab import Mechanism
from provstream.errors import InvalidEvent
from provstream.read.rdf import to_graph

T0 = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
PREFIXES = """
@prefix prov: <http://www.w3.org/ns/prov#> .
@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .
@prefix tg: <https://trustgraph.ai/ns/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
"""


def events(sid: str, mechanism: Mechanism, *payloads: ev.Payload, user: str = "trustgraph") -> list[ev.Event]:
    return [ev.Event(f"{sid}-e{seq}", sid, mechanism, seq, T0 + timedelta(seconds=seq), p, user, "default")
            for seq, p in enumerate(payloads)]


def run(evs: Sequence[ev.Event], state: FoldState | None = None) -> tuple[FoldState | None, list[StepTriples]]:
    out = []
    for e in evs:
        state, step = fold(state, e)
        out.append(step)
    return state, out


def assert_graph(steps: Sequence[StepTriples], turtle: str) -> None:
    produced = to_graph(t for s in steps for t in s.triples)
    expected = Graph().parse(data=PREFIXES + turtle, format="turtle")
    if not isomorphic(produced, expected):
        _, only_produced, only_expected = graph_diff(to_isomorphic(produced), to_isomorphic(expected))
        pytest.fail("graphs differ\nonly produced:\n" + only_produced.serialize(format="nt")
                    + "\nonly expected:\n" + only_expected.serialize(format="nt"))


def test_agent_trace() -> None:
    state, steps = run(events(
        "s1", Mechanism.AGENT,
        ev.AgentQuestion("What is the capital of France?"),
        ev.AgentIteration(1, "I should look it up.", "Search", '{"input": "France"}', "France's capital is Paris."),
        ev.AgentIteration(2, "So the answer is Paris."),
        ev.AgentConclusion("Paris", 2),
    ))
    assert_graph(steps, """
    <urn:trustgraph:agent:s1> a prov:Activity, tg:Question, tg:AgentQuestion ;
        tg:query "What is the capital of France?" ;
        prov:startedAtTime "2025-01-02T03:04:05.000000Z"^^xsd:dateTime .
    <urn:trustgraph:agent:s1/i1> a prov:Entity, tg:Analysis ;
        tg:thought "I should look it up." ; tg:action "Search" ; tg:arguments "{\\"input\\": \\"France\\"}" ;
        tg:observation "France's capital is Paris." ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s1> .
    <urn:trustgraph:agent:s1/i2> a prov:Entity, tg:Analysis ;
        tg:thought "So the answer is Paris." ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s1/i1> .
    <urn:trustgraph:agent:s1/final> a prov:Entity, tg:Conclusion ;
        tg:answer "Paris" ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s1/i2> .
    """)
    assert [s.status.state for s in steps] == [SessionState.OPEN] * 3 + [SessionState.CONCLUDED]
    assert steps[-1].status.steps == steps[-1].status.expected == 4
    assert {s.question for s in steps} == {"urn:trustgraph:agent:s1"}
    assert state is not None and state.iterations == 2


def test_docrag_trace() -> None:
    _, steps = run(events(
        "d1", Mechanism.DOCRAG,
        ev.DocRagQuestion("Who wrote Hamlet?"),
        ev.DocRagExploration(5, ("doc-1#3", "doc-2#7", "doc-1#3")),
        ev.DocRagSynthesis("William Shakespeare."),
    ))
    assert_graph(steps, """
    <urn:trustgraph:docrag:d1> a prov:Activity, tg:Question, tg:DocRagQuestion ;
        tg:query "Who wrote Hamlet?" ;
        prov:startedAtTime "2025-01-02T03:04:05.000000Z"^^xsd:dateTime .
    <urn:trustgraph:docrag:d1/exploration> a prov:Entity, tg:Exploration ;
        prov:wasGeneratedBy <urn:trustgraph:docrag:d1> ;
        tg:chunkCount "5"^^xsd:integer ;
        tg:selectedChunk "doc-1#3", "doc-2#7" .
    <urn:trustgraph:docrag:d1/synthesis> a prov:Entity, tg:Synthesis ;
        tg:content "William Shakespeare." ;
        prov:wasDerivedFrom <urn:trustgraph:docrag:d1/exploration> .
    """)
    assert steps[-1].status.state is SessionState.CONCLUDED and steps[-1].status.expected == 3


def test_graphrag_trace() -> None:
    _, steps = run(events(
        "g1", Mechanism.GRAPHRAG,
        ev.GraphRagQuestion("Where was Ada Lovelace born?"),
        ev.GraphRagExploration(12),
        ev.GraphRagFocus((
            ev.SelectedEdge("http://ex.org/Ada", "http://ex.org/bornIn", "http://ex.org/London", "states birthplace"),
            ev.SelectedEdge("http://ex.org/Ada", "http://ex.org/label", "Ada Lovelace"),
        )),
        ev.GraphRagSynthesis("London."),
    ))
    assert_graph(steps, """
    <urn:trustgraph:question:g1> a prov:Activity, tg:Question, tg:GraphRagQuestion ;
        tg:query "Where was Ada Lovelace born?" ;
        prov:startedAtTime "2025-01-02T03:04:05.000000Z"^^xsd:dateTime .
    <urn:trustgraph:prov:exploration:g1> a prov:Entity, tg:Exploration ;
        prov:wasGeneratedBy <urn:trustgraph:question:g1> ;
        tg:edgeCount "12"^^xsd:integer .
    <urn:trustgraph:prov:focus:g1> a prov:Entity, tg:Focus ;
        prov:wasDerivedFrom <urn:trustgraph:prov:exploration:g1> ;
        tg:selectedEdge <urn:trustgraph:prov:edge:g1:1>, <urn:trustgraph:prov:edge:g1:2> .
    <urn:trustgraph:prov:edge:g1:1>
        tg:edge [ a rdf:Statement ; rdf:subject <http://ex.org/Ada> ; rdf:predicate <http://ex.org/bornIn> ;
                  rdf:object <http://ex.org/London> ] ;
        tg:reasoning "states birthplace" .
    <urn:trustgraph:prov:edge:g1:2>
        tg:edge [ a rdf:Statement ; rdf:subject <http://ex.org/Ada> ; rdf:predicate <http://ex.org/label> ;
                  rdf:object "Ada Lovelace" ] .
    <urn:trustgraph:prov:synthesis:g1> a prov:Entity, tg:Synthesis ;
        tg:content "London." ;
        prov:wasDerivedFrom <urn:trustgraph:prov:focus:g1> .
    """)
    assert steps[-1].status.state is SessionState.CONCLUDED and steps[-1].status.expected == 4


def test_dag_iterations_derive_from_what_they_used() -> None:
    _, steps = run(events(
        "s2", Mechanism.AGENT,
        ev.AgentQuestion("q"),
        ev.AgentIteration(1, "a"), ev.AgentIteration(2, "b"),
        ev.AgentIteration(3, "c", used=(1,)),
        ev.AgentIteration(4, "d", used=(3, 2, 3)),
        ev.AgentConclusion("done", 4),
    ))
    assert_graph(steps, """
    <urn:trustgraph:agent:s2> a prov:Activity, tg:Question, tg:AgentQuestion ;
        tg:query "q" ; prov:startedAtTime "2025-01-02T03:04:05.000000Z"^^xsd:dateTime .
    <urn:trustgraph:agent:s2/i1> a prov:Entity, tg:Analysis ; tg:thought "a" ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s2> .
    <urn:trustgraph:agent:s2/i2> a prov:Entity, tg:Analysis ; tg:thought "b" ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s2/i1> .
    <urn:trustgraph:agent:s2/i3> a prov:Entity, tg:Analysis ; tg:thought "c" ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s2/i1> .
    <urn:trustgraph:agent:s2/i4> a prov:Entity, tg:Analysis ; tg:thought "d" ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s2/i2>, <urn:trustgraph:agent:s2/i3> .
    <urn:trustgraph:agent:s2/final> a prov:Entity, tg:Conclusion ; tg:answer "done" ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s2/i4> .
    """)


def test_subtrace_links_to_the_rag_synthesis() -> None:
    _, steps = run(events(
        "s3", Mechanism.AGENT,
        ev.AgentQuestion("q"),
        ev.AgentIteration(1, "ask the graph", "GraphRag", '{"q": "x"}', "x is y",
                          subtrace=ev.SubTrace(Mechanism.GRAPHRAG, "g7")),
        ev.AgentIteration(2, "", "DocRag", "{}", "found", used=(1,), subtrace=ev.SubTrace(Mechanism.DOCRAG, "d7")),
    ))
    assert_graph(steps, """
    <urn:trustgraph:agent:s3> a prov:Activity, tg:Question, tg:AgentQuestion ;
        tg:query "q" ; prov:startedAtTime "2025-01-02T03:04:05.000000Z"^^xsd:dateTime .
    <urn:trustgraph:agent:s3/i1> a prov:Entity, tg:Analysis ;
        tg:thought "ask the graph" ; tg:action "GraphRag" ; tg:arguments "{\\"q\\": \\"x\\"}" ;
        tg:observation "x is y" ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s3>, <urn:trustgraph:prov:synthesis:g7> .
    <urn:trustgraph:agent:s3/i2> a prov:Entity, tg:Analysis ;
        tg:action "DocRag" ; tg:arguments "{}" ; tg:observation "found" ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s3/i1>, <urn:trustgraph:docrag:d7/synthesis> .
    """)
    assert steps[-1].status.state is SessionState.OPEN and steps[-1].status.steps == 3


def test_an_agent_subtrace_links_to_the_sub_agents_conclusion() -> None:
    _, steps = run(events(
        "s4", Mechanism.AGENT,
        ev.AgentQuestion("q"),
        ev.AgentIteration(1, "", "researcher", '{"task": "x"}', "x is y", subtrace=ev.SubTrace(Mechanism.AGENT, "a9")),
    ))
    assert_graph(steps, """
    <urn:trustgraph:agent:s4> a prov:Activity, tg:Question, tg:AgentQuestion ;
        tg:query "q" ; prov:startedAtTime "2025-01-02T03:04:05.000000Z"^^xsd:dateTime .
    <urn:trustgraph:agent:s4/i1> a prov:Entity, tg:Analysis ;
        tg:action "researcher" ; tg:arguments "{\\"task\\": \\"x\\"}" ; tg:observation "x is y" ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s4>, <urn:trustgraph:agent:a9/final> .
    """)


def test_the_agent_question_keeps_its_conversation_and_agent_name_when_given() -> None:
    _, steps = run(events("s5", Mechanism.AGENT,
                          ev.AgentQuestion("q", conversation_id="thread-9", agent_name="researcher")))
    assert_graph(steps, """
    <urn:trustgraph:agent:s5> a prov:Activity, tg:Question, tg:AgentQuestion ;
        tg:query "q" ; tg:conversationId "thread-9" ; tg:agentName "researcher" ;
        prov:startedAtTime "2025-01-02T03:04:05.000000Z"^^xsd:dateTime .
    """)
    _, steps = run(events("s6", Mechanism.AGENT, ev.AgentQuestion("q", conversation_id="", agent_name=None)))
    assert_graph(steps, """
    <urn:trustgraph:agent:s6> a prov:Activity, tg:Question, tg:AgentQuestion ;
        tg:query "q" ; prov:startedAtTime "2025-01-02T03:04:05.000000Z"^^xsd:dateTime .
    """)


def test_conclusion_without_iterations_derives_from_the_question() -> None:
    _, steps = run(events("s4", Mechanism.AGENT, ev.AgentQuestion("hi"), ev.AgentConclusion("hello", 0)))
    assert_graph(steps, """
    <urn:trustgraph:agent:s4> a prov:Activity, tg:Question, tg:AgentQuestion ;
        tg:query "hi" ; prov:startedAtTime "2025-01-02T03:04:05.000000Z"^^xsd:dateTime .
    <urn:trustgraph:agent:s4/final> a prov:Entity, tg:Conclusion ; tg:answer "hello" ;
        prov:wasDerivedFrom <urn:trustgraph:agent:s4> .
    """)
    assert steps[-1].status.state is SessionState.CONCLUDED and steps[-1].status.expected == 2


def test_redelivery_is_flagged_and_gives_the_same_triples() -> None:
    evs = events("s5", Mechanism.AGENT, ev.AgentQuestion("q"), ev.AgentConclusion("a", 0))
    state, first = run(evs)
    again, second = run(evs, state)
    assert again == state
    assert [s.duplicate for s in second] == [True, True]
    assert [s.triples for s in second] == [s.triples for s in first]


def test_late_iteration_and_missing_iteration_are_visible() -> None:
    evs = events("s6", Mechanism.AGENT, ev.AgentQuestion("q"), ev.AgentIteration(1, "a"),
                 ev.AgentConclusion("x", 2), ev.AgentIteration(3, "late"))
    _, steps = run(evs)
    assert steps[2].status.state is SessionState.INCOMPLETE and steps[2].status.missing == (2,)
    assert steps[3].status.late == 1 and steps[3].status.missing == (2,)


def test_rag_without_question_is_incomplete() -> None:
    evs = events("d2", Mechanism.DOCRAG, ev.DocRagQuestion("q"), ev.DocRagExploration(0), ev.DocRagSynthesis("c"))
    _, steps = run(evs[1:])
    assert steps[-1].status.state is SessionState.INCOMPLETE and steps[-1].status.missing == (0,)


@pytest.mark.parametrize("bad", [
    ev.AgentIteration(0), ev.AgentIteration(2, used=(2,)), ev.AgentIteration(1, action="x", arguments="{"),
    ev.AgentIteration(1, subtrace=ev.SubTrace(Mechanism.AGENT, "s7")), ev.AgentConclusion("x", -1),
    ev.AgentIteration(1, subtrace=ev.SubTrace(Mechanism.DOCRAG, "bad id")),
    ev.GraphRagQuestion("wrong mechanism"),
])
def test_invalid_payloads_are_rejected(bad: ev.Payload) -> None:
    with pytest.raises(InvalidEvent):
        fold(None, events("s7", Mechanism.AGENT, bad)[0])


def test_invalid_envelopes_are_rejected() -> None:
    good = events("s8", Mechanism.AGENT, ev.AgentQuestion("q"))[0]
    for bad in (
        ev.Event("e", "bad id", Mechanism.AGENT, 0, T0, good.payload),
        ev.Event("e", "s8", Mechanism.AGENT, 0, T0, good.payload, user=""),
        ev.Event("e", "s8", Mechanism.AGENT, 0, T0.replace(tzinfo=None), good.payload),
    ):
        with pytest.raises(InvalidEvent):
            fold(None, bad)


def test_state_round_trips_through_a_dict() -> None:
    state, _ = run(events("s9", Mechanism.AGENT, ev.AgentQuestion("q"), ev.AgentConclusion("a", 0)))
    assert state is not None and FoldState.from_dict(state.to_dict()) == state
