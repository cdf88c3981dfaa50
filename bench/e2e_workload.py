"""Sessions built from the bundled data, and a streamer that emits them live.

The workload: HotpotQA dev questions (``provstream/data/hotpotqa_dev_questions.jsonl``)
asked of three mechanisms. Eight in ten are ReAct agent sessions whose
iterations are the steps of the bundled ReAct trajectories
(``provstream/data/react/hotpot_fever.jsonl``, cycled) and whose conclusion is
the HotpotQA answer; one in ten is a DocRAG query (three selected chunks), one
in ten a GraphRAG query (two selected edges). Everything is deterministic from
the session prefix, so the expected step IRIs of every session are known
before it is emitted.

:class:`Streamer` emits planned sessions through an
:class:`~provstream.connectors.emitter.Emitter`, several sessions open at once
(their steps interleaved, as concurrent agents would), at a given rate, in a
background thread.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from provstream.connectors.emitter import Emitter
from provstream.core import vocab as v
from provstream.core.events import SelectedEdge
from provstream.core.trajectories import AgentTrajectory, DocRagRun, GraphRagRun, Record, load
from provstream.data import HOTPOTQA_DEV_QUESTIONS, REACT_TRAJECTORIES

REPO = Path(__file__).resolve().parents[1]
TRAJECTORIES = REACT_TRAJECTORIES
QUESTIONS = HOTPOTQA_DEV_QUESTIONS
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"


@cache
def trajectories() -> tuple[AgentTrajectory, ...]:
    return tuple(r for _, r in load(TRAJECTORIES) if isinstance(r, AgentTrajectory))


@cache
def questions() -> tuple[tuple[str, str], ...]:
    with QUESTIONS.open(encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    return tuple((r["question"], r["answer"]) for r in rows)


@dataclass(frozen=True)
class Planned:
    """One session to emit: its id and recorded run."""

    session_id: str
    record: Record

    @property
    def mechanism(self) -> v.Mechanism:
        if isinstance(self.record, DocRagRun):
            return v.Mechanism.DOCRAG
        if isinstance(self.record, GraphRagRun):
            return v.Mechanism.GRAPHRAG
        return v.Mechanism.AGENT

    @property
    def question_iri(self) -> str:
        return v.question_iri(self.mechanism, self.session_id)

    def step_iris(self) -> list[str]:
        """The IRI of each step's node, in emit order (one node with ``rdf:type`` per step)."""
        m, sid, r = self.mechanism, self.session_id, self.record
        if isinstance(r, AgentTrajectory):
            return [self.question_iri, *(v.analysis_iri(sid, n) for n in range(1, len(r.steps) + 1)),
                    v.conclusion_iri(sid)]
        middle = [v.focus_iri(sid)] if m is v.Mechanism.GRAPHRAG else []
        return [self.question_iri, v.exploration_iri(m, sid), *middle, v.synthesis_iri(m, sid)]

    def node_count(self) -> int:
        """Nodes of the session in Neo4j: its steps plus GraphRAG's selected-edge nodes."""
        edges = len(self.record.selected) if isinstance(self.record, GraphRagRun) else 0
        return len(self.step_iris()) + edges


def plan(prefix: str, count: int, start: int = 0) -> list[Planned]:
    """Sessions ``<prefix>-<n>`` for n in ``start .. start+count-1``."""
    return [planned(prefix, n) for n in range(start, start + count)]


def planned(prefix: str, n: int) -> Planned:
    question, answer = questions()[n % len(questions())]
    kind = n % 10
    if kind == 3:
        chunks = tuple(f"hotpotqa-dev-{n % len(questions())}-chunk-{i}" for i in range(3))
        return Planned(f"{prefix}-{n}", DocRagRun(question, answer, chunks, 5))
    if kind == 7:
        return Planned(f"{prefix}-{n}", GraphRagRun(question, answer, 12, _edges(n, answer)))
    steps = trajectories()[n % len(trajectories())].steps
    return Planned(f"{prefix}-{n}", AgentTrajectory(question, answer, steps))


