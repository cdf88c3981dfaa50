"""Settings -> the TLS/SASL options of each client library, in one place.

Every Kafka client of provstream (kafka-python in the emitter, sink, replay,
follow and the topic admin; aiokafka in the OTLP receiver; Faust in the
worker, for its consumer, producer and changelog alike) and the Neo4j driver
take their security options from here, so a new client cannot forget them.

Roles (docs/security.md has the ACL table): ``emitter``, ``otlp``,
``worker``, ``sink``, ``reader`` (replay, follow) and ``admin`` (topics,
ACLs, erase). An explicit ``PROVSTREAM_KAFKA_USERNAME`` is used for every
role; without one, ``PROVSTREAM_SECURE=1`` takes the role's user of the
secured local stack, whose password is in ``<stack dir>/secrets/kafka/<role>``.

Bad configuration raises :class:`ConfigError` naming the setting; passwords
never appear in a message or a ``repr``.

Example::

    KafkaConsumer(**kafka_python_options(settings, "reader"), group_id=None)
"""

from __future__ import annotations

import logging
import socket
import ssl
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

from provstream.errors import ConfigError, ProvstreamError
from provstream.settings import Settings

PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS: Final = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
ROLES: Final = ("admin", "emitter", "otlp", "worker", "sink", "reader")


def kafka_secret_file(settings: Settings, role: str) -> Path:
    """Where the secured local stack keeps ``role``'s Kafka password."""
    return settings.stack_dir / "secrets" / "kafka" / role


def _protocol(settings: Settings) -> str:
    protocol = settings.kafka_security_protocol.strip().upper()
    if protocol not in PROTOCOLS:
        raise ConfigError(f"PROVSTREAM_KAFKA_SECURITY_PROTOCOL must be one of {', '.join(PROTOCOLS)}, "
                          f"got {settings.kafka_security_protocol!r}")
    return protocol


def _ca_file(name: str, value: str) -> str | None:
    if not value:
        return None
    path = Path(value)
    if not path.is_file():
        raise ConfigError(f"{name} {value} does not exist (the PEM file of the CA that signed the server's "
                          "certificate; with PROVSTREAM_SECURE=1 start the stack first: make up)")
    return str(path)


def _read_password_file(name: str, path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"cannot read {name} {path}: {exc.strerror}") from exc


def kafka_credentials(settings: Settings, role: str) -> tuple[str, str]:
    """The SASL user and password of ``role``.

    :param settings: explicit ``kafka_username`` / ``kafka_password`` (or
        ``kafka_password_file``) win; else, with ``secure``, the stack's user ``role``.
    :param role: one of :data:`ROLES`.
    :returns: ``(username, password)``.
    :raises ConfigError: no user or no password, naming the setting to give.
    """
    if role not in ROLES:
        raise ValueError(f"unknown Kafka role {role!r}")
    user, password = settings.kafka_username, settings.kafka_password
    if not user and settings.secure:
        user = role
        if not password and not settings.kafka_password_file:
            password = _read_password_file("the stack's Kafka secret", kafka_secret_file(settings, role))
    if not password and settings.kafka_password_file:
        password = _read_password_file("PROVSTREAM_KAFKA_PASSWORD_FILE", Path(settings.kafka_password_file))
    if not user:
        raise ConfigError(f"PROVSTREAM_KAFKA_SECURITY_PROTOCOL={settings.kafka_security_protocol} needs "
                          "PROVSTREAM_KAFKA_USERNAME (or PROVSTREAM_SECURE=1 for the local secured stack)")
    if not password:
        raise ConfigError(f"no Kafka password for user {user!r}: set PROVSTREAM_KAFKA_PASSWORD or "
                          "PROVSTREAM_KAFKA_PASSWORD_FILE")
    return user, password


def _mechanism(settings: Settings) -> str:
    mechanism = settings.kafka_sasl_mechanism.strip().upper()
    if mechanism not in MECHANISMS:
        raise ConfigError(f"PROVSTREAM_KAFKA_SASL_MECHANISM must be one of {', '.join(MECHANISMS)}, "
                          f"got {settings.kafka_sasl_mechanism!r}")
    return mechanism


def kafka_ssl_context(settings: Settings) -> ssl.SSLContext:
    """A client TLS context that verifies the broker against ``kafka_ca_file`` (or the system's CAs)."""
    ca = _ca_file("PROVSTREAM_KAFKA_CA_FILE", settings.kafka_ca_file)
    try:
        return ssl.create_default_context(cafile=ca)
    except ssl.SSLError as exc:
        raise ConfigError(f"PROVSTREAM_KAFKA_CA_FILE {ca} is not a PEM CA certificate: {exc}") from exc


