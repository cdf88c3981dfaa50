"""Settings -> client security options (provstream/security.py) and the ACL table (provstream/acls.py); no servers."""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provstream.acls import grants
from provstream.errors import ConfigError, ProvstreamError
from provstream.security import (
    check_kafka,
    faust_options,
    kafka_credentials,
    kafka_python_options,
    neo4j_driver_target,
)
from provstream.settings import Settings

CA = Path(__file__).resolve().parents[1] / "fixtures" / "test-ca.pem"


def secure_settings(tmp_path: Path, **env: str) -> Settings:
    (tmp_path / "secrets" / "kafka").mkdir(parents=True)
    for role in ("sink", "emitter"):
        (tmp_path / "secrets" / "kafka" / role).write_text(f"{role}-secret\n")
    return Settings.from_env({"PROVSTREAM_SECURE": "1", "PROVSTREAM_STACK_DIR": str(tmp_path),
                              "PROVSTREAM_KAFKA_CA_FILE": str(CA), "PROVSTREAM_NEO4J_CA_FILE": str(CA),
                              "PROVSTREAM_NEO4J_BOLT_PORT": "21787", **env})


def test_plaintext_is_the_default() -> None:
    assert kafka_python_options(Settings(), "sink") == {"bootstrap_servers": "127.0.0.1:9092",
                                                         "security_protocol": "PLAINTEXT"}
    assert faust_options(Settings()) == {}
    assert neo4j_driver_target(Settings()) == ("bolt://127.0.0.1:7687", {})


def test_secure_takes_each_role_from_the_stack(tmp_path: Path) -> None:
    s = secure_settings(tmp_path)
    opts = kafka_python_options(s, "sink")
    assert opts["security_protocol"] == "SASL_SSL" and opts["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (opts["sasl_plain_username"], opts["sasl_plain_password"]) == ("sink", "sink-secret")
    assert kafka_credentials(s, "emitter") == ("emitter", "emitter-secret")
    assert s.neo4j_uri == "bolt+s://127.0.0.1:21787"
    uri, tls = neo4j_driver_target(s)
    assert uri == "bolt://127.0.0.1:21787" and "ssl_context" in tls
    creds = faust_options(s, "emitter")["broker_credentials"]
    assert (creds.username, creds.mechanism.value, creds.ssl_context is not None) == ("emitter", "SCRAM-SHA-512", True)


def test_missing_role_secret_names_the_file(tmp_path: Path) -> None:
    s = secure_settings(tmp_path)
    with pytest.raises(ConfigError, match="secrets/kafka/worker"):
        faust_options(s, "worker")


def test_explicit_credentials_win_and_are_never_shown(tmp_path: Path) -> None:
    s = secure_settings(tmp_path, PROVSTREAM_KAFKA_USERNAME="alice", PROVSTREAM_KAFKA_PASSWORD="s3cret")
    assert kafka_credentials(s, "sink") == ("alice", "s3cret")
    assert "s3cret" not in repr(s)
    pw = tmp_path / "pw"
    pw.write_text("from-file\n")
    s = secure_settings(tmp_path / "x", PROVSTREAM_KAFKA_USERNAME="bob", PROVSTREAM_KAFKA_PASSWORD_FILE=str(pw))
    assert kafka_credentials(s, "reader") == ("bob", "from-file")


@pytest.mark.parametrize("env, setting", [
    ({"PROVSTREAM_KAFKA_SECURITY_PROTOCOL": "TLS"}, "PROVSTREAM_KAFKA_SECURITY_PROTOCOL"),
    ({"PROVSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "PROVSTREAM_KAFKA_SASL_MECHANISM": "GSSAPI",
      "PROVSTREAM_KAFKA_USERNAME": "u", "PROVSTREAM_KAFKA_PASSWORD": "p"}, "PROVSTREAM_KAFKA_SASL_MECHANISM"),
    ({"PROVSTREAM_KAFKA_SECURITY_PROTOCOL": "SSL", "PROVSTREAM_KAFKA_CA_FILE": "/nonexistent/ca.pem"},
     "PROVSTREAM_KAFKA_CA_FILE"),
    ({"PROVSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}, "PROVSTREAM_KAFKA_USERNAME"),
    ({"PROVSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "PROVSTREAM_KAFKA_USERNAME": "u"},
     "PROVSTREAM_KAFKA_PASSWORD"),
])
def test_bad_configuration_names_the_setting(env: dict[str, str], setting: str) -> None:
    with pytest.raises(ConfigError, match=setting):
        kafka_python_options(Settings.from_env(env), "reader")


def test_explicit_neo4j_uri_is_kept_in_secure_mode(tmp_path: Path) -> None:
    s = secure_settings(tmp_path, PROVSTREAM_NEO4J_URI="neo4j+s://db.example:7687")
    assert s.neo4j_uri == "neo4j+s://db.example:7687"
    assert neo4j_driver_target(s)[0] == "neo4j://db.example:7687"


def test_acls_are_least_privilege() -> None:
    s = Settings()
    by_role: dict[str, set[tuple[str, str, str]]] = {}
    for g in grants(s):
        by_role.setdefault(g.role, set()).add((g.resource, g.name, g.operation))
    assert by_role["emitter"] == {("TOPIC", s.events_topic, "WRITE"), ("TOPIC", s.events_topic, "DESCRIBE")}
    assert all(op == "READ" for _, _, op in by_role["reader"])
    assert ("TOPIC", s.events_topic, "WRITE") not in by_role["sink"]
    assert {op for _, name, op in by_role["sink"] if name == s.triples_topic} == {"READ"}
    assert "admin" not in by_role  # a super user


# -- check_kafka against a fake broker (SASL_PLAINTEXT, SCRAM-SHA-512) -----------------------------------------------

SALT, ITERATIONS = b"fake-broker-salt", 4096


def _frame(sock: socket.socket) -> bytes | None:
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return None
    return sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)


def _reply(sock: socket.socket, correlation: int, body: bytes) -> None:
    sock.sendall(struct.pack(">ii", len(body) + 4, correlation) + body)


def _string(value: str) -> bytes:
    return struct.pack(">h", len(value)) + value.encode()


def _auth(code: int, message: str, data: bytes) -> bytes:  # SaslAuthenticate v1 response
    return struct.pack(">h", code) + _string(message) + struct.pack(">i", len(data)) + data + struct.pack(">q", 0)


def _broker(conn: socket.socket, password: str, mode: str) -> None:
    """One connection of a Kafka broker that knows user ``reader`` (SCRAM-SHA-512 only). Like Kafka, it answers a
    failed login and closes the connection at once; ``mode="silent"`` never answers anything."""
    client_first = server_first = ""
    with conn:
        while (frame := _frame(conn)) is not None:
            if mode == "silent":
                continue
            api, _, correlation, id_len = struct.unpack_from(">hhih", frame)
            body = frame[10 + id_len:]
            if api == 18:  # ApiVersions
                _reply(conn, correlation, struct.pack(">hi", 0, 0))
            elif api == 17:  # SaslHandshake
                n = struct.unpack_from(">h", body)[0]
                code = 0 if body[2:2 + n] == b"SCRAM-SHA-512" else 33
                _reply(conn, correlation, struct.pack(">hi", code, 1) + _string("SCRAM-SHA-512"))
            elif api == 36 and not client_first:  # SaslAuthenticate, client-first
                client_first = body[4:].decode().removeprefix("n,,")
                nonce = dict(p.split("=", 1) for p in client_first.split(","))["r"] + "server"
                server_first = f"r={nonce},s={base64.b64encode(SALT).decode()},i={ITERATIONS}"
                _reply(conn, correlation, _auth(0, "", server_first.encode()))
            elif api == 36:  # SaslAuthenticate, client-final: verify the proof as RFC 5802 says
                final = body[4:].decode()
                without_proof, proof = final.rsplit(",p=", 1)
                salted = hashlib.pbkdf2_hmac("sha512", password.encode(), SALT, ITERATIONS)
                stored = hashlib.sha512(hmac.digest(salted, b"Client Key", "sha512")).digest()
                message = f"{client_first},{server_first},{without_proof}".encode()
                signature = hmac.digest(stored, message, "sha512")
                client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof), signature, strict=True))
                if hashlib.sha512(client_key).digest() != stored:
                    _reply(conn, correlation, _auth(58, "Authentication failed during authentication due to "
                                                        "invalid credentials with SASL mechanism SCRAM-SHA-512", b""))
                    return  # the answer and the close, together
                server_key = hmac.digest(salted, b"Server Key", "sha512")
                verifier = base64.b64encode(hmac.digest(server_key, message, "sha512")).decode()
                _reply(conn, correlation, _auth(0, "", f"v={verifier}".encode()))