def _edges(n: int, answer: str) -> tuple[SelectedEdge, ...]:
    entity = f"urn:hotpotqa:dev:{n % len(questions())}:answer"
    return (
        SelectedEdge(entity, RDFS_LABEL, answer, "the label of the entity the question asks about"),
        SelectedEdge(entity, "urn:hotpotqa:answers", f"urn:hotpotqa:dev:{n % len(questions())}",
                     "links the answer to its question"),
    )


def emit_steps(emitter: Emitter, p: Planned, user: str, collection: str) -> Iterator[str]:
    """Emit ``p`` one step per ``next()``; each value is the IRI of the step just emitted."""
    r = p.record
    scope: dict[str, Any] = {"user": user, "collection": collection, "session_id": p.session_id}
    if isinstance(r, AgentTrajectory):
        agent = emitter.agent(r.question, **scope)
        yield agent.uri
        for step in r.steps:
            yield agent.iteration(thought=step.thought, action=step.action, arguments=step.arguments,
                                  observation=step.observation, used=step.used)
        yield agent.conclude(r.answer)
    elif isinstance(r, DocRagRun):
        doc = emitter.docrag(r.question, **scope)
        yield doc.uri
        yield doc.explore(r.chunk_count, r.chunks)
        yield doc.synthesize(r.answer)
    else:
        graph = emitter.graphrag(r.question, **scope)
        yield graph.uri
        yield graph.explore(r.edge_count)
        yield graph.focus(r.selected)
        yield graph.synthesize(r.answer)


OnStep = Callable[[str, float], None]


class Streamer:
    """Emits ``sessions`` in a thread, ``concurrent`` open at a time, at up to ``rate`` steps/s (0: no pause).

    :meth:`stop` opens no new session but finishes the open ones, so every
    session begun is complete. ``on_step(iri, emit_time)`` is called after
    each step (``emit_time`` is ``time.time()`` just before the call).
    ``started`` lists the sessions begun when ``keep_started`` (the fault tests
    check each); the benchmark counts them only (``count``), so that the
    process it measures does not grow a list of every session, which the
    collector would walk.
    """

    def __init__(self, emitter: Emitter, sessions: Sequence[Planned], *, user: str, collection: str,
                 rate: float = 0.0, concurrent: int = 8, on_step: OnStep | None = None,
                 keep_started: bool = True) -> None:
        self.emitter, self.sessions, self.rate, self.concurrent = emitter, sessions, rate, concurrent
        self.user, self.collection = user, collection
        self.on_step = on_step
        self.started: list[Planned] = []
        self.count = 0
        self._keep = keep_started
        self.steps = 0
        self.error: BaseException | None = None
        self.began = self.ended = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="e2e-streamer", daemon=True)

    def start(self) -> Streamer:
        self._thread.start()
        return self

    def stop(self, timeout: float = 120.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        self.began = time.monotonic()
        try:
            self._loop()
        except Exception as exc:  # EmitError or a bug: reported by the caller; the steps sent stop here
            self.error = exc
        self.ended = time.monotonic()

    def _loop(self) -> None:
        pending = iter(self.sessions)
        open_: list[Iterator[str]] = []
        clock, emit_time = time.monotonic, time.time
        while True:
            while len(open_) < self.concurrent and not self._stop.is_set():
                nxt = next(pending, None)
                if nxt is None:
                    break
                self.count += 1
                if self._keep:
                    self.started.append(nxt)
                open_.append(emit_steps(self.emitter, nxt, self.user, self.collection))
            if not open_:
                return
            for steps in list(open_):
                self._pace(clock)
                at = emit_time()
                iri = next(steps, None)
                if iri is None:
                    open_.remove(steps)
                    continue
                self.steps += 1
                if self.on_step is not None:
                    self.on_step(iri, at)

    def _pace(self, clock: Callable[[], float]) -> None:
        if self.rate <= 0:
            return
        due = self.began + self.steps / self.rate
        delay = due - clock()
        if delay > 0:
            time.sleep(delay)
