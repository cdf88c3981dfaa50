"""Fault cases on a private 3-broker Kafka cluster + Neo4j (``make faults``, after tests/faults).

The cluster lives in ``<repo>/.stack/private-cluster`` (brokers 127.0.0.1:22092,
22094, 22096, controllers +1, Neo4j bolt 22687 / http 22474;
``PROVSTREAM_CLUSTER_PORT_BASE`` moves them all), started once per run and
stopped at the end. Topics are replicated 3 times with ``min.insync.replicas=2``
(derived from the broker count). The shared servers are never touched.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO / "tests" / "faults"))  # the scenario harness (faults_support) is shared

from e2e_graph import warm_up  # noqa: E402
from e2e_stack import CLUSTER_PORTS, PrivateStack  # noqa: E402
from faults_support import RESULTS, table  # noqa: E402

from provstream.settings import Settings  # noqa: E402

BROKERS = 3


@pytest.fixture(scope="session")
def private_stack() -> Iterator[PrivateStack]:
    stack = PrivateStack("cluster", CLUSTER_PORTS, brokers=BROKERS)
    try:
        stack.up()
        yield stack
    finally:
        errors = stack.down()
        assert not errors, f"stopping the private cluster failed: {errors}"


@pytest.fixture(scope="session")
def base_settings(private_stack: PrivateStack) -> Settings:
    settings = private_stack.settings()
    assert settings.replication_factor == 3 and settings.min_insync_replicas == 2
    warm_up(settings, sessions=200)
    return settings


@pytest.fixture
def logs(private_stack: PrivateStack, unique: str) -> Path:
    path = private_stack.dir / "logs" / "cases" / unique
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def results_file(private_stack: PrivateStack) -> Path:
    return private_stack.dir / "fault-results.json"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if RESULTS:
        terminalreporter.write_sep("=", "cluster fault cases")
        terminalreporter.write_line(table(RESULTS))
