"""Neo4j and the Kafka broker of the private stack stopped and restarted while sessions stream."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from e2e_stack import PrivateStack
from faults_support import Pipeline, assert_exactly_once, run_case

from provstream.settings import Settings

pytestmark = pytest.mark.faults
NEO4J_DOWN_S = 20.0
KAFKA_DOWN_S = 15.0


def _stop_for(stack: PrivateStack, server: str, seconds: float) -> None:
    """``deploy/<server>.sh down``, wait until it has been down ``seconds``, then ``up`` (the fault's restore)."""
    stack.script(server, "down")
    down_at = time.monotonic()
    status = stack.script(server, "status")
    assert "stopped" in status, status
    time.sleep(max(0.0, seconds - (time.monotonic() - down_at)))


def test_neo4j_stopped_for_20_s_and_restarted(private_stack: PrivateStack, isolated: Settings, unique: str,
                                              logs: Path, results_file: Path) -> None:
    def restore(_p: Pipeline) -> None:
        private_stack.script("neo4j", "up")

    try:
        outcome = run_case("Neo4j stopped 20 s and restarted", isolated, logs, f"nr{unique}",
                           lambda _p: _stop_for(private_stack, "neo4j", NEO4J_DOWN_S), restore,
                           results_file=results_file)
    finally:
        private_stack.script("neo4j", "up")  # never leave the rest of the suite without Neo4j
    assert_exactly_once(outcome)


def test_kafka_broker_stopped_and_restarted(private_stack: PrivateStack, isolated: Settings, unique: str,
                                            logs: Path, results_file: Path) -> None:
    def restore(_p: Pipeline) -> None:
        private_stack.script("kafka", "up")

    try:
        outcome = run_case("Kafka broker stopped 15 s and restarted", isolated, logs, f"kr{unique}",
                           lambda _p: _stop_for(private_stack, "kafka", KAFKA_DOWN_S), restore,
                           results_file=results_file)
    finally:
        private_stack.script("kafka", "up")
    assert_exactly_once(outcome)
