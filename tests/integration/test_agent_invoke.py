"""tg-invoke-agent as a subprocess on the real Kafka: its steps land on the
(isolated) events topic, keyed by session, sub-trace linked, in order."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fake_llm import FakeLlm

from provstream.codec.records import decode_event
from provstream.core import events as ev
from provstream.core.vocab import Mechanism
from provstream.settings import Settings

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.integration


def read_events(settings: Settings, count: int, timeout: float = 30.0) -> list[tuple[bytes, ev.Event]]:
    """The first ``count`` events of the topic (all partitions), in per-partition order."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(settings.events_topic, bootstrap_servers=settings.kafka_bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False, group_id=None)
    found: list[tuple[bytes, ev.Event]] = []
    try:
        deadline = time.monotonic() + timeout
        while len(found) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                found += [(r.key, decode_event(r.value)) for r in sorted(records, key=lambda r: r.offset)]
    finally:
        consumer.close()
    return found


def invoke(settings: Settings, *args: str, llm_url: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROVSTREAM_EVENTS_TOPIC": settings.events_topic, "PROVSTREAM_LLM_URL": llm_url}
    # --no-wait: nothing folds these isolated topics into Neo4j (tests/integration/test_first_hour_wait.py does)
    return subprocess.run([str(BIN / "tg-invoke-agent"), *args, "--no-wait"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_heuristic_run_puts_every_step_on_the_topic(isolated: Settings, unique: str) -> None:
    sid = f"agent-{unique}"
    done = invoke(isolated, "-q", "Who was Milhouse named after?", "-C", isolated.collection, "--session-id", sid)
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert out[0].startswith("[heuristic planner]") and out[-1] == f"session: urn:trustgraph:agent:{sid}"
    assert "Answer: Milhouse was named after U.S. president Richard Nixon, whose middle name was Milhous." in out

    found = read_events(isolated, 7)
    assert len(found) == 7
    assert all(key == e.session_id.encode() for key, e in found)
    assert {(e.user, e.collection) for _, e in found} == {("trustgraph", isolated.collection)}
    agent = [e for _, e in found if e.session_id == sid]
    docrag = [e for _, e in found if e.mechanism is Mechanism.DOCRAG]
    assert [type(e.payload).__name__ for e in agent] == [
        "AgentQuestion", "AgentIteration", "AgentIteration", "AgentConclusion"]
    assert [e.seq for e in agent] == [0, 1, 2, 3]
    assert [type(e.payload).__name__ for e in docrag] == ["DocRagQuestion", "DocRagExploration", "DocRagSynthesis"]
    first = agent[1].payload
    assert isinstance(first, ev.AgentIteration) and first.thought.startswith("[heuristic planner]")
    assert first.subtrace == ev.SubTrace(Mechanism.DOCRAG, docrag[0].session_id)
    assert docrag[0].event_time < agent[1].event_time, "the sub-trace is emitted before the step that used it"


def test_llm_run_with_tool_error_records_why_it_stopped(isolated: Settings, unique: str) -> None:
    sid = f"llm-{unique}"
    with FakeLlm(["Thought: divide\nAction: calculator\nAction Input: {\"expression\": \"1/0\"}"]) as llm:
        done = invoke(isolated, "-q", "What is 1/0?", "-C", isolated.collection, "--session-id", sid,
                      llm_url=llm.url)
    assert done.returncode == 2, done.stderr
    assert done.stdout.splitlines()[0].startswith("[LLM]")
    found = [e for _, e in read_events(isolated, 3)]
    assert [type(e.payload).__name__ for e in found] == ["AgentQuestion", "AgentIteration", "AgentConclusion"]
    assert found[-1].payload == ev.AgentConclusion("Stopped: tool 'calculator' failed: division by zero", 1)


def test_empty_session_id_records_nothing(isolated: Settings) -> None:
    done = invoke(isolated, "-q", "Who was Milhouse named after?", "-C", isolated.collection, "--session-id", "")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "session: (not recorded: empty --session-id)"
    assert read_events(isolated, 1, timeout=3) == []
