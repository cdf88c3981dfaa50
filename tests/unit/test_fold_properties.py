"""Property tests of the fold: order and duplication never change the result."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provstream.core import events as ev
from provstream.core.fold import FoldState, fold
from provstream.core.triples import SessionState, SessionStatus, Triple
from provstream.core.vocab import Mechanism
from provstream.errors import InvalidEvent

T0 = datetime(2025, 1, 2, tzinfo=UTC)
text = st.text(max_size=12)
fast = settings(max_examples=100, deadline=None)


@st.composite
def iteration(draw: st.DrawFn, n: int) -> ev.AgentIteration:
    used = draw(st.lists(st.integers(1, n - 1), max_size=3)) if n > 1 else []
    sub = draw(st.none() | st.builds(ev.SubTrace, st.sampled_from([Mechanism.GRAPHRAG, Mechanism.DOCRAG]),
                                     st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)))
    return ev.AgentIteration(n, draw(text), draw(text), '{"k": 1}', draw(text), tuple(used), sub)


@st.composite
def agent_payloads(draw: st.DrawFn) -> list[ev.Payload]:
    """Question, some of the iterations 1..k, maybe a conclusion announcing any count."""
    k = draw(st.integers(0, 5))
    present = [i for i in range(1, k + 1) if draw(st.booleans()) or i == k]
    out: list[ev.Payload] = [ev.AgentQuestion(draw(text))] if draw(st.integers(0, 9)) else []
    out += [draw(iteration(i)) for i in present]
    if draw(st.booleans()):
        out.append(ev.AgentConclusion(draw(text), draw(st.integers(0, k + 1))))
    return out


edges = st.lists(st.builds(ev.SelectedEdge, st.just("http://ex.org/s"), st.just("http://ex.org/p"),
                           st.sampled_from(["http://ex.org/o", "a literal", ""]), text), max_size=3)
rag_steps = {
    Mechanism.GRAPHRAG: [st.builds(ev.GraphRagQuestion, text), st.builds(ev.GraphRagExploration, st.integers(0, 99)),
                         st.builds(ev.GraphRagFocus, edges.map(tuple)), st.builds(ev.GraphRagSynthesis, text)],
    Mechanism.DOCRAG: [st.builds(ev.DocRagQuestion, text),
                       st.builds(ev.DocRagExploration, st.integers(0, 9), st.lists(text, max_size=3).map(tuple)),
                       st.builds(ev.DocRagSynthesis, text)],
}


@st.composite
def session(draw: st.DrawFn) -> list[ev.Event]:
    """One session's distinct steps, in canonical order."""
    mechanism = draw(st.sampled_from(list(Mechanism)))
    if mechanism is Mechanism.AGENT:
        payloads = draw(agent_payloads())
    else:
        payloads = [draw(s) for s in rag_steps[mechanism] if draw(st.integers(0, 4))]
    return [ev.Event(f"e{seq}", "sess-1", mechanism, seq, T0 + timedelta(seconds=seq), p, "u", "c")
            for seq, p in enumerate(payloads)]


@st.composite
def session_and_delivery(draw: st.DrawFn) -> tuple[list[ev.Event], list[ev.Event]]:
    """A session and a delivery of it: any order, any event possibly repeated."""
    evs = draw(session().filter(bool))
    dups = draw(st.lists(st.sampled_from(evs), max_size=6))
    return evs, draw(st.permutations(evs + dups))


def run(evs: Sequence[ev.Event]) -> tuple[FoldState | None, set[Triple], SessionStatus | None]:
    state: FoldState | None = None
    triples: set[Triple] = set()
    last = None
    for e in evs:
        state, step = fold(state, e)
        triples.update(step.triples)
        last = step.status
    return state, triples, last


@fast
@given(session_and_delivery())
def test_any_order_and_duplication_gives_the_same_graph_and_status(case: tuple[list[ev.Event], list[ev.Event]]) -> None:
    canonical, delivery = case
    assert run(delivery) == run(canonical)


@fast
@given(session_and_delivery(), st.data())
def test_a_conflicting_step_is_rejected(case: tuple[list[ev.Event], list[ev.Event]], data: st.DataObject) -> None:
    _, delivery = case
    at = data.draw(st.integers(0, len(delivery) - 1))
    state, _, _ = run(delivery[: at + 1])
    with pytest.raises(InvalidEvent, match="conflicting step"):
        fold(state, replace(delivery[at], event_id="another"))


@fast
@given(session_and_delivery(), st.data())
def test_a_scope_change_is_rejected(case: tuple[list[ev.Event], list[ev.Event]], data: st.DataObject) -> None:
    _, delivery = case
    at = data.draw(st.integers(0, len(delivery) - 1))
    change = data.draw(st.sampled_from([{"user": "other"}, {"collection": "other"}]))
    state, _, _ = run(delivery[: at + 1])
    with pytest.raises(InvalidEvent, match="belongs to"):
        fold(state, replace(delivery[at], **change))


@fast
@given(st.integers(0, 4), st.integers(0, 4), st.data())
def test_late_and_missing_iterations_are_counted_in_any_order(
    arrived: int, announced: int, data: st.DataObject
) -> None:
    """Iterations 1..arrived arrive; the conclusion announces ``announced``."""
    payloads: list[ev.Payload] = [ev.AgentQuestion("q"), *(ev.AgentIteration(i) for i in range(1, arrived + 1)),
                                  ev.AgentConclusion("a", announced)]
    evs = [ev.Event(f"e{n}", "s", Mechanism.AGENT, n, T0, p) for n, p in enumerate(payloads)]
    _, _, status = run(data.draw(st.permutations(evs)))
    assert status is not None
    assert status.late == max(0, arrived - announced)
    assert status.missing == tuple(range(arrived + 1, announced + 1))
    assert status.state is (SessionState.INCOMPLETE if announced > arrived else SessionState.CONCLUDED)
    assert status.expected == announced + 2
