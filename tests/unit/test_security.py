"""Settings -> client security options (provstream/security.py) and the ACL table (provstream/acls.py); no servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from provstream.acls import grants
from provstream.errors import ConfigError
from provstream.security import (
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
                              "PROVSTREAM_NEO4J_BOLT_PORT": "37787", **env})


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
    assert s.neo4j_uri == "bolt+s://127.0.0.1:37787"
    uri, tls = neo4j_driver_target(s)
    assert uri == "bolt://127.0.0.1:37787" and "ssl_context" in tls
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
