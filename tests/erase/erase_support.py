"""Helpers of the erase acceptance case: the private stack's directory, ports, environment and commands."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from otlp_support import provstream_process

REPO = Path(__file__).resolve().parents[2]
STACK_DIR = REPO / ".stack" / "private-erase"
_OFF = int(os.environ.get("PROVSTREAM_PRIVATE_PORT_OFFSET", "0"))  # two checkouts side by side
_BASE = {"PROVSTREAM_KAFKA_PORT": "25092", "PROVSTREAM_KAFKA_CONTROLLER_PORT": "25093",
         "PROVSTREAM_NEO4J_BOLT_PORT": "25687", "PROVSTREAM_NEO4J_HTTP_PORT": "25474",
         "PROVSTREAM_OTLP_GRPC_PORT": "25317", "PROVSTREAM_OTLP_HTTP_PORT": "25318"}
PORTS = {k: str(int(v) + _OFF) if k.endswith("_PORT") else v for k, v in _BASE.items()}


def private_env(**extra: str) -> dict[str, str]:
    """The environment of the private stack: its directory and ports, nothing else of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVSTREAM_")}
    env.update(PORTS, PROVSTREAM_STACK_DIR=str(STACK_DIR), PROVSTREAM_ENCRYPT="1",
               PROVSTREAM_KEYS_COMPACTION_MS="1000")
    env.update(extra)
    return env


def provstream(*args: str, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "provstream"), *args], env=private_env(**extra),
                          capture_output=True, text=True, timeout=timeout, check=False)


@contextmanager
def otlp_receiver(timeout: float = 60) -> Iterator[subprocess.Popen[str]]:
    """``provstream otlp`` on the private stack's OTLP ports (encryption on), ready when yielded; always stopped."""
    with provstream_process(["otlp"], private_env(), "provstream otlp ready", timeout) as proc:
        yield proc