def kafka_python_options(settings: Settings, role: str) -> dict[str, Any]:
    """kafka-python client options (producer, consumer, admin) for ``role``.

    :param settings: the security settings and the bootstrap address.
    :param role: the principal's role (:data:`ROLES`).
    :returns: ``bootstrap_servers`` plus ``security_protocol`` and, as needed,
        ``ssl_context`` and the ``sasl_*`` options.

    >>> kafka_python_options(Settings(), "reader")
    {'bootstrap_servers': '127.0.0.1:9092', 'security_protocol': 'PLAINTEXT'}
    """
    protocol = _protocol(settings)
    options: dict[str, Any] = {"bootstrap_servers": settings.kafka_bootstrap, "security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = kafka_ssl_context(settings)
    if protocol.startswith("SASL_"):
        user, password = kafka_credentials(settings, role)
        options.update(sasl_mechanism=_mechanism(settings), sasl_plain_username=user, sasl_plain_password=password)
    return options


def aiokafka_options(settings: Settings, role: str) -> dict[str, Any]:
    """aiokafka client options for ``role`` (the OTLP receiver's producer); same keys as kafka-python's."""
    return kafka_python_options(settings, role)


def faust_options(settings: Settings, role: str = "worker") -> dict[str, Any]:
    """``faust.App`` options: ``broker_credentials`` (used by its consumer, producer and topic admin).

    >>> faust_options(Settings())
    {}
    """
    import faust

    protocol = _protocol(settings)
    if protocol == "PLAINTEXT":
        return {}
    context = kafka_ssl_context(settings) if protocol in ("SSL", "SASL_SSL") else None
    if protocol == "SSL":
        return {"broker_credentials": faust.SSLCredentials(context)}
    user, password = kafka_credentials(settings, role)
    return {"broker_credentials": faust.SASLCredentials(username=user, password=password, ssl_context=context,
                                                        mechanism=_mechanism(settings))}


def neo4j_driver_target(settings: Settings) -> tuple[str, dict[str, Any]]:
    """The URI and driver options for ``settings.neo4j_uri``, trusting ``neo4j_ca_file`` when given.

    ``bolt+s://`` / ``neo4j+s://`` with a CA file become ``bolt://`` / ``neo4j://``
    plus an ``ssl_context`` that verifies against that CA (the driver takes a
    custom trust only that way).

    >>> neo4j_driver_target(Settings(neo4j_uri="bolt://127.0.0.1:7687"))
    ('bolt://127.0.0.1:7687', {})
    """
    uri = settings.neo4j_uri
    parts = urlsplit(uri)
    ca = _ca_file("PROVSTREAM_NEO4J_CA_FILE", settings.neo4j_ca_file)
    if ca is None or not parts.scheme.endswith("+s"):
        return uri, {}
    try:
        context = ssl.create_default_context(cafile=ca)
    except ssl.SSLError as exc:
        raise ConfigError(f"PROVSTREAM_NEO4J_CA_FILE {ca} is not a PEM CA certificate: {exc}") from exc
    return urlunsplit(parts._replace(scheme=parts.scheme.removesuffix("+s"))), {"ssl_context": context}


def describe_kafka_failure(settings: Settings, exc: BaseException) -> str:
    """One line saying why a Kafka connection failed, naming the setting to check.

    :param exc: what the client raised.
    :returns: e.g. ``"Kafka at 127.0.0.1:9092 refused the SASL login of user 'sink' (check
        PROVSTREAM_KAFKA_USERNAME / PROVSTREAM_KAFKA_PASSWORD)"``.
    """
    text = f"{type(exc).__name__}: {exc}"
    addr = settings.kafka_bootstrap
    lowered = text.lower()
    if "authentication" in lowered or "sasl" in lowered:
        user = settings.kafka_username or "(the role's user)"
        return (f"Kafka at {addr} refused the SASL login of user {user!r} "
                "(check PROVSTREAM_KAFKA_USERNAME / PROVSTREAM_KAFKA_PASSWORD)")
    if "certificate" in lowered or "ssl" in lowered:
        return (f"TLS to Kafka at {addr} failed: {exc} "
                "(check PROVSTREAM_KAFKA_CA_FILE / PROVSTREAM_KAFKA_SECURITY_PROTOCOL)")
    if "authoriz" in lowered:
        return f"Kafka at {addr} refused the operation to this principal: {exc} (see docs/security.md, ACLs)"
    return f"cannot reach Kafka at {addr}: {text} (check PROVSTREAM_KAFKA_BOOTSTRAP / " \
           "PROVSTREAM_KAFKA_SECURITY_PROTOCOL)"


class _Collect(logging.Handler):
    """Keeps the reasons kafka-python logs for failed bootstrap connections."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)  # kafka-python logs each failed attempt's cause, then times out
        self.reasons: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.reasons.append(record.getMessage())


def _plain_answers(sock: socket.socket) -> bool:
    """A Kafka ApiVersions v0 request gets a Kafka answer (its correlation id) on a plaintext connection."""
    sock.sendall(b"\x00\x00\x00\x0c\x00\x12\x00\x00prov\x00\x02ps")
    reply = b""
    try:
        while len(reply) < 8:
            chunk = sock.recv(8 - len(reply))
            if not chunk:
                break
            reply += chunk
    except OSError:
        return False
    return reply[4:8] == b"prov"


def check_kafka(settings: Settings, role: str, timeout_s: float = 8.0) -> None:
    """Fail fast, with one line naming the setting, when ``role`` cannot use Kafka as configured.

    Checks, in order: the broker answers; TLS verifies against the CA (or the
    broker speaks TLS to a plaintext client); the SASL login succeeds.

    :param settings: the client settings (first address of ``kafka_bootstrap``).
    :param role: the principal's role (:data:`ROLES`).
    :param timeout_s: the longest the whole check takes.
    :raises ConfigError: a certificate, protocol or login problem (retrying will not help).
    :raises ProvstreamError: Kafka unreachable, or another failure.
    """
    options = kafka_python_options(settings, role)
    protocol = options["security_protocol"]
    host, _, port = settings.kafka_bootstrap.split(",")[0].strip().rpartition(":")
    addr = f"{host}:{port}"
    try:
        raw = socket.create_connection((host, int(port)), timeout=min(timeout_s, 5.0))
    except (OSError, ValueError) as exc:
        raise ProvstreamError(f"cannot reach Kafka at {addr}: {exc} (check PROVSTREAM_KAFKA_BOOTSTRAP)") from exc
    with raw:
        raw.settimeout(3.0)
        if protocol in ("SSL", "SASL_SSL"):
            try:
                with options["ssl_context"].wrap_socket(raw, server_hostname=host):
                    pass
            except ssl.SSLCertVerificationError as exc:
                raise ConfigError(f"Kafka at {addr} presented a certificate not signed by a trusted CA "
                                      f"({exc.verify_message}; check PROVSTREAM_KAFKA_CA_FILE)") from exc
            except (ssl.SSLError, OSError) as exc:
                raise ConfigError(f"no TLS from Kafka at {addr} ({exc}): the listener may be plaintext "
                                      "(check PROVSTREAM_KAFKA_SECURITY_PROTOCOL)") from exc
        elif not _plain_answers(raw):
            raise ConfigError(f"Kafka at {addr} does not answer a {protocol} client: it probably requires "
                                  "TLS/SASL (check PROVSTREAM_KAFKA_SECURITY_PROTOCOL; PROVSTREAM_SECURE=1 for the "
                                  "secured local stack)")
    if not protocol.startswith("SASL_"):
        return
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    collect = _Collect()
    logger = logging.getLogger("kafka")
    saved = logger.level, logger.propagate
    logger.setLevel(logging.WARNING)  # the causes are warnings; they go to ``collect`` only, not to stderr
    logger.propagate = False
    logger.addHandler(collect)
    try:
        admin = KafkaAdminClient(**options, client_id=f"provstream-{role}-check",
                                 bootstrap_timeout_ms=int(timeout_s * 1000), request_timeout_ms=int(timeout_s * 1000))
        admin.close()
    except KafkaError as exc:
        reason = next((r for r in collect.reasons if "AuthenticationFailed" in r), str(exc))
        if "Authentication" in reason:
            user = kafka_credentials(settings, role)[0]
            raise ConfigError(f"Kafka at {addr} refused the {options['sasl_mechanism']} login of user {user!r}: "
                                  "wrong user or password (check PROVSTREAM_KAFKA_USERNAME / "
                                  "PROVSTREAM_KAFKA_PASSWORD)") from exc
        raise ProvstreamError(f"cannot use Kafka at {addr}: {reason}") from exc
    finally:
        logger.removeHandler(collect)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]
