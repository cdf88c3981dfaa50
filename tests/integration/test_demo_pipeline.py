"""The demo end to end on the real stack: the sessions it emits are folded by
the worker, written by the sink, and all reach Neo4j complete; the agent run's
search step is linked to its DocRAG sub-trace in the graph."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sink_support import cypher, sink_process
from worker_support import running_worker

from provstream.agent.demo import run_demo, wait_for_sessions
from provstream.agent.demo_frameworks import available
from provstream.connectors.emitter import Emitter
from provstream.data import DATA_DIR
from provstream.settings import Settings

pytestmark = pytest.mark.integration

SUBTRACE_LINK = """
MATCH (a:Analysis)-[:wasDerivedFrom]->(:Synthesis)-[:wasDerivedFrom]->(:Exploration)
      -[:wasGeneratedBy]->(q:DocRagQuestion)
WHERE a.user = $user AND a.collection = $collection
RETURN a.iri AS analysis, q.iri AS question
"""


def test_every_demo_session_reaches_neo4j_complete(isolated: Settings, tmp_path: Path) -> None:
    lines: list[str] = []
    with running_worker(replace(isolated, stack_dir=tmp_path)), sink_process(isolated):
        with Emitter(isolated) as emitter:
            uris = run_demo(emitter, isolated, data_dir=DATA_DIR, delay=0, out=lines.append)
            emitter.flush()
        progress: list[str] = []
        wait_for_sessions(isolated, uris, timeout=180, out=progress.append)
    n = 27 + (1 if available() else 0)  # + the LangChain agent with the provstream[langchain] extra
    assert len(uris) == n and progress[-1] == f"Neo4j: {n}/{n} sessions complete"
    agent_run, subtrace = uris[-2], uris[-1]
    with cypher(isolated) as run:
        links = run(SUBTRACE_LINK, user=isolated.user, collection=isolated.collection)
    assert links == [{"analysis": f"{agent_run}/i1", "question": subtrace}]
