"""Every private stack the tests, faults and benchmarks start listens below Linux's ephemeral range.

An outgoing connection (any client on the box, our own Kafka consumers among them) takes its local
port from ``net.ipv4.ip_local_port_range`` (32768-60999 by default); a server asked to bind a port in
that range fails at random with "Address already in use" when a connection holds it at that moment.
This happened to the cluster's Neo4j on 41474 in CI, so the ports are kept out of the range.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from e2e_stack import BENCH_PORTS, FAULT_PORTS, Ports, cluster_ports  # noqa: E402

EPHEMERAL = range(32768, 61000)
# "PROVSTREAM_..._PORT": "21192" / PROVSTREAM_..._PORT=21192 / PROVSTREAM_..._PORT: 27092
ASSIGNED = re.compile(r"PROVSTREAM_[A-Z0-9_]*PORT(?:_BASE)?\"?\s*[:=]\s*\"?(\d{4,5})")
SOURCES = ["tests", "bench", "scripts", ".ci", "Makefile"]


def _stack_ports(p: Ports, brokers: int = 1) -> list[int]:
    kafka = [p.kafka + 2 * i for i in range(brokers)] + [p.controller + 2 * i for i in range(brokers)]
    return [*kafka, p.bolt, p.http]


def test_the_shared_private_stacks_avoid_the_ephemeral_range() -> None:
    ports = [*_stack_ports(FAULT_PORTS), *_stack_ports(BENCH_PORTS),
             *_stack_ports(cluster_ports(), 3), *_stack_ports(cluster_ports(100), 3)]
    assert [p for p in ports if p in EPHEMERAL] == []


def test_no_test_or_script_assigns_a_port_in_the_ephemeral_range() -> None:
    files = [f for s in SOURCES for f in ([REPO / s] if (REPO / s).is_file() else (REPO / s).rglob("*"))
             if f.is_file() and f.suffix in {"", ".py", ".sh"} and "__pycache__" not in f.parts]
    found = [(f.relative_to(REPO).as_posix(), int(m.group(1)))
             for f in files for m in ASSIGNED.finditer(f.read_text(errors="replace"))]
    assert len(found) > 10, "the pattern no longer finds the port assignments"
    assert [(f, port) for f, port in found if port in EPHEMERAL] == []
