"""Fuzzing at volume: mutated events interleaved with real sessions through the real worker, on the cluster.

``PROVSTREAM_FUZZ_EVENTS`` mutated records (default 2,000; ``make faults-fuzz``
sends 100,000): bit flips and truncations of real events, schema-valid
nonsense, huge and deeply nested values, injection strings in every field.
A real session is emitted between chunks. The worker must never exit, every
bad record must end dead-lettered (with its reason) or folded as inert data
in the fuzz scope, and every real session must be exact.
"""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from e2e_graph import Cypher, check
from e2e_stack import end_offsets
from e2e_workload import Planned, emit_steps, plan
from faults_support import emit_sessions, run_bad_input
from kafka import KafkaConsumer, KafkaProducer

from provstream.codec import records as wire
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.core import events as ev
from provstream.errors import EncodeError
from provstream.settings import Settings
from provstream.topics import ERROR_HEADER

pytestmark = pytest.mark.faults
FUZZ_USER = "fuzz"
CHUNK = 1000  # mutated records between two real sessions
INJECTIONS = ('"}) MATCH (n) DETACH DELETE n //', "'}) MATCH (n) DETACH DELETE n //", "n`:Pwned {pwned: true}) //",
              "$rows", "CALL dbms.security.createUser('pwned', 'pwned', false)", "\x00\x01\ufffd", "../../etc/passwd",
              "<script>alert(1)</script>", "${jndi:ldap://x/a}", "' OR 1=1 --")


def _real(s: Settings, prefix: str) -> list[tuple[bytes, bytes]]:
    memory = MemoryTransport()
    with Emitter(s, transport=memory) as emitter:
        for p in plan(prefix, 20):
            list(emit_steps(emitter, p, FUZZ_USER, "fuzz"))
    return memory.sent


def _text(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.4:
        return rng.choice(INJECTIONS)
    if kind < 0.402:
        return "x" * rng.randint(20_000, 100_000)  # huge (1 field in 500: volume, not only size)
    if kind < 0.5:
        depth = rng.randint(50, 2000)
        return "[" * depth + "{}" + "]" * depth  # deeply nested (as JSON text)
    return "".join(chr(rng.randint(32, 0x2FFF)) for _ in range(rng.randint(0, 40)))


def _nonsense(rng: random.Random, i: int) -> tuple[bytes, bytes] | None:
    t = _text
    payload = rng.choice([
        lambda: ev.AgentQuestion(t(rng)), lambda: ev.GraphRagQuestion(t(rng)), lambda: ev.DocRagQuestion(t(rng)),
        lambda: ev.AgentIteration(rng.randint(-5, 2**63 - 1), t(rng), t(rng), t(rng), t(rng),
                                  tuple(rng.randint(0, 9) for _ in range(rng.randint(0, 3)))),
        lambda: ev.AgentConclusion(t(rng), rng.randint(-1, 2**40)), lambda: ev.GraphRagExploration(rng.randint(-9, 9)),
        lambda: ev.GraphRagFocus((ev.SelectedEdge(t(rng), t(rng), t(rng), t(rng)),)),
        lambda: ev.DocRagExploration(rng.randint(0, 9), tuple(t(rng) for _ in range(rng.randint(0, 3)))),
        lambda: ev.GraphRagSynthesis(t(rng)), lambda: ev.DocRagSynthesis(t(rng)),
    ])()
    mechanism = ev.MECHANISM_OF[type(payload)] if rng.random() < 0.7 else rng.choice(list(ev.MECHANISM_OF.values()))
    session = rng.choice([f"fzv-{i % 50}", t(rng)[:200]])
    event = ev.Event(t(rng)[:300], session, mechanism, rng.randint(0, 2**63 - 1),
                     datetime(rng.randint(1, 9999), 1, 1, tzinfo=UTC), payload, FUZZ_USER, rng.choice(["fuzz", t(rng)]))
    try:
        value = wire.encode_event(event)
    except EncodeError:
        return None
    return session.encode("utf-8", "replace")[:200], value


def mutated(rng: random.Random, real: list[tuple[bytes, bytes]], i: int) -> tuple[bytes | None, bytes]:
    """One bad record: a bit flip, a truncation, or (about half) schema-valid nonsense."""
    key, value = rng.choice(real)
    kind = rng.random()
    if kind < 0.25:
        data = bytearray(value)
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return key, bytes(data)
    if kind < 0.45:
        return key, value[:rng.randrange(len(value))]
    if kind < 0.5:
        return None, bytes(rng.randrange(256) for _ in range(rng.randint(0, 300)))
    made = _nonsense(rng, i)
    return made if made is not None else (key, value[: len(value) // 2])


def test_fuzzing_at_volume(isolated: Settings, unique: str, logs: Path, results_file: Path) -> None:
    count = int(os.environ.get("PROVSTREAM_FUZZ_EVENTS", "2000"))
    rng = random.Random(int(unique, 16))
    real = _real(isolated, f"fr{unique}")
    between: list[Planned] = plan(f"fi{unique}", max(1, count // CHUNK))
    apart = f"{isolated.collection}-between"  # their own scope: run_bad_input checks its good sessions alone

    def send_bad() -> int:
        producer = KafkaProducer(bootstrap_servers=isolated.kafka_bootstrap, acks="all", linger_ms=20,
                                 max_request_size=isolated.max_message_bytes)
        sent = 0
        try:
            for n in range(count):
                key, value = mutated(rng, real, n)
                producer.send(isolated.events_topic, key=key, value=value)
                sent += 1
                if (n + 1) % CHUNK == 0:  # a real session between two chunks
                    producer.flush()
                    sent += emit_sessions(isolated, [between[(n + 1) // CHUNK - 1]], collection=apart)
            producer.flush()
        finally:
            producer.close()
        return sent

    outcome = run_bad_input(f"fuzzing at volume: {count} mutated events interleaved with real sessions", isolated,
                            logs, f"fv{unique}", send_bad, results_file)
    assert outcome.report.ok, outcome.report.summary()
    assert outcome.restarts == (), outcome.restarts  # zero worker (or sink) exits
    with Cypher(isolated) as db:
        report = check(db, between[:count // CHUNK], isolated.user, apart)
    assert report.ok, report.summary()
    assert outcome.dead_lettered > 0
    # every dead letter says why
    consumer = KafkaConsumer(isolated.events_dlq_topic, bootstrap_servers=isolated.kafka_bootstrap,
                             auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=15000)
    try:
        reasons = [dict(r.headers).get(ERROR_HEADER, b"") for r in consumer]
    finally:
        consumer.close()
    assert len(reasons) == end_offsets(isolated, isolated.events_dlq_topic)
    assert all(reasons), "a dead letter without its reason"
