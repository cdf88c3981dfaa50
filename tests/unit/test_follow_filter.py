"""Following one trace live: its own steps, and its sub-traces' steps once an iteration links them."""

from __future__ import annotations

from datetime import UTC, datetime

from provstream import testing as samples
from provstream.core import vocab as v
from provstream.data import REACT_TRAJECTORIES
from provstream.read import follow

TRAJECTORIES = samples.load_trajectories(REACT_TRAJECTORIES)
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
PARENT = v.question_iri(v.Mechanism.AGENT, "t-parent")
SUB = v.question_iri(v.Mechanism.DOCRAG, "t-sub")


def messages():  # type: ignore[no-untyped-def]
    return samples.fold_all(samples.scenario(TRAJECTORIES, "t", start=START))


def shown(trace: follow.TraceFilter, msgs) -> list[tuple[str, int, bool]]:  # type: ignore[no-untyped-def]
    return [(m.question, m.seq, sub) for msg in msgs for m, sub in trace.feed(msg)]


def test_a_subtrace_recorded_before_its_link_is_printed_when_the_link_arrives() -> None:
    msgs = messages()
    out = shown(follow.TraceFilter(PARENT), msgs)
    parent = [m.seq for m in msgs if m.question == PARENT]
    sub = [m.seq for m in msgs if m.question == SUB]
    assert [s for q, s, _ in out if q == PARENT] == parent
    assert [(s, flag) for q, s, flag in out if q == SUB] == [(s, True) for s in sub] and sub
    assert {q for q, _, _ in out} == {PARENT, SUB}, "no other session of the scope"
    linking = next(i for i, (q, s, _) in enumerate(out) if q == PARENT and s == 2)  # iteration 2 calls the tool
    assert [q for q, _, _ in out[linking + 1: linking + 1 + len(sub)]] == [SUB] * len(sub)


def test_later_subtrace_steps_print_as_they_arrive_and_known_subtraces_from_the_start() -> None:
    msgs = messages()
    sub_msgs = [m for m in msgs if m.question == SUB]
    others = [m for m in msgs if m.question != SUB]
    out = shown(follow.TraceFilter(PARENT), others + sub_msgs)  # the tool's steps arrive after the link
    assert [q for q, _, _ in out].count(SUB) == len(sub_msgs)
    known = shown(follow.TraceFilter(PARENT, [SUB]), sub_msgs)
    assert [(q, flag) for q, _, flag in known] == [(SUB, True)] * len(sub_msgs)


def test_synthesis_iris_map_back_to_their_question() -> None:
    for mechanism in (v.Mechanism.DOCRAG, v.Mechanism.GRAPHRAG):
        iri = v.synthesis_iri(mechanism, "abc")
        assert v.subtrace_question_iri(iri) == v.question_iri(mechanism, "abc")
    assert v.subtrace_question_iri(v.conclusion_iri("abc")) == v.question_iri(v.Mechanism.AGENT, "abc")
    assert v.subtrace_question_iri(v.analysis_iri("abc", 1)) is None


def test_the_hold_back_buffer_is_bounded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(follow, "HELD", 3)
    trace = follow.TraceFilter("urn:trustgraph:agent:nobody")
    for m in messages():
        trace.feed(m)
    assert len(trace._held) == 3
