"""Fault-injection cases (``make faults``): a private Kafka + Neo4j stack, started once per run.

The shared servers on the default ports are never stopped: every case here
runs on ``<repo>/.stack/private-faults`` (Kafka 127.0.0.1:19092, Neo4j
bolt 127.0.0.1:17687), which this session fixture starts and stops. The
conftest overrides ``base_settings``, so the shared ``stack`` and ``isolated``
fixtures give settings of the private stack (own topics, groups and
collection per test).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))  # the end-to-end harness shared with bench/bench_e2e.py

from e2e_graph import warm_up  # noqa: E402
from e2e_stack import FAULT_PORTS, PrivateStack  # noqa: E402
from faults_support import RESULTS, table  # noqa: E402

from provstream.settings import Settings  # noqa: E402


@pytest.fixture(scope="session")
def private_stack() -> Iterator[PrivateStack]:
    stack = PrivateStack("faults", FAULT_PORTS)
    try:
        stack.up()
        yield stack
    finally:
        errors = stack.down()
        assert not errors, f"stopping the private stack failed: {errors}"


@pytest.fixture(scope="session")
def base_settings(private_stack: PrivateStack) -> Settings:
    settings = private_stack.settings()
    warm_up(settings)
    return settings


@pytest.fixture
def logs(private_stack: PrivateStack, unique: str) -> Path:
    """This test's process logs (kept after the run for a look)."""
    path = private_stack.dir / "logs" / "cases" / unique
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture
def results_file(private_stack: PrivateStack) -> Path:
    return private_stack.dir / "fault-results.json"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if RESULTS:
        terminalreporter.write_sep("=", "fault cases")
        terminalreporter.write_line(table(RESULTS))
