"""Issue 17 item 10 on a private stack of this module's own (ports 24192/24193/24787/24574): a long
``stack up`` shows its progress on a terminal, and the worker does not flood its log while Kafka is down."""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.privatestack

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STACK_DIR = REPO / ".stack" / "private-firsthour-quiet"
_OFF = int(os.environ.get("PROVSTREAM_PRIVATE_PORT_OFFSET", "0"))  # two checkouts side by side
_BASE = {"PROVSTREAM_KAFKA_PORT": "24192", "PROVSTREAM_KAFKA_CONTROLLER_PORT": "24193",
         "PROVSTREAM_NEO4J_BOLT_PORT": "24787", "PROVSTREAM_NEO4J_HTTP_PORT": "24574"}
PORTS = {k: str(int(v) + _OFF) if k.endswith("_PORT") else v for k, v in _BASE.items()}


def env(**extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("PROVSTREAM_")}
    out.update(PORTS, PROVSTREAM_STACK_DIR=str(STACK_DIR))
    out.update(extra)
    return out


def on_a_terminal(*args: str, timeout: float = 600) -> tuple[int, str]:
    """Run with stdout and stderr on a pseudo-terminal; the status and everything it showed."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(BIN / args[0]), *args[1:]], env=env(), stdout=slave, stderr=slave,
                            stdin=subprocess.DEVNULL)
    os.close(slave)
    seen, deadline = bytearray(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([master], [], [], 1.0)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    return proc.wait(timeout=60), seen.decode(errors="replace")


@pytest.fixture(scope="module")
def servers() -> Iterator[str]:
    """The private Kafka and Neo4j, started by ``stack up --servers-only`` on a terminal; what it showed."""
    STACK_DIR.mkdir(parents=True, exist_ok=True)
    try:
        status, shown = on_a_terminal("provstream", "stack", "up", "--servers-only")
        assert status == 0, shown
        yield shown
    finally:
        subprocess.run([str(BIN / "provstream"), "stack", "down"], env=env(), capture_output=True, timeout=300,
                       check=False)
        shutil.rmtree(STACK_DIR, ignore_errors=True)


def test_stack_up_shows_each_server_starting_on_a_terminal(servers: str) -> None:
    assert re.search(r"\rkafka: starting .*\.\.\. 0:\d\d", servers), servers
    assert re.search(r"\rneo4j: starting .*\.\.\. 0:\d\d", servers), servers
    assert "kafka: kafka " in servers and "neo4j: neo4j " in servers  # the usual result lines follow


def test_the_worker_logs_each_kind_of_error_once_while_kafka_is_down(servers: str, tmp_path: Path) -> None:
    log = tmp_path / "worker.err"
    with log.open("wb") as err:
        worker = subprocess.Popen([str(BIN / "provstream"), "worker"], env=env(PROVSTREAM_STACK_DIR=str(tmp_path)),
                                  stdout=subprocess.PIPE, stderr=err, text=True, cwd=tmp_path)
        try:
            assert worker.stdout is not None
            ready = select.select([worker.stdout], [], [], 120)[0] and worker.stdout.readline()
            assert ready and ready.startswith("provstream worker ready"), log.read_text()
            down = subprocess.run(["bash", str(REPO / "deploy" / "kafka.sh"), "down"], env=env(),
                                  capture_output=True, text=True, timeout=120, check=False)
            assert down.returncode == 0, down.stderr
            time.sleep(15)
            lines = log.read_text().splitlines()
        finally:
            worker.kill()
            worker.wait(timeout=60)
    errors = [line for line in lines if "[ERROR]" in line]
    kinds = {re.sub(r"\d+", "N", line.split("[ERROR]", 1)[1]) for line in errors}
    assert errors and "Logging error" not in "\n".join(lines), lines[:40]
    assert len(errors) <= 2 * len(kinds) + 5, f"{len(errors)} ERROR lines in 15 s:\n" + "\n".join(errors[:40])
