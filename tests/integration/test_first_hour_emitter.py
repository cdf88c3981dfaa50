"""Issue 17 items 1 and 4: the emitter SDK against the real Kafka (each test on its own topic).

1. A script that never calls ``close()`` still delivers every step: the
   transport is flushed at interpreter exit, bounded by
   ``PROVSTREAM_EMIT_CLOSE_MS``, with a warning on stderr for what could not
   be delivered.
4. With Kafka unreachable ``close()`` returns within that bound and names the
   bootstrap address and the cause; a full buffer's ``EmitTimeout`` says why.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import fields, replace

import pytest
from kafka import KafkaConsumer

from provstream.codec.records import decode_event
from provstream.connectors.emitter import Emitter
from provstream.errors import DeliveryFailed, EmitTimeout
from provstream.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def stack(kafka_stack: Settings) -> Settings:
    """These tests need Kafka only."""
    return kafka_stack


def env_of(settings: Settings, **extra: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("PROVSTREAM_")}
    for f in fields(settings):
        if f.repr:
            env["PROVSTREAM_" + f.name.upper()] = str(getattr(settings, f.name))
    env.update(extra)
    return env


def consume_all(settings: Settings, count: int, timeout: float = 30) -> list[bytes]:
    consumer = KafkaConsumer(settings.events_topic, bootstrap_servers=settings.kafka_bootstrap, group_id=None,
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    return got


SCRIPT_WITHOUT_CLOSE = """
from provstream.connectors.emitter import Emitter
from provstream.settings import Settings
em = Emitter(Settings.from_env())
s = em.agent("q", collection=Settings.from_env().collection)
s.iteration(thought="t")
s.conclude("x")
print(s.uri)
"""


def test_steps_of_a_script_that_never_closes_the_emitter_are_delivered(isolated: Settings) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT_WITHOUT_CLOSE], env=env_of(isolated),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    values = consume_all(isolated, 3)
    kinds = [type(decode_event(v).payload).__name__ for v in values]
    assert kinds == ["AgentQuestion", "AgentIteration", "AgentConclusion"]


def test_a_script_that_never_closes_warns_on_stderr_when_kafka_is_unreachable(isolated: Settings) -> None:
    unreachable = replace(isolated, kafka_bootstrap="127.0.0.1:1")
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", SCRIPT_WITHOUT_CLOSE],
                          env=env_of(unreachable, PROVSTREAM_EMIT_CLOSE_MS="2000", PROVSTREAM_EMIT_BLOCK_MS="1000"),
                          capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - start
    assert done.returncode == 0  # the script's own status is kept
    assert "provstream: at exit: 3 step(s) not delivered" in done.stderr
    assert "Kafka at 127.0.0.1:1 unreachable" in done.stderr and "PROVSTREAM_KAFKA_BOOTSTRAP" in done.stderr
    assert "Traceback" not in done.stderr
    assert elapsed < 20


def test_close_with_kafka_unreachable_is_bounded_and_names_the_address_and_cause(isolated: Settings) -> None:
    settings = replace(isolated, kafka_bootstrap="127.0.0.1:1", emit_close_ms=2000, emit_block_ms=1000)
    emitter = Emitter(settings)
    session = emitter.agent("q")
    session.iteration(thought="t")
    start = time.monotonic()
    with pytest.raises(DeliveryFailed) as caught:
        emitter.close()
    assert time.monotonic() - start < 10  # was ~140 s
    message = str(caught.value)
    assert "2 step(s) not delivered" in message
    assert "Kafka at 127.0.0.1:1 unreachable" in message and "PROVSTREAM_KAFKA_BOOTSTRAP" in message


def test_a_full_buffer_says_why(isolated: Settings) -> None:
    settings = replace(isolated, kafka_bootstrap="127.0.0.1:1", emit_buffer=1, emit_block_ms=200,
                       emit_close_ms=500)
    emitter = Emitter(settings)
    session = emitter.agent("q")
    with pytest.raises(EmitTimeout) as caught:
        session.iteration(thought="t")
    message = str(caught.value)
    assert "Kafka at 127.0.0.1:1 unreachable (" in message
    assert not message.rstrip().endswith(":")
    with pytest.raises(DeliveryFailed):
        emitter.close()
