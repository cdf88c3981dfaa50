"""Helpers of the private-stack cases: the environment of a new user of that stack, and its commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
_OFF = int(os.environ.get("PROVSTREAM_PRIVATE_PORT_OFFSET", "0"))  # two checkouts side by side
_BASE = {"PROVSTREAM_KAFKA_PORT": "29192", "PROVSTREAM_KAFKA_CONTROLLER_PORT": "29193",
         "PROVSTREAM_NEO4J_BOLT_PORT": "27787", "PROVSTREAM_NEO4J_HTTP_PORT": "27574"}
PORTS = {k: str(int(v) + _OFF) if k.endswith("_PORT") else v for k, v in _BASE.items()}
STACK_DIR = REPO / ".stack" / "private-firsthour"


def private_env(**extra: str) -> dict[str, str]:
    """The environment of a new user of the private stack: its directory and ports, nothing else of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVSTREAM_")}
    env.update(PORTS, PROVSTREAM_STACK_DIR=str(STACK_DIR))
    env.update(extra)
    return env


def provstream(*args: str, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "provstream"), *args], env=private_env(**extra), capture_output=True,
                          text=True, timeout=timeout, check=False)


def deploy_status(server: str) -> int:
    return subprocess.run(["bash", str(REPO / "deploy" / f"{server}.sh"), "status"], env=private_env(),
                          capture_output=True, text=True, check=False).returncode
