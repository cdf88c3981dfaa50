"""Two workers and two sinks on the cluster: one of each SIGKILLed, a third worker added; Neo4j SIGKILLed."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from e2e_stack import PrivateStack
from faults_support import Pipeline, assert_exactly_once, run_case

from provstream.settings import Settings

pytestmark = pytest.mark.faults
NEO4J_DOWN_S = 10.0


@pytest.mark.parametrize("role", ["worker", "sink"])
def test_one_of_two_sigkilled(role: str, isolated: Settings, unique: str, logs: Path, results_file: Path) -> None:
    def kill(p: Pipeline) -> None:
        victim = (p.workers if role == "worker" else p.sinks)[0]
        victim.kill()
        time.sleep(10.0)  # the survivor takes over the victim's partitions (rebalance)
        p.replace(victim).wait_ready()

    outcome = run_case(f"cluster, 2+2: one of two {role}s SIGKILLed (replaced 10 s later)", isolated, logs,
                       f"k2{role[0]}{unique}", kill, lambda _p: None, results_file=results_file, workers=2, sinks=2)
    assert_exactly_once(outcome)


def test_a_third_worker_added_mid_stream(isolated: Settings, unique: str, logs: Path, results_file: Path) -> None:
    def add(p: Pipeline) -> None:
        p.add_worker().wait_ready()
        time.sleep(8.0)

    outcome = run_case("cluster, 2+2: a third worker added mid-stream (rebalance)", isolated, logs, f"w3{unique}",
                       add, lambda _p: None, results_file=results_file, workers=2, sinks=2)
    assert_exactly_once(outcome)


def test_neo4j_sigkilled_mid_batch(private_stack: PrivateStack, isolated: Settings, unique: str, logs: Path,
                                   results_file: Path) -> None:
    """SIGKILL (no clean stop) while the sinks write; restarted 10 s later (store recovery on start)."""
    def kill(_p: Pipeline) -> None:
        pid = private_stack.server_pid("neo4j")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        time.sleep(NEO4J_DOWN_S)

    try:
        outcome = run_case("cluster, 2+2: Neo4j SIGKILLed mid-batch, restarted 10 s later", isolated, logs,
                           f"nk{unique}", kill, lambda _p: private_stack.script("neo4j", "up") and None,
                           results_file=results_file, workers=2, sinks=2)
    finally:
        private_stack.script("neo4j", "up")
    assert_exactly_once(outcome)
