"""Helpers for the framework adapter tests (LangChain/LangGraph, OpenAI Agents SDK); holds no tests.

* :func:`pipeline`: a module-scoped fixture: this module's own topics and
  collection (as ``isolated`` makes them), a worker and a sink running for
  all its tests.
* :func:`expected_triples`: what the emitter records for the same steps,
  driven directly (through a memory transport) and folded.
* :func:`record_steps`: a trajectory's steps into a session the test opened
  (an agent sub-trace is recorded before the step that calls it).
* :func:`assert_same_trace`: the trace read back from Neo4j against that,
  compared as graphs (the Question's ``startedAt`` is the emitter's clock, so it is
  checked to be there and left out of the comparison).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
from rdflib.compare import isomorphic
from sink_support import sink_process
from worker_support import running_worker

from provstream.agent.demo import wait_for_sessions
from provstream.codec import records as wire
from provstream.connectors.emitter import Emitter
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.connectors.transport import MemoryTransport
from provstream.core import vocab as v
from provstream.core.trajectories import AgentTrajectory, load
from provstream.core.triples import Triple
from provstream.data import REACT_TRAJECTORIES
from provstream.read.rdf import to_graph
from provstream.settings import Settings
from provstream.testing import fold_all, triples_of
from provstream.topics import ensure_topics

TRAJECTORIES: list[AgentTrajectory] = [r for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory)]


@pytest.fixture(scope="module")
def pipeline(stack: Settings, _isolated_ids: list[str],
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """This module's own topics, groups and collection, with a worker and a sink running."""
    unique = uuid.uuid4().hex[:12]
    _isolated_ids.append(unique)  # removed at the end of the run, as `isolated` does
    s = replace(
        stack,
        events_topic=f"test.{unique}.events", triples_topic=f"test.{unique}.triples",
        events_dlq_topic=f"test.{unique}.events.dlq", triples_dlq_topic=f"test.{unique}.triples.dlq",
        worker_app_id=f"test-{unique}-fold", sink_group=f"test-{unique}-sink", collection=f"test-{unique}",
    )
    ensure_topics(s)
    with running_worker(replace(s, stack_dir=tmp_path_factory.mktemp("worker"))), sink_process(s):
        yield s


def session_id(uri: str) -> str:
    return uri.rsplit(":", 1)[1]


def expected_triples(settings: Settings, record: Callable[[Emitter], Any]) -> set[Triple]:
    """The triples the fold makes of what ``record(emitter)`` emits (through a memory transport)."""
    transport = MemoryTransport()
    with Emitter(settings, transport=transport) as emitter:
        record(emitter)
    return triples_of(fold_all(wire.decode_event(value) for _, value in transport.sent))


def record_steps(session: Any, t: AgentTrajectory) -> Any:
    """Record trajectory ``t``'s steps and answer into an open agent session (as ``replay`` does); return it."""
    for s in t.steps:
        session.iteration(thought=s.thought, action=s.action, arguments=s.arguments, observation=s.observation,
                          used=s.used)
    session.conclude(t.answer)
    return session


def stored_trace(settings: Settings, uri: str, mechanism: v.Mechanism = v.Mechanism.AGENT) -> set[Triple]:
    question = uri if uri.startswith("urn:") else v.question_iri(mechanism, uri)
    with Neo4jStore(settings) as store:
        return store.trace_triples(question, user=settings.user, collection=settings.collection)


def _without_start(triples: set[Triple]) -> tuple[set[Triple], int]:
    kept = {t for t in triples if t.p.value != v.PROV_STARTED_AT}
    return kept, len(triples) - len(kept)


def assert_same_trace(settings: Settings, uris: list[str], expected: set[Triple], timeout: float = 90) -> None:
    """Wait until the sessions are complete in Neo4j, then compare their triples with ``expected`` as graphs."""
    wait_for_sessions(settings, uris, timeout=timeout)
    stored: set[Triple] = set()
    for uri in uris:
        stored |= stored_trace(settings, uri)
    got, got_starts = _without_start(stored)
    want, want_starts = _without_start(expected)
    assert got_starts == want_starts == len(uris)
    assert got == want, f"missing {sorted(map(str, want - got))[:5]}, extra {sorted(map(str, got - want))[:5]}"
    assert isomorphic(to_graph(got), to_graph(want))
