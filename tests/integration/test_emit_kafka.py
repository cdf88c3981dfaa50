"""The emitter and ``provstream emit`` against the real Kafka (each test on its own topic)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka.partitioner.default import murmur2

from provstream.codec.records import decode_event
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import KafkaTransport, Value, materialise
from provstream.core.trajectories import AgentTrajectory, load, replay
from provstream.core.vocab import Mechanism
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def stack(kafka_stack: Settings) -> Settings:
    """These tests need Kafka only: the shared ``isolated`` fixture, without Neo4j."""
    return kafka_stack


class RecordingTransport(KafkaTransport):
    """The Kafka transport, remembering what it was given."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self.given: list[tuple[bytes, bytes]] = []

    def send(self, key: bytes, value: Value) -> None:
        data = materialise(value)
        super().send(key, data)
        self.given.append((key, data))


def consume(settings: Settings, count: int, timeout: float = 60) -> list[tuple[int, int, bytes, bytes]]:
    """``count`` records of the events topic from the start: (partition, offset, key, value)."""
    consumer = KafkaConsumer(settings.events_topic, bootstrap_servers=settings.kafka_bootstrap, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got: list[tuple[int, int, bytes, bytes]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [(r.partition, r.offset, r.key, r.value) for r in records]
    finally:
        consumer.close()
    return got


def expected_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def test_bundled_trajectories_arrive_byte_identical_and_in_order_per_session(isolated: Settings) -> None:
    transport = RecordingTransport(isolated)
    with Emitter(isolated, transport=transport) as emitter:
        uris = [replay(emitter, record) for _, record in load(REACT_TRAJECTORIES)]
        emitter.flush(60)
    steps = sum(len(r.steps) + 2 for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory))
    assert len(uris) == 12 and len(transport.given) == steps

    got = consume(isolated, steps)
    assert len(got) == steps
    assert sorted(v for *_, v in got) == sorted(v for _, v in transport.given), "values byte-identical"

    by_key: dict[bytes, list[tuple[int, int, bytes]]] = defaultdict(list)
    for partition, offset, key, value in got:
        by_key[key].append((partition, offset, value))
    sent_by_key: dict[bytes, list[bytes]] = defaultdict(list)
    for key, value in transport.given:
        sent_by_key[key].append(value)
    assert {k.decode() for k in by_key} == {u.rsplit(":", 1)[1] for u in uris}
    for key, records in by_key.items():
        assert {p for p, _, _ in records} == {expected_partition(key, isolated.partitions)}, "one partition per key"
        in_log_order = [v for _, _, v in sorted(records, key=lambda r: r[1])]
        assert in_log_order == sent_by_key[key], "a session's steps in the order they happened"
        seqs = [decode_event(v).seq for v in in_log_order]
        assert seqs == list(range(len(seqs)))


def test_a_step_at_the_limit_is_delivered_and_one_over_it_marked(isolated: Settings) -> None:
    with Emitter(isolated) as emitter:
        session = emitter.agent("big", session_id=f"big-{isolated.collection}")
        session.iteration(observation="x" * isolated.max_message_bytes)
        near = isolated.max_message_bytes - 1024
        session.iteration(observation="é" * (near // 2))
        emitter.flush(60)
    got = consume(isolated, 3)
    assert len(got) == 3
    in_order = [decode_event(r[3]) for r in sorted(got, key=lambda r: r[1])]
    assert in_order[1].payload.thought.startswith("[provstream: step too large to record")  # type: ignore[union-attr]
    assert in_order[2].payload.observation == "é" * (near // 2)  # type: ignore[union-attr]


def cli(isolated: Settings, *args: str, timeout: float = 120, **env_extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PROVSTREAM_EVENTS_TOPIC": isolated.events_topic,
           "PROVSTREAM_KAFKA_BOOTSTRAP": isolated.kafka_bootstrap, **env_extra}
    command = [sys.executable, "-c", "import sys; from provstream.cli import main; sys.exit(main())", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)


def test_provstream_emit_streams_a_file_and_prints_uris_in_input_order(isolated: Settings, tmp_path: Path) -> None:
    lines = REACT_TRAJECTORIES.read_text(encoding="utf-8").splitlines()[:2] + [
        json.dumps({"mechanism": "docrag", "question": "d?", "chunks": ["c1"], "answer": "da"}),
        json.dumps({"mechanism": "graphrag", "question": "g?", "edge_count": 3,
                    "selected": [{"edge": ["http://x/s", "http://x/p", "o"], "reasoning": "r"}], "answer": "ga"}),
    ]
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = cli(isolated, "emit", "--jsonl", str(path), "--user", "importer", "--collection", isolated.collection)
    assert done.returncode == 0, done.stderr
    uris = done.stdout.split()
    assert [u.rsplit(":", 1)[0] for u in uris] == ["urn:trustgraph:agent"] * 2 + [
        "urn:trustgraph:docrag", "urn:trustgraph:question"]
    records = [json.loads(line) for line in lines[:2]]
    expected = sum(len(r["steps"]) + 2 for r in records) + 3 + 4
    events = [decode_event(v) for *_, v in consume(isolated, expected)]
    assert len(events) == expected
    assert {(e.user, e.collection) for e in events} == {("importer", isolated.collection)}
    firsts = {e.session_id: e for e in events if e.seq == 0}
    assert [firsts[u.rsplit(":", 1)[1]].mechanism for u in uris] == [
        Mechanism.AGENT, Mechanism.AGENT, Mechanism.DOCRAG, Mechanism.GRAPHRAG]


def test_provstream_emit_into_a_closed_pipe_still_imports_everything(isolated: Settings, tmp_path: Path) -> None:
    lines = REACT_TRAJECTORIES.read_text(encoding="utf-8").splitlines()[:4] * 300  # long enough to outlive the reader
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = {**os.environ, "PROVSTREAM_EVENTS_TOPIC": isolated.events_topic,
           "PROVSTREAM_KAFKA_BOOTSTRAP": isolated.kafka_bootstrap}
    command = [sys.executable, "-c", "import sys; from provstream.cli import main; sys.exit(main())",
               "emit", "--jsonl", str(path), "--collection", isolated.collection]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    assert proc.wait(timeout=120) == 0
    assert first.startswith("urn:trustgraph:agent:")
    errors = proc.stderr.read()
    assert "Traceback" not in errors and "BrokenPipe" not in errors, errors
    expected = sum(len(json.loads(line)["steps"]) + 2 for line in lines)
    events = [decode_event(v) for *_, v in consume(isolated, expected)]
    assert len(events) == expected and len({e.session_id for e in events}) == len(lines)


def test_provstream_emit_refuses_a_bad_file_naming_the_line_and_sends_nothing(
        isolated: Settings, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = REACT_TRAJECTORIES.read_text(encoding="utf-8").splitlines()[0]
    path.write_text(good + "\n" + json.dumps({"mechanism": "graphrag", "question": "q", "answer": "a",
                                               "edge_count": 1, "selected": [{"edge": ["no iri", "p", "o"]}]}) + "\n")
    done = cli(isolated, "emit", "--jsonl", str(path))
    assert done.returncode == 1 and done.stdout == ""
    assert "bad.jsonl:2:" in done.stderr and "not an IRI" in done.stderr
    assert consume(isolated, 1, timeout=3) == []


def test_provstream_emit_exits_non_zero_when_kafka_is_unreachable(isolated: Settings, tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(REACT_TRAJECTORIES.read_text(encoding="utf-8").splitlines()[0] + "\n")
    unreachable = replace(isolated, kafka_bootstrap="127.0.0.1:1")
    done = cli(unreachable, "emit", "--jsonl", str(path), timeout=60, PROVSTREAM_EMIT_BLOCK_MS="1000")
    assert done.returncode == 1
    assert "cannot reach Kafka at 127.0.0.1:1" in done.stderr
