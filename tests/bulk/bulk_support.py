"""Helpers of the bulk rebuild test: the private stack's directory, ports, environment and commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STACK_DIR = REPO / ".stack" / "private-bulk"
_OFF = int(os.environ.get("PROVSTREAM_PRIVATE_PORT_OFFSET", "0"))
PORTS = {"PROVSTREAM_KAFKA_PORT": 27092, "PROVSTREAM_KAFKA_CONTROLLER_PORT": 27093,
         "PROVSTREAM_NEO4J_BOLT_PORT": 27687, "PROVSTREAM_NEO4J_HTTP_PORT": 27474,
         "PROVSTREAM_OTLP_GRPC_PORT": 27317, "PROVSTREAM_OTLP_HTTP_PORT": 27318}


def private_env(**extra: str) -> dict[str, str]:
    """The environment of the private stack: its directory and ports, nothing else of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVSTREAM_")}
    env.update({k: str(p + _OFF) for k, p in PORTS.items()}, PROVSTREAM_STACK_DIR=str(STACK_DIR))
    env.update(extra)
    return env


def provstream(*args: str, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "provstream"), *args], env=private_env(**extra),
                          capture_output=True, text=True, timeout=timeout, check=False)
