"""The erase acceptance case on a private stack (``make erase-tests``; not in ``make test``).

A private Kafka + Neo4j in ``<repo>/.stack/private-erase`` on ports 25092
(Kafka), 25093 (controller), 25687 (Bolt), 25474 (HTTP), the test's OTLP
receiver on 25317 (gRPC) / 25318 (HTTP) (all moved by
``PROVSTREAM_PRIVATE_PORT_OFFSET``): the test reads the
broker's raw log segment files on disk, which only a stack of its own allows.
Started once per session, stopped at the end; shared servers are never touched.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))  # worker_support, sink_support
from erase_support import STACK_DIR, private_env, provstream  # noqa: E402

from provstream.settings import Settings  # noqa: E402


@pytest.fixture(scope="session")
def private_stack() -> Iterator[Settings]:
    """The private servers (``provstream stack up --servers-only``), encryption on; their settings."""
    STACK_DIR.mkdir(parents=True, exist_ok=True)
    try:
        done = provstream("stack", "up", "--servers-only", timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        yield Settings.from_env(private_env())
    finally:
        provstream("stack", "down", timeout=300)


@pytest.fixture(scope="session")
def base_settings(private_stack: Settings) -> Settings:
    """The shared fixtures (``stack``, ``isolated``) give settings of the private stack here."""
    return replace(private_stack, encrypt=1)
