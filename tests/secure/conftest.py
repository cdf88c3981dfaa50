"""The secured stack's cases (``make secure-tests``; not in ``make test``).

A private Kafka + Neo4j started with ``PROVSTREAM_SECURE=1 provstream stack up``
(SASL_SSL with SCRAM users, the StandardAuthorizer and least-privilege ACLs,
Bolt over TLS) in ``<repo>/.stack/private-secure`` on ports nobody else uses,
with the worker, sink and OTLP receiver; stopped at the end. The shared
servers on the default ports are never touched.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from provstream.settings import Settings

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STACK_DIR = REPO / ".stack" / "private-secure"
_OFF = int(os.environ.get("PROVSTREAM_PRIVATE_PORT_OFFSET", "0"))  # two checkouts side by side
_BASE = {"PROVSTREAM_KAFKA_PORT": "21192", "PROVSTREAM_KAFKA_CONTROLLER_PORT": "21193",
         "PROVSTREAM_NEO4J_BOLT_PORT": "21787", "PROVSTREAM_NEO4J_HTTP_PORT": "21574",
         "PROVSTREAM_OTLP_GRPC_PORT": "21317", "PROVSTREAM_OTLP_HTTP_PORT": "21318",
         "PROVSTREAM_SECURE": "1", "PROVSTREAM_STACK_DIR": str(STACK_DIR)}
ENV = {k: str(int(v) + _OFF) if k.endswith("_PORT") else v for k, v in _BASE.items()}


def secure_env(**extra: str) -> dict[str, str]:
    """A user's environment for the secured stack: its variables, nothing else of ours, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVSTREAM_")}
    env.update(ENV, **extra)
    return env


def run(*argv: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
    """Run a provstream entry point (``provstream``, ``tg-...``) against the secured stack."""
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], env=secure_env(**extra), capture_output=True, text=True,
                          timeout=timeout, check=False, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="session")
def secure_stack() -> Iterator[Settings]:
    """The secured stack, servers and apps, started once; its settings (admin-less: roles pick their users)."""
    STACK_DIR.mkdir(parents=True, exist_ok=True)
    try:
        done = run("provstream", "stack", "up", timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        yield Settings.from_env(secure_env())
    finally:
        run("provstream", "stack", "down", timeout=300)
