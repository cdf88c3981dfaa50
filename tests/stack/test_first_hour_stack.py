"""Issue 17 items 2 and 3 on a private stack (see conftest.py)."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from kafka import KafkaConsumer
from stack_support import BIN, PORTS, deploy_status, private_env, provstream

from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings

pytestmark = pytest.mark.privatestack


def test_the_port_variables_alone_point_every_client_at_the_private_stack(
        isolated: Settings, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert isolated.kafka_bootstrap == "127.0.0.1:" + PORTS["PROVSTREAM_KAFKA_PORT"]
    assert isolated.neo4j_uri == "bolt://127.0.0.1:" + PORTS["PROVSTREAM_NEO4J_BOLT_PORT"]
    path = tmp_path / "one.jsonl"
    path.write_text(REACT_TRAJECTORIES.read_text(encoding="utf-8").splitlines()[0] + "\n")
    done = provstream("emit", "--jsonl", str(path), timeout=120, PROVSTREAM_EVENTS_TOPIC=isolated.events_topic,
                      PROVSTREAM_COLLECTION=isolated.collection)
    assert done.returncode == 0, done.stderr
    consumer = KafkaConsumer(isolated.events_topic, bootstrap_servers=isolated.kafka_bootstrap, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got = 0
    deadline = time.monotonic() + 30
    try:
        while got == 0 and time.monotonic() < deadline:
            got += sum(len(r) for r in consumer.poll(timeout_ms=300).values())
    finally:
        consumer.close()
    assert got > 0, "the steps went somewhere else than the private Kafka"
    # the read side finds the private Neo4j from the bolt port alone
    listed = provstream("stack", "status", timeout=60)
    assert "bolt://127.0.0.1:" + PORTS["PROVSTREAM_NEO4J_BOLT_PORT"] in listed.stdout
    shown = json.loads(provstream_list_json())
    assert isinstance(shown, list)


def provstream_list_json() -> str:
    done = subprocess.run([str(BIN / "tg-list-explain-traces"), "--format", "json"],
                          env=private_env(), capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_failed_stack_up_leaves_running_servers_running(private_stack: Settings) -> None:
    assert deploy_status("kafka") == 0 and deploy_status("neo4j") == 0
    done = provstream("stack", "up", "--servers-only", timeout=300,
                      PROVSTREAM_KAFKA_BOOTSTRAP="127.0.0.1:29999")
    assert done.returncode == 1
    assert "cannot reach Kafka at 127.0.0.1:29999" in done.stderr
    assert "Traceback" not in done.stderr
    assert "nothing was started by this call, nothing stopped" in done.stdout
    assert deploy_status("kafka") == 0, "kafka was stopped by a stack up that did not start it"
    assert deploy_status("neo4j") == 0, "neo4j was stopped by a stack up that did not start it"
