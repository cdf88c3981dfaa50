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

import base64
import hashlib
import hmac
import secrets
import socket
import ssl
import struct
import time
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
    # Every kafka-python client is made with these options: its consumers read records in C from here on.
    from provstream.codec import kafka_records  # noqa: F401 - installs the C reader at import

    protocol = _protocol(settings)
    options: dict[str, Any] = {"bootstrap_servers": settings.kafka_bootstrap, "security_protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        options["ssl_context"] = kafka_ssl_context(settings)
    if protocol.startswith("SASL_"):
        user, password = kafka_credentials(settings, role)
        options.update(sasl_mechanism=_mechanism(settings), sasl_plain_username=user, sasl_plain_password=password)
    return options


def aiokafka_options(settings: Settings, role: str) -> dict[str, Any]:
    """aiokafka client options for ``role`` (the emitter's and the OTLP receiver's producers); same keys as
    kafka-python's."""
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


# -- the fail-fast check: one direct connection, one deadline ----------------------------------------------------
#
# check_kafka speaks the few Kafka requests it needs itself instead of going through a kafka-python client: that
# client's bootstrap retries a failed SASL login with backoff until its timeout and then reports only
# "KafkaTimeoutError: Unable to bootstrap", and its transport drops a response that arrives together with the end of
# the connection -- which is how Kafka answers a wrong password (the error response, then the close) -- so the reason
# was often lost on a busy machine.

_API_VERSIONS: Final = 18
_SASL_HANDSHAKE: Final = 17
_SASL_AUTHENTICATE: Final = 36
_UNSUPPORTED_SASL_MECHANISM: Final = 33
_SASL_AUTHENTICATION_FAILED: Final = 58
_MAX_FRAME: Final = 1 << 20  # the check's responses are small; a bigger "size" is not Kafka talking


class _Wire:
    """Kafka requests and their responses over one blocking socket, every wait bounded by one deadline.

    A response is always read in full before the end of the connection is
    noticed, so an answer the broker sends just before it closes is never lost.
    """

    def __init__(self, sock: socket.socket, deadline: float, client_id: str) -> None:
        """Talk on ``sock`` until ``deadline``.

        :param sock: a connected socket (TCP or TLS).
        :param deadline: the :func:`time.monotonic` time by which every response must be in.
        :param client_id: the client id in the request headers (shows in the broker's logs).
        """
        self._sock = sock
        self._deadline = deadline
        self._client_id = client_id.encode()
        self._correlation = 0

    def _arm(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the check's deadline passed")
        self._sock.settimeout(left)

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            self._arm()
            chunk = self._sock.recv(n - len(data))
            if not chunk:
                raise EOFError(f"the connection was closed after {len(data)} of {n} bytes of a response")
            data += chunk
        return bytes(data)

    def request(self, api_key: int, version: int, body: bytes) -> bytes:
        """Send one request (request header v1) and wait for its response.

        :param api_key: the Kafka API (ApiVersions, SaslHandshake, SaslAuthenticate).
        :param version: the request's version, non-flexible (its response has header v0).
        :param body: the encoded request body.
        :returns: the response body (after the correlation id).
        :raises TimeoutError: no complete response by the deadline.
        :raises EOFError: the broker closed the connection before the response was complete.
        :raises ValueError: the answer is not a Kafka response to this request.
        :raises OSError: the connection failed.
        """
        self._correlation += 1
        frame = struct.pack(">hhih", api_key, version, self._correlation, len(self._client_id)) + self._client_id + body
        self._arm()
        self._sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", self._read(4))[0]
        if not 4 <= size <= _MAX_FRAME:
            raise ValueError(f"not a Kafka response (a frame of {size} bytes)")
        reply = self._read(size)
        if struct.unpack_from(">i", reply)[0] != self._correlation:
            raise ValueError("not a Kafka response (another correlation id)")
        return reply[4:]


class _Fields:
    """Reads the fields of a (non-flexible) Kafka response body in order."""

    def __init__(self, data: bytes) -> None:
        """Read ``data`` from its start.

        :param data: the response body (after the correlation id).
        """
        self._data = data
        self._at = 0

    def _take(self, fmt: str) -> int:
        try:
            (value,) = struct.unpack_from(fmt, self._data, self._at)
        except struct.error as exc:
            raise ValueError(f"a truncated Kafka response: {exc}") from exc
        self._at += struct.calcsize(fmt)
        return int(value)

    def int16(self) -> int:
        """The next INT16."""
        return self._take(">h")

    def blob(self, length_fmt: str = ">i") -> bytes | None:
        """The next BYTES (or STRING) field.

        :param length_fmt: the length prefix, ``>i`` (BYTES) or ``>h`` (STRING).
        :returns: its bytes, ``None`` when null (length -1).
        """
        n = self._take(length_fmt)
        if n < 0:
            return None
        if self._at + n > len(self._data):
            raise ValueError("a truncated Kafka response")
        self._at += n
        return self._data[self._at - n:self._at]

    def string(self) -> str:
        """The next (NULLABLE_)STRING, ``""`` when null."""
        return (self.blob(">h") or b"").decode("utf-8", "replace")

    def strings(self) -> list[str]:
        """The next ARRAY of STRING (empty when null)."""
        return [self.string() for _ in range(max(self._take(">i"), 0))]


def _string(value: str) -> bytes:
    """``value`` as a Kafka STRING (INT16 length, UTF-8)."""
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


class _Scram:
    """The client side of a SCRAM-SHA-256 / SCRAM-SHA-512 login (RFC 5802, RFC 7677), as Kafka runs it.

    >>> s = _Scram("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")  # RFC 7677's example
    >>> s.first()
    b'n,,n=user,r=rOprNGfwEbeRWgbNEkqO'
    >>> s.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    b'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ='
    >>> s.verify(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
    True
    """

    def __init__(self, mechanism: str, user: str, password: str, nonce: str | None = None) -> None:
        """A login as ``user`` with ``password``.

        :param mechanism: ``SCRAM-SHA-256`` or ``SCRAM-SHA-512``.
        :param user: the user name (escaped here as SCRAM requires).
        :param password: the password (Kafka applies no SASLprep, nor does this).
        :param nonce: the client nonce; a fresh random one unless given (tests).
        """
        self._hash = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
        self._password = password.encode()
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._first_bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={self._nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        """The client-first message (user and client nonce)."""
        return f"n,,{self._first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        """The client-final message, with the proof that the client knows the password.

        :param server_first: the server-first message (combined nonce, salt, iterations).
        :returns: the client-final message.
        :raises ValueError: a malformed server-first message, or a nonce that does not extend ours.
        """
        text = server_first.decode("utf-8", "replace")
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            nonce, salt, iterations = fields["r"], base64.b64decode(fields["s"]), int(fields["i"])
        except (KeyError, ValueError) as exc:
            raise ValueError(f"a malformed SCRAM server-first message ({exc})") from exc
        if not nonce.startswith(self._nonce) or iterations < 1:
            raise ValueError("a SCRAM server-first message with a foreign nonce or no iterations")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._first_bare},{text},{without_proof}".encode()
        signature = hmac.digest(hashlib.new(self._hash, client_key).digest(), auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = hmac.digest(hmac.digest(salted, b"Server Key", self._hash), auth_message, self._hash)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        """Check the server's signature in the server-final message.

        :param server_final: the server-final message.
        :returns: whether it carries the signature only a server that knows the password can make.
        """
        fields = dict(part.split("=", 1) for part in server_final.decode("utf-8", "replace").split(",") if "=" in part)
        try:
            signature = base64.b64decode(fields.get("v", ""), validate=True)
        except ValueError:
            return False
        return bool(self._server_signature) and hmac.compare_digest(signature, self._server_signature)


def _plain_answers(wire: _Wire) -> bool:
    """Whether a Kafka ApiVersions v0 request gets a Kafka answer on a plaintext connection.

    :param wire: the plaintext connection.
    :returns: ``False`` when the peer closes, fails or answers something else (a TLS alert, say).
    :raises TimeoutError: no answer at all by the deadline.
    """
    try:
        wire.request(_API_VERSIONS, 0, b"")
    except TimeoutError:
        raise
    except (EOFError, ValueError, OSError):
        return False
    return True


def _sasl_login(wire: _Wire, addr: str, mechanism: str, user: str, password: str) -> None:
    """Log in as ``user`` on ``wire``: SaslHandshake v1, then SaslAuthenticate v1 rounds (PLAIN one, SCRAM two).

    :param wire: the connection (TLS for SASL_SSL).
    :param addr: the broker's address, for the messages.
    :param mechanism: one of :data:`MECHANISMS`.
    :param user: the SASL user.
    :param password: its password (never in a message).
    :raises ConfigError: the broker does not offer ``mechanism``, or refuses the user or password.
    :raises ProvstreamError: another refusal, or a SCRAM server that cannot prove it knows the password.
    """
    answer = _Fields(wire.request(_SASL_HANDSHAKE, 1, _string(mechanism)))
    code = answer.int16()
    if code == _UNSUPPORTED_SASL_MECHANISM:
        offered = ", ".join(answer.strings()) or "none"
        raise ConfigError(f"Kafka at {addr} does not offer the SASL mechanism {mechanism} (it offers {offered}; "
                          "check PROVSTREAM_KAFKA_SASL_MECHANISM)")
    if code:
        raise ProvstreamError(f"Kafka at {addr} refused the SASL handshake for {mechanism} (error code {code})")

    def authenticate(token: bytes) -> bytes:
        reply = _Fields(wire.request(_SASL_AUTHENTICATE, 1, struct.pack(">i", len(token)) + token))
        code, message, auth_bytes = reply.int16(), reply.string(), reply.blob() or b""
        if code == _SASL_AUTHENTICATION_FAILED:
            raise ConfigError(f"Kafka at {addr} refused the {mechanism} login of user {user!r}: wrong user or "
                              "password (check PROVSTREAM_KAFKA_USERNAME / PROVSTREAM_KAFKA_PASSWORD)")
        if code:
            raise ProvstreamError(f"Kafka at {addr} refused the {mechanism} login of user {user!r}: "
                                  f"{message or f'error code {code}'}")
        return auth_bytes

    if not mechanism.startswith("SCRAM-"):
        authenticate(f"\0{user}\0{password}".encode())
        return
    scram = _Scram(mechanism, user, password)
    if not scram.verify(authenticate(scram.final(authenticate(scram.first())))):
        raise ProvstreamError(f"Kafka at {addr} accepted the {mechanism} login of user {user!r} without proving "
                              "that it knows the password (check PROVSTREAM_KAFKA_BOOTSTRAP)")


def _start_tls(raw: socket.socket, context: ssl.SSLContext, host: str, addr: str) -> ssl.SSLSocket:
    """TLS on ``raw`` (its timeout bounds the handshake), verified against ``context``'s CAs.

    :raises ConfigError: an untrusted certificate, or no TLS from the other end.
    :raises TimeoutError: the handshake did not finish in time.
    """
    try:
        return context.wrap_socket(raw, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        raise ConfigError(f"Kafka at {addr} presented a certificate not signed by a trusted CA "
                          f"({exc.verify_message}; check PROVSTREAM_KAFKA_CA_FILE)") from exc
    except TimeoutError:
        raise
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"no TLS from Kafka at {addr} ({exc}): the listener may be plaintext "
                          "(check PROVSTREAM_KAFKA_SECURITY_PROTOCOL)") from exc


def check_kafka(settings: Settings, role: str, timeout_s: float = 10.0) -> None:
    """Fail fast, with one line naming the setting, when ``role`` cannot use Kafka as configured.

    Checks, in order, on one direct connection to the first bootstrap address:
    the broker answers; TLS verifies against the CA (or the broker speaks TLS to
    a plaintext client); the SASL login succeeds. Nothing is retried: a refused
    login is reported as soon as the broker answers it.

    :param settings: the client settings (first address of ``kafka_bootstrap``).
    :param role: the principal's role (:data:`ROLES`).
    :param timeout_s: the longest the whole check takes.
    :raises ConfigError: a certificate, protocol, mechanism or login problem (retrying will not help).
    :raises ProvstreamError: Kafka unreachable, too slow to answer within ``timeout_s``, or another failure.
    """
    options = kafka_python_options(settings, role)
    protocol = options["security_protocol"]
    host, _, port = settings.kafka_bootstrap.split(",")[0].strip().rpartition(":")
    addr = f"{host}:{port}"
    deadline = time.monotonic() + timeout_s
    try:
        raw = socket.create_connection((host, int(port)), timeout=min(timeout_s, 5.0))
    except (OSError, ValueError) as exc:
        raise ProvstreamError(f"cannot reach Kafka at {addr}: {exc} (check PROVSTREAM_KAFKA_BOOTSTRAP)") from exc
    step = "the TLS handshake" if protocol in ("SSL", "SASL_SSL") else "an ApiVersions request"
    try:
        with raw:
            raw.settimeout(max(deadline - time.monotonic(), 0.001))
            sock = _start_tls(raw, options["ssl_context"], host, addr) if step.startswith("the TLS") else raw
            with sock:
                wire = _Wire(sock, deadline, f"provstream-{role}-check")
                if sock is raw and not _plain_answers(wire):
                    raise ConfigError(f"Kafka at {addr} does not answer a {protocol} client: it probably requires "
                                      "TLS/SASL (check PROVSTREAM_KAFKA_SECURITY_PROTOCOL; PROVSTREAM_SECURE=1 for "
                                      "the secured local stack)")
                if protocol.startswith("SASL_"):
                    step = f"the {options['sasl_mechanism']} login"
                    _sasl_login(wire, addr, options["sasl_mechanism"], options["sasl_plain_username"],
                                options["sasl_plain_password"])
    except TimeoutError as exc:
        raise ProvstreamError(f"Kafka at {addr} did not complete {step} within {timeout_s:g} s (overloaded, or not "
                              "a Kafka broker? check PROVSTREAM_KAFKA_BOOTSTRAP)") from exc
    except (EOFError, ValueError, OSError) as exc:
        raise ProvstreamError(f"cannot use Kafka at {addr}: {step} failed: {exc} (check "
                              "PROVSTREAM_KAFKA_BOOTSTRAP / PROVSTREAM_KAFKA_SECURITY_PROTOCOL)") from exc
