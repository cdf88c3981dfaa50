"""Cases that start and stop a stack of their own (``make stack-tests``; not in ``make test``).

A private Kafka + Neo4j on ports nobody else uses, in ``<repo>/.stack/private-firsthour``,
configured *only* through the server port variables (``PROVSTREAM_KAFKA_PORT``,
``PROVSTREAM_NEO4J_BOLT_PORT``, ...): the clients must find it from those alone
(issue 17 item 3). Started once per session, stopped at the end; the shared
servers on the default ports are never touched.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from stack_support import STACK_DIR, deploy_status, private_env, provstream

from provstream.settings import Settings


@pytest.fixture(scope="session")
def private_stack() -> Iterator[Settings]:
    """The private servers, started with ``provstream stack up --servers-only``; their settings."""
    STACK_DIR.mkdir(parents=True, exist_ok=True)
    try:
        done = provstream("stack", "up", "--servers-only", timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        yield Settings.from_env(private_env())
    finally:
        provstream("stack", "down", timeout=300)
    assert deploy_status("kafka") == 3 and deploy_status("neo4j") == 3


@pytest.fixture(scope="session")
def base_settings(private_stack: Settings) -> Settings:
    """The shared fixtures (``stack``, ``isolated``) give settings of the private stack here."""
    return private_stack
