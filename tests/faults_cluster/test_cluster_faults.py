"""Brokers of the 3-broker cluster killed, restarted and lost two at a time while sessions stream.

Every case streams sessions continuously (80 steps/s), injects the fault,
recovers, and then checks that every step is in the graph exactly once and
that the graph equals the fold of the events log (:func:`run_case`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from e2e_stack import PrivateStack, in_sync, leaders
from faults_support import Pipeline, assert_exactly_once, run_case

from provstream.settings import Settings

pytestmark = pytest.mark.faults
DOWN_S = 20.0  # a killed broker is restarted this long after the kill


def _most_leading(settings: Settings, topic: str) -> int:
    """The broker leading the most partitions of ``topic`` (the lowest id on a tie)."""
    led = list(leaders(settings, topic).values())
    return max(sorted(set(led) - {-1}), key=led.count)


def _wait_in_sync(settings: Settings, topics: list[str], replicas: int = 3, timeout: float = 120.0) -> None:
    """Until every partition of ``topics`` has ``replicas`` in-sync replicas again."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if all(len(isr) >= replicas for t in topics for isr in in_sync(settings, t).values()):
                return
        except Exception:  # a broker still starting
            pass
        assert time.monotonic() < deadline, f"partitions of {topics} not back in sync within {timeout:.0f} s"
        time.sleep(0.5)


def _restore_all(stack: PrivateStack, settings: Settings) -> None:
    stack.script("kafka", "up")
    _wait_in_sync(settings, [settings.events_topic, settings.triples_topic])


def _changelog(settings: Settings) -> str:
    return f"{settings.worker_app_id}-sessions-changelog"


def test_sigkill_of_the_events_leader(private_stack: PrivateStack, isolated: Settings, unique: str, logs: Path,
                                      results_file: Path) -> None:
    killed: list[int] = []

    def inject(_p: Pipeline) -> None:
        broker = _most_leading(isolated, isolated.events_topic)
        killed.append(broker)
        private_stack.kill_broker(broker)
        time.sleep(DOWN_S)

    try:
        outcome = run_case("cluster: SIGKILL of the events-partition leader, restarted 20 s later", isolated, logs,
                           f"cl{unique}", inject, lambda _p: _restore_all(private_stack, isolated),
                           results_file=results_file)
    finally:
        private_stack.script("kafka", "up")
    assert_exactly_once(outcome)
    assert killed


def test_sigkill_of_the_changelog_leader(private_stack: PrivateStack, isolated: Settings, unique: str, logs: Path,
                                         results_file: Path) -> None:
    def inject(_p: Pipeline) -> None:
        private_stack.kill_broker(_most_leading(isolated, _changelog(isolated)))
        time.sleep(DOWN_S)

    try:
        outcome = run_case("cluster: SIGKILL of the broker leading the worker's changelog, restarted 20 s later",
                           isolated, logs, f"cc{unique}", inject,
                           lambda _p: _restore_all(private_stack, isolated), results_file=results_file)
    finally:
        private_stack.script("kafka", "up")
    assert_exactly_once(outcome)


def test_rolling_restart_of_all_three_brokers(private_stack: PrivateStack, isolated: Settings, unique: str,
                                              logs: Path, results_file: Path) -> None:
    def inject(_p: Pipeline) -> None:
        for broker in (1, 2, 3):
            private_stack.script("kafka", "down", str(broker))  # clean stop (SIGTERM): controlled shutdown
            private_stack.script("kafka", "up", str(broker))
            _wait_in_sync(isolated, [isolated.events_topic, isolated.triples_topic, _changelog(isolated)])

    try:
        outcome = run_case("cluster: rolling restart of all three brokers", isolated, logs, f"cr{unique}", inject,
                           lambda _p: None, results_file=results_file)
    finally:
        private_stack.script("kafka", "up")
    assert_exactly_once(outcome)


def test_two_brokers_down(private_stack: PrivateStack, isolated: Settings, unique: str, logs: Path,
                          results_file: Path) -> None:
    """Below min.insync.replicas (and without a controller majority): writes block, nothing is lost, and
    everything resumes once one broker returns; the third comes back after that."""
    def inject(_p: Pipeline) -> None:
        private_stack.kill_broker(2)
        private_stack.kill_broker(3)
        time.sleep(DOWN_S)
        private_stack.script("kafka", "up", "2")

    try:
        outcome = run_case("cluster: two of three brokers SIGKILLed for 20 s, one restarted, then the other",
                           isolated, logs, f"c2{unique}", inject, lambda _p: None, results_file=results_file)
        private_stack.script("kafka", "up")
    finally:
        private_stack.script("kafka", "up")
    assert_exactly_once(outcome)
