"""The demo: bundled material streamed as live sessions, then waited for in Neo4j.

:func:`run_demo` emits, step by step with a small pause between steps so a
live tail shows the flow:

1. the 12 real ReAct trajectories (``provstream/data/react/hotpot_fever.jsonl``)
   as agent sessions;
2. DocRAG sessions that really retrieve: the bundled HotpotQA questions the
   corpus can answer, each searched in the corpus and answered extractively;
3. GraphRAG sessions over the bundled knowledge graph;
4. with the ``provstream[langchain]`` extra, one LangChain agent recorded by
   its callback handler (``provstream.agent.demo_frameworks``);
5. one ``tg-invoke-agent`` run (LLM if configured, else the heuristic planner)
   whose search call is a linked DocRAG sub-trace.

It returns every session URI it recorded (sub-traces included), in order.
:func:`wait_for_sessions` then polls Neo4j until all of them are complete.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, LiteralString, Protocol

from provstream.agent.corpus import load_demo_questions, load_graph
from provstream.agent.demo_frameworks import langchain_run
from provstream.agent.docrag import run_docrag
from provstream.agent.graphrag import run_graphrag
from provstream.agent.run import Sessions, invoke
from provstream.agent.search import default_index
from provstream.core.request import AgentRequest
from provstream.core.trajectories import AgentTrajectory, load
from provstream.data import DATA_DIR
from provstream.errors import StoreError, WaitTimeout
from provstream.settings import Settings

DEFAULT_DATA: Final = DATA_DIR
DEFAULT_DELAY: Final = 0.05
AGENT_QUESTION: Final = "Who was hired as head coach of the Indiana Pacers in the 1997-98 season?"
GRAPHRAG_SESSIONS: Final = 3

Out = Callable[[str], None]


class DemoSessions(Sessions, Protocol):
    """What the demo needs of an emitter: agent, DocRAG and GraphRAG sessions."""

    def graphrag(self, question: str, *, user: str | None = ..., collection: str | None = ...,
                 session_id: str | None = ...) -> Any: ...


@dataclass(frozen=True)
class Paced:
    """Wraps a session so every recorded step is preceded by a pause."""

    session: Any
    pause: Callable[[], None]

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.session, name)
        if name not in ("iteration", "conclude", "explore", "focus", "synthesize"):
            return attribute

        def paced(*args: Any, **kwargs: Any) -> Any:
            self.pause()
            return attribute(*args, **kwargs)

        return paced


def stream_trajectories(emitter: DemoSessions, path: Path, pause: Callable[[], None], out: Out) -> list[str]:
    records = [record for _, record in load(path) if isinstance(record, AgentTrajectory)]
    uris = []
    for n, record in enumerate(records, start=1):
        session = Paced(emitter.agent(record.question), pause)
        for step in record.steps:
            session.iteration(thought=step.thought, action=step.action, arguments=step.arguments,
                              observation=step.observation)
        session.conclude(record.answer)
        uris.append(session.uri)
        # steps as list, show and Neo4j count them: the question, each iteration, the conclusion
        out(f"[agent {n}/{len(records)}] {session.uri}  {len(record.steps) + 2} steps  {_short(record.question)}")
    return uris


def docrag_sessions(emitter: DemoSessions, pause: Callable[[], None], out: Out) -> list[str]:
    questions = load_demo_questions()
    uris = []
    for n, q in enumerate(questions, start=1):
        session = emitter.docrag(q.question)
        result = run_docrag(Paced(session, pause), default_index(), q.question)
        uris.append(session.uri)
        best = result.best.text if result.best else "-"
        out(f"[docrag {n}/{len(questions)}] {session.uri}  chunks matched: {result.candidates}, "
            f"kept: {', '.join(result.selected)}")
        out(f"    {_short(q.question, 90)}  ->  {_short(best, 90)}  (gold answer: {q.answer})")
    return uris


def graphrag_sessions(emitter: DemoSessions, pause: Callable[[], None], out: Out) -> list[str]:
    kg = load_graph()
    questions = kg.examples[:GRAPHRAG_SESSIONS]
    uris = []
    for n, question in enumerate(questions, start=1):
        session = emitter.graphrag(question)
        result = run_graphrag(Paced(session, pause), kg, question)
        uris.append(session.uri)
        out(f"[graphrag {n}/{len(questions)}] {session.uri}  {len(result.explored)} edges explored, "
            f"{len(result.focused)} focused  {_short(question)}")
    return uris


def agent_run(emitter: DemoSessions, settings: Settings, pause: Callable[[], None], out: Out) -> list[str]:
    request = AgentRequest(AGENT_QUESTION, user=settings.user, collection=settings.collection,
                           session_id=str(uuid.uuid4()))

    def report(kind: str, text: str) -> None:
        pause()
        out(f"    {kind}: {_short(text, 100)}")

    out(f"[tg-invoke-agent] {AGENT_QUESTION}")
    run = invoke(emitter, settings, request, report)
    out(f"[tg-invoke-agent] {run.uri}  ({run.planner}; search sub-traces: {', '.join(run.subtraces) or 'none'})")
    return [run.uri, *run.subtraces]


def run_demo(emitter: DemoSessions, settings: Settings, *, data_dir: Path = DEFAULT_DATA,
             delay: float = DEFAULT_DELAY, out: Out = print) -> list[str]:
    """Emit the whole demo through ``emitter``; return every session URI recorded."""
    def pause() -> None:
        if delay > 0:
            time.sleep(delay)

    path = data_dir / "react" / "hotpot_fever.jsonl"
    return [
        *stream_trajectories(emitter, path, pause, out),
        *docrag_sessions(emitter, pause, out),
        *graphrag_sessions(emitter, pause, out),
        *langchain_run(emitter, settings, pause, out),  # with the provstream[langchain] extra only
        *agent_run(emitter, settings, pause, out),
    ]


def _short(text: str, width: int = 70) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[:width - 1] + "…"


# -- waiting for the graph ------------------------------------------------------

COMPLETE_SESSIONS: Final[LiteralString] = """
MATCH (q:Question)
WHERE q.iri IN $iris AND q.user = $user AND q.collection = $collection AND q.status = 'complete'
RETURN q.iri AS iri
"""


def wait_for_sessions(settings: Settings, uris: Sequence[str], *, timeout: float = 120.0, poll: float = 1.0,
                      out: Out | None = None) -> None:
    """Block until every Question node in ``uris`` exists in Neo4j (in the settings' scope) with
    status ``complete``; :class:`WaitTimeout` naming what is missing otherwise.

    Neo4j being unreachable counts as "not yet" until the deadline; wrong
    credentials fail at once (:class:`StoreError`).
    """
    from neo4j import GraphDatabase
    from neo4j.exceptions import DriverError, Neo4jError

    from provstream.connectors.neo4j.driver import auth_message, is_auth_error

    wanted, deadline = set(uris), time.monotonic() + timeout
    done: set[str] = set()
    last_error, reported = "", -1
    # This loop is the retry: keep the driver's own retries and timeouts short.
    from provstream.security import neo4j_driver_target

    uri, tls = neo4j_driver_target(settings)  # bolt+s:// with PROVSTREAM_NEO4J_CA_FILE
    with GraphDatabase.driver(uri, auth=settings.neo4j_auth, notifications_min_severity="OFF",
                              max_transaction_retry_time=min(poll, 5.0), connection_timeout=5.0, **tls) as driver:
        while True:
            try:
                done = _complete(driver, settings, wanted)
                last_error = ""
            except (Neo4jError, DriverError, OSError) as exc:
                if is_auth_error(exc):
                    raise StoreError(auth_message(settings)) from exc
                last_error = f"; last error: {type(exc).__name__}: {exc}"
            if out is not None and len(done) != reported:
                reported = len(done)
                out(f"Neo4j: {reported}/{len(wanted)} sessions complete")
            if done >= wanted:
                return
            if time.monotonic() >= deadline:
                missing = sorted(wanted - done)
                raise WaitTimeout(
                    f"{len(missing)} of {len(wanted)} sessions not complete in Neo4j at {settings.neo4j_uri} "
                    f"after {timeout:.0f}s (are the worker and the sink running? `provstream stack status`); "
                    f"first missing: {missing[0]}{last_error}"
                )
            time.sleep(poll)


def _complete(driver: Any, settings: Settings, wanted: set[str]) -> set[str]:
    from neo4j import RoutingControl

    records, _, _ = driver.execute_query(
        COMPLETE_SESSIONS, iris=sorted(wanted), user=settings.user, collection=settings.collection,
        database_=settings.neo4j_database, routing_=RoutingControl.READ,
    )
    return {r["iri"] for r in records}
