"""The secured stack (issue 20): the pipeline end to end over SASL_SSL and Bolt TLS, fast one-line
failures for a wrong password, an untrusted certificate and a plaintext client, and the ACLs."""

from __future__ import annotations

import json
import time

import pytest
from conftest import STACK_DIR, run
from kafka import KafkaProducer
from kafka.errors import KafkaError, TopicAuthorizationFailedError

from provstream.security import kafka_python_options
from provstream.settings import Settings

pytestmark = pytest.mark.securestack

OTHER_CA = "/etc/ssl/certs/ca-certificates.crt"  # the system's CAs: none of them signed the stack's certificates


def test_pipeline_end_to_end(secure_stack: Settings) -> None:
    done = run("tg-invoke-agent", "-q", "What is 6 times 7?", "-C", "secure-e2e", timeout=180)
    assert done.returncode == 0, done.stderr
    uri = done.stdout.strip().splitlines()[-1].removeprefix("session: ")
    deadline = time.monotonic() + 90
    while True:
        shown = run("tg-show-explain-trace", uri, "-C", "secure-e2e", "--format", "json")
        if shown.returncode == 0 and json.loads(shown.stdout).get("status") == "complete":
            break
        assert time.monotonic() < deadline, shown.stdout + shown.stderr
        time.sleep(1)
    listed = run("tg-list-explain-traces", "-C", "secure-e2e", "--format", "json")
    assert uri in listed.stdout


def test_config_is_tls(secure_stack: Settings) -> None:
    assert secure_stack.kafka_security_protocol == "SASL_SSL"
    assert secure_stack.neo4j_uri.startswith("bolt+s://")
    conf = (STACK_DIR / "conf" / "kafka" / "server.properties").read_text()
    assert "listeners=SASL_SSL://" in conf and "StandardAuthorizer" in conf
    assert "PLAINTEXT://" not in conf.replace("CONTROLLER:SSL", "")
    assert (STACK_DIR / "conf" / "kafka" / "server.properties").stat().st_mode & 0o077 == 0
    for secret in (STACK_DIR / "secrets").rglob("*"):
        if secret.is_file():
            assert secret.stat().st_mode & 0o077 == 0, secret


@pytest.mark.parametrize("extra, expected", [
    ({"PROVSTREAM_KAFKA_USERNAME": "reader", "PROVSTREAM_KAFKA_PASSWORD": "wrong"}, "wrong user or password"),
    ({"PROVSTREAM_KAFKA_CA_FILE": OTHER_CA}, "not signed by a trusted CA"),
    ({"PROVSTREAM_KAFKA_SECURITY_PROTOCOL": "PLAINTEXT"}, "does not answer a PLAINTEXT client"),
], ids=["wrong-password", "untrusted-cert", "plaintext-client"])
def test_kafka_misconfiguration_fails_fast(secure_stack: Settings, extra: dict[str, str], expected: str) -> None:
    t0 = time.monotonic()
    done = run("provstream", "follow", timeout=60, **extra)
    assert done.returncode == 1
    assert time.monotonic() - t0 < 20
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert "PROVSTREAM_KAFKA_" in lines[0]


def test_untrusted_neo4j_certificate_fails_fast(secure_stack: Settings) -> None:
    done = run("tg-list-explain-traces", timeout=60, PROVSTREAM_NEO4J_CA_FILE=OTHER_CA)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "not trusted" in lines[0] and "PROVSTREAM_NEO4J_CA_FILE" in lines[0]


def test_plain_bolt_is_refused(secure_stack: Settings) -> None:
    port = secure_stack.neo4j_uri.rsplit(":", 1)[1]
    done = run("tg-list-explain-traces", timeout=60, PROVSTREAM_NEO4J_URI=f"bolt://127.0.0.1:{port}")
    assert done.returncode == 1 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_sink_principal_cannot_write_events(secure_stack: Settings) -> None:
    producer = KafkaProducer(**kafka_python_options(secure_stack, "sink"), max_block_ms=15_000, acks="all")
    try:
        with pytest.raises((TopicAuthorizationFailedError, KafkaError)) as refused:
            producer.send(secure_stack.events_topic, b"not allowed").get(timeout=15)
        assert "TopicAuthorization" in type(refused.value).__name__ + str(refused.value)
    finally:
        producer.close(timeout=5)


@pytest.mark.parametrize("role, topic, allowed", [
    ("emitter", "events_topic", True), ("emitter", "triples_topic", False),
    ("reader", "events_topic", False), ("sink", "triples_dlq_topic", True),
])
def test_write_acls(secure_stack: Settings, role: str, topic: str, allowed: bool) -> None:
    producer = KafkaProducer(**kafka_python_options(secure_stack, role), max_block_ms=15_000, acks="all")
    try:
        name = getattr(secure_stack, topic)
        if allowed:
            # a record the pipeline rejects into a dead-letter topic at worst; proves the write is allowed
            producer.send(name, key=b"acl-probe", value=b"acl-probe").get(timeout=15)
        else:
            with pytest.raises(KafkaError):
                producer.send(name, b"acl-probe").get(timeout=15)
    finally:
        producer.close(timeout=5)