@pytest.fixture
def fake_broker(request: pytest.FixtureRequest) -> Iterator[str]:
    """``host:port`` of a fake broker on a free loopback port whose user ``reader`` has password ``right``."""
    mode = getattr(request, "param", "normal")
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            threading.Thread(target=_broker, args=(conn, "right", mode), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        server.close()


def sasl_settings(addr: str, password: str, mechanism: str = "SCRAM-SHA-512") -> Settings:
    return Settings.from_env({"PROVSTREAM_KAFKA_BOOTSTRAP": addr,
                              "PROVSTREAM_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                              "PROVSTREAM_KAFKA_SASL_MECHANISM": mechanism, "PROVSTREAM_KAFKA_USERNAME": "reader",
                              "PROVSTREAM_KAFKA_PASSWORD": password})


def test_check_kafka_accepts_the_right_password(fake_broker: str) -> None:
    check_kafka(sasl_settings(fake_broker, "right"), "reader")


def test_check_kafka_reports_a_wrong_password_at_once(fake_broker: str) -> None:
    """The broker's refusal arrives together with the close of the connection: it must still be read."""
    for _ in range(20):
        t0 = time.monotonic()
        with pytest.raises(ConfigError, match="wrong user or password") as refused:
            check_kafka(sasl_settings(fake_broker, "s3cret-typo"), "reader")
        assert time.monotonic() - t0 < 2
        assert "PROVSTREAM_KAFKA_PASSWORD" in str(refused.value) and "s3cret" not in str(refused.value)


def test_check_kafka_names_the_mechanism_setting(fake_broker: str) -> None:
    with pytest.raises(ConfigError, match="offers SCRAM-SHA-512; check PROVSTREAM_KAFKA_SASL_MECHANISM"):
        check_kafka(sasl_settings(fake_broker, "right", "PLAIN"), "reader")


@pytest.mark.parametrize("fake_broker", ["silent"], indirect=True)
def test_check_kafka_keeps_its_deadline(fake_broker: str) -> None:
    t0 = time.monotonic()
    with pytest.raises(ProvstreamError, match=r"did not complete an ApiVersions request within 0.5 s"):
        check_kafka(sasl_settings(fake_broker, "right"), "reader", timeout_s=0.5)
    assert time.monotonic() - t0 < 1.5


def test_check_kafka_unreachable() -> None:
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{unused.getsockname()[1]}"  # bound, not listening: connection refused
        with pytest.raises(ProvstreamError, match="cannot reach Kafka"):
            check_kafka(sasl_settings(addr, "right"), "reader", timeout_s=1)
