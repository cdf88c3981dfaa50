"""The bulk rebuild case on a private stack (``make bulk-tests``; not in ``make test``).

The offline importer replaces the whole database and the server is stopped
for it, so this runs on a Kafka + Neo4j of its own in
``<repo>/.stack/private-bulk`` (ports 27092/27093 Kafka, 27687/27474 Neo4j,
moved by ``PROVSTREAM_PRIVATE_PORT_OFFSET``). Started once per session,
stopped at the end; shared servers are never touched.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))  # sink_support
from bulk_support import STACK_DIR, private_env, provstream  # noqa: E402

from provstream.settings import Settings  # noqa: E402


@pytest.fixture(scope="session")
def private_stack() -> Iterator[Settings]:
    """The private servers (``provstream stack up --servers-only``); their settings."""
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
    return private_stack
