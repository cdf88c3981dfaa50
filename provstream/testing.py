"""Test helpers shared by the test suite and the benchmarks: deterministic sample sessions.

Turns a bundled ReAct trajectory (:data:`provstream.data.REACT_TRAJECTORIES`)
into the step events an agent would have emitted, builds small GraphRAG /
DocRAG sessions, and folds events into the triples messages the sink writes.
Pure: times come from the caller, event ids from (session, seq). The fixtures
for a real stack (per-test topics and scopes) are in :mod:`provstream.testing_stack`.

Example::

    >>> from datetime import UTC, datetime
    >>> from provstream.data import REACT_TRAJECTORIES
    >>> record = load_trajectories(REACT_TRAJECTORIES)[0]
    >>> events = agent_events(record, "s1", start=datetime(2025, 1, 1, tzinfo=UTC))
    >>> len(fold_all(events)) == len(events)
    True
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from provstream.core import events as ev
from provstream.core.fold import FoldState, fold
from provstream.core.triples import StepTriples, Triple
from provstream.core.vocab import Mechanism
from provstream.data import REACT_TRAJECTORIES


def load_trajectories(path: Path = REACT_TRAJECTORIES) -> list[dict[str, Any]]:
    """The trajectories of a JSON-lines file (default: the bundled ones), in file order, as dicts."""
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _event(session_id: str, mechanism: Mechanism, seq: int, start: datetime, payload: ev.Payload,
           user: str, collection: str) -> ev.Event:
    return ev.Event(f"{session_id}-{seq}", session_id, mechanism, seq, start + timedelta(seconds=seq), payload,
                    user, collection)


def agent_events(
    trajectory: Mapping[str, Any], session_id: str, *, start: datetime, user: str = "trustgraph",
    collection: str = "default", used: Mapping[int, Sequence[int]] | None = None,
    subtraces: Mapping[int, ev.SubTrace] | None = None, conclude: bool = True,
    agent_name: str | None = None, conversation_id: str | None = None,
) -> list[ev.Event]:
    """The events of one trajectory: question (with ``agent_name`` / ``conversation_id`` if given), one
    iteration per step, the conclusion."""
    used, subtraces = used or {}, subtraces or {}
    steps = trajectory["steps"]

    def make(seq: int, payload: ev.Payload) -> ev.Event:
        return _event(session_id, Mechanism.AGENT, seq, start, payload, user, collection)

    out = [make(0, ev.AgentQuestion(trajectory["question"], conversation_id, agent_name))]
    for n, step in enumerate(steps, start=1):
        out.append(make(n, ev.AgentIteration(
            iteration=n, thought=step.get("thought", ""), action=step.get("action", ""),
            arguments=json.dumps(step.get("arguments", {}), ensure_ascii=False),
            observation=step.get("observation", ""), used=tuple(used.get(n, ())), subtrace=subtraces.get(n),
        )))
    if conclude:
        out.append(make(len(steps) + 1, ev.AgentConclusion(trajectory["answer"], len(steps))))
    return out


def docrag_events(session_id: str, query: str, chunks: Sequence[str], content: str, *, start: datetime,
                  user: str = "trustgraph", collection: str = "default") -> list[ev.Event]:
    """The events of a Document RAG session: question, exploration (``chunks``), synthesis (``content``)."""
    payloads: list[ev.Payload] = [ev.DocRagQuestion(query), ev.DocRagExploration(len(chunks), tuple(chunks)),
                                  ev.DocRagSynthesis(content)]
    return [_event(session_id, Mechanism.DOCRAG, seq, start, p, user, collection) for seq, p in enumerate(payloads)]


def graphrag_events(session_id: str, query: str, edge_count: int, edges: Sequence[ev.SelectedEdge], content: str,
                    *, start: datetime, user: str = "trustgraph", collection: str = "default") -> list[ev.Event]:
    """The events of a GraphRAG session: question, exploration (``edge_count``), focus (``edges``), synthesis."""
    payloads: list[ev.Payload] = [ev.GraphRagQuestion(query), ev.GraphRagExploration(edge_count),
                                  ev.GraphRagFocus(tuple(edges)), ev.GraphRagSynthesis(content)]
    return [_event(session_id, Mechanism.GRAPHRAG, seq, start, p, user, collection)
            for seq, p in enumerate(payloads)]


def fold_all(events: Iterable[ev.Event]) -> list[StepTriples]:
    """Fold events in order (state per session), as the stream processor does."""
    states: dict[str, FoldState] = {}
    out: list[StepTriples] = []
    for event in events:
        states[event.session_id], msg = fold(states.get(event.session_id), event)
        out.append(msg)
    return out


def triples_of(messages: Iterable[StepTriples]) -> set[Triple]:
    """Every triple of ``messages``, as a set (the graph they describe, order and duplicates ignored)."""
    return {t for m in messages for t in m.triples}


DAG_USES = {3: (1, 2)}
"""The DAG used by :func:`scenario`: the third step of the first trajectory uses steps 1 and 2."""


def scenario(trajectories: Sequence[Mapping[str, Any]], prefix: str, *, start: datetime,
             user: str = "trustgraph", collection: str = "default") -> list[ev.Event]:
    """A small scope exercising every read-side case, sessions one minute apart (oldest first).

    ``{prefix}-dag``: trajectory 0 with a DAG step; ``{prefix}-rag``: a GraphRAG
    session; ``{prefix}-sub``: a DocRAG session called as a tool by iteration 2 of
    ``{prefix}-parent`` (trajectory 1); ``{prefix}-open``: trajectory 2, not concluded.
    """
    minute = timedelta(minutes=1)
    edges = [ev.SelectedEdge("http://dbpedia.org/resource/High_Plains_(United_States)",
                             "http://dbpedia.org/ontology/elevation", "1,800 to 7,000 ft",
                             "The edge states the elevation range asked for."),
             ev.SelectedEdge("http://dbpedia.org/resource/High_Plains_(United_States)",
                             "http://dbpedia.org/ontology/partOf", "http://dbpedia.org/resource/Great_Plains",
                             "Places the region.")]
    sub = ev.SubTrace(Mechanism.DOCRAG, f"{prefix}-sub")
    return [
        *agent_events(trajectories[0], f"{prefix}-dag", start=start, used=DAG_USES, user=user, collection=collection),
        *graphrag_events(f"{prefix}-rag", "What is the elevation range of the High Plains?", 240, edges,
                         "The High Plains rise from about 1,800 to 7,000 ft.", start=start + minute,
                         user=user, collection=collection),
        *docrag_events(f"{prefix}-sub", "Who was Milhouse named after?", ["simpsons.txt#12", "nixon.txt#3"],
                       "Milhouse was named after Richard Nixon (middle name Milhous).",
                       start=start + 2 * minute + timedelta(seconds=2), user=user, collection=collection),
        *agent_events(trajectories[1], f"{prefix}-parent", start=start + 2 * minute, subtraces={2: sub},
                      user=user, collection=collection),
        *agent_events(trajectories[2], f"{prefix}-open", start=start + 3 * minute, conclude=False,
                      user=user, collection=collection),
    ]


def trajectory_events(
    record: Mapping[str, Any], session_id: str, start: datetime,
    user: str = "trustgraph", collection: str = "default",
) -> list[ev.Event]:
    """Question, one iteration per step, conclusion: the events an agent emits for ``record``."""
    return agent_events(record, session_id, start=start, user=user, collection=collection)


def sessions(
    records: list[dict[str, Any]], prefix: str, start: datetime, count: int,
    user: str = "trustgraph", collection: str = "default",
) -> Iterator[list[ev.Event]]:
    """``count`` sessions ``<prefix>-<n>`` cycling through ``records``."""
    for n in range(count):
        yield trajectory_events(records[n % len(records)], f"{prefix}-{n}", start, user, collection)
