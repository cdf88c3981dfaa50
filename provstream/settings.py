"""The one settings object, read from ``PROVSTREAM_*`` environment variables.

Library code receives a :class:`Settings`; only the CLI edge calls
:meth:`Settings.from_env`. The Neo4j password comes from
``PROVSTREAM_NEO4J_PASSWORD`` or, failing that, from the secret file the stack
wrote on first start (``<stack dir>/secrets/neo4j-password``); it is never
printed.

Client addresses follow the server ports: when ``PROVSTREAM_KAFKA_BOOTSTRAP``
is not set but ``PROVSTREAM_KAFKA_PORT`` (the port ``deploy/kafka.sh`` starts
Kafka on) is, the bootstrap is ``127.0.0.1:<that port>`` (with
``PROVSTREAM_KAFKA_BROKERS=N``, the N brokers' ports: +0, +2, +4 ...); likewise
``PROVSTREAM_NEO4J_URI`` from ``PROVSTREAM_NEO4J_BOLT_PORT`` and
``PROVSTREAM_NEO4J_HTTP`` from ``PROVSTREAM_NEO4J_HTTP_PORT``. So one
variable per endpoint is enough for a stack on private ports.

Security (docs/security.md): ``PROVSTREAM_KAFKA_SECURITY_PROTOCOL``
(``PLAINTEXT``, ``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``),
``PROVSTREAM_KAFKA_SASL_MECHANISM`` (``SCRAM-SHA-512``, ``PLAIN``),
``PROVSTREAM_KAFKA_USERNAME`` / ``_PASSWORD`` (or ``_PASSWORD_FILE``),
``PROVSTREAM_KAFKA_CA_FILE`` and ``PROVSTREAM_NEO4J_CA_FILE``. With
``PROVSTREAM_SECURE=1`` the defaults come from the secured local stack
(``SASL_SSL``, its CA, ``bolt+s://``, each role's password from
``<stack dir>/secrets/kafka/``); :mod:`provstream.security` turns them into
each client library's options.

Erase (docs/security.md): ``PROVSTREAM_ENCRYPT=1`` seals the personal text
fields under per-session data keys kept in ``PROVSTREAM_KEYS_TOPIC``, wrapped
by the master key in ``PROVSTREAM_MASTER_KEY_FILE`` (default
``<stack dir>/secrets/master-key``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from provstream.errors import ConfigError

_REPO = Path(__file__).resolve().parent.parent


def _default_stack_dir() -> Path:
    return _REPO / ".stack"


@dataclass(frozen=True)
class Settings:
    kafka_bootstrap: str = "127.0.0.1:9092"
    events_topic: str = "provstream.events"
    triples_topic: str = "provstream.triples"
    events_dlq_topic: str = "provstream.events.dlq"
    triples_dlq_topic: str = "provstream.triples.dlq"
    partitions: int = 4
    worker_app_id: str = "provstream-fold"
    worker_fold_process: int = 0  # 0: the worker folds in its own process, 1: in a helper process
    session_retention_s: int = 7 * 24 * 3600  # the worker forgets a session unchanged this long; 0: never
    sink_group: str = "provstream-sink"
    neo4j_uri: str = "bolt://127.0.0.1:7687"
    neo4j_user: str = "neo4j"
    neo4j_password: str = field(default="", repr=False)
    neo4j_database: str = "neo4j"
    neo4j_http: str = "http://127.0.0.1:7474"
    stack_dir: Path = field(default_factory=_default_stack_dir)
    user: str = "trustgraph"
    collection: str = "default"
    sink_batch_size: int = 2000
    sink_batch_ms: int = 100
    sink_linger_ms: int = 0  # a batch waits this long after its first record for more, once Neo4j is free; 0: none
    sink_writers: int = 2  # parallel Neo4j transactions per sink batch (parts that share no node)
    neo4j_procedure: str = "auto"  # the write: auto (provstream.writeBatch if the server has it), on, off (Cypher)
    bulk_processes: int = 0  # bulk rebuild: processes reading and folding the partitions; 0: one per core
    gc_gen0: int = 100_000  # worker/sink/otlp/replay: allocations between young collections; 0: Python's 700
    emit_buffer: int = 100_000
    emit_block_ms: int = 10_000
    emit_close_ms: int = 15_000  # the longest close() (and the flush at interpreter exit) waits for Kafka
    max_message_bytes: int = 1_000_000
    invoke_wait_ms: int = 60_000  # the longest tg-invoke-agent waits for its trace to be queryable in Neo4j
    # -- Kafka cluster (deploy/kafka.sh starts kafka_brokers brokers; docs: deploy/README.md "Past one machine")
    kafka_brokers: int = 1  # unset: the count of the stack's last `up` (<stack dir>/conf/kafka/brokers), else 1
    kafka_replication_factor: int = 0  # of every topic provstream or Faust creates; 0: min(kafka_brokers, 3)
    kafka_min_insync_replicas: int = 0  # 0: replication factor - 1, at least 1 (RF 3 -> 2)
    workers: int = 1  # `provstream stack up` runs this many worker processes (one consumer group) ...
    sinks: int = 1  # ... and this many sinks (one consumer group); partitions bound the useful count
    llm_url: str = ""
    llm_model: str = ""
    llm_api_key: str = field(default="", repr=False)
    otlp_spans_topic: str = "provstream.otlp_spans"  # OTLP ExportTraceServiceRequest per message, keyed by trace id
    otlp_spans_dlq_topic: str = "provstream.otlp_spans.dlq"
    otlp_host: str = "127.0.0.1"
    otlp_grpc_port: int = 4317
    otlp_http_port: int = 4318
    otlp_settle_ms: int = 3000  # a trace whose spans came out of order is translated after this long without a span
    secure: int = 0  # 1: the secured local stack: SASL_SSL, its CA and each role's credentials from its secrets
    kafka_security_protocol: str = "PLAINTEXT"  # PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL
    kafka_sasl_mechanism: str = "SCRAM-SHA-512"  # or PLAIN
    kafka_username: str = ""  # empty with PROVSTREAM_SECURE=1: the role's user of the local stack
    kafka_password: str = field(default="", repr=False)
    kafka_password_file: str = ""  # the password read from this file (first line) when none is given
    kafka_ca_file: str = ""  # PEM CA bundle that signed the brokers' certificates; empty: the system's
    neo4j_ca_file: str = ""  # PEM CA for bolt+s:// / neo4j+s://; empty: the system's
    encrypt: int = 0  # 1: personal text fields travel on Kafka only sealed (AES-GCM), erasable (docs/security.md)
    keys_topic: str = "provstream.keys"  # the compacted topic of the wrapped data keys (with encrypt=1)
    master_key_file: str = ""  # the master key wrapping the data keys; empty: <stack dir>/secrets/master-key
    keys_compaction_ms: int = 3_600_000  # the keys topic's segment.ms and max.compaction.lag.ms: an erased key
    # is gone from its log files within about twice this

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """The settings of ``environ`` (default ``os.environ``), then ``overrides``.

        :param environ: the variables to read (``PROVSTREAM_<FIELD>``; empty means unset).
        :param overrides: field values that win over the environment.
        :returns: the settings, with the stack's stored Neo4j password if none was given.
        :raises ConfigError: a malformed value, naming its variable.

        Example: ``Settings.from_env({"PROVSTREAM_KAFKA_PORT": "19092"}).kafka_bootstrap``
        is ``"127.0.0.1:19092"``.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            raw = env.get("PROVSTREAM_" + f.name.upper())
            if raw is not None and raw != "":
                values[f.name] = _convert(f.name, f.type, raw)
        secure = values.get("secure", overrides.get("secure", 0)) == 1
        if "kafka_brokers" not in values:
            stored = _stored_brokers(values.get("stack_dir", _default_stack_dir()))
            if stored > 1:
                values["kafka_brokers"] = stored
        for name, port_var, form in _FROM_PORTS:
            port = env.get(port_var, "")
            if name not in values and port != "":
                values[name] = form.format(_port(port_var, port))
        if "kafka_bootstrap" not in values:  # the local stack's brokers, from deploy/kafka.sh's port variable
            port, brokers = env.get("PROVSTREAM_KAFKA_PORT", ""), values.get("kafka_brokers", 1)
            if port != "" or brokers > 1:
                first = _port("PROVSTREAM_KAFKA_PORT", port) if port != "" else 9092
                values["kafka_bootstrap"] = cluster_bootstrap(first, brokers)
        if secure:
            values = _secure_defaults(values, explicit={k for k in values if env.get('PROVSTREAM_' + k.upper())})
        settings = replace(cls(**values), **overrides)
        settings.check()
        return settings.with_stack_secret()

    def check(self) -> None:
        """Refuse values no client could use, naming the variable to fix.

        :raises ConfigError: ``neo4j_uri`` is not a Bolt URI (``bolt://``,
            ``neo4j://`` and their ``+s`` / ``+ssc`` forms), ``neo4j_http`` not
            an ``http(s)://`` URL, a count (workers, sinks, sink writers, brokers, replication)
            out of range.

        Example: ``Settings(neo4j_uri="http://127.0.0.1:7474").check()`` raises
        ``ConfigError("PROVSTREAM_NEO4J_URI must be a Bolt URI ...")``.
        """
        scheme, sep, rest = self.neo4j_uri.partition("://")
        if not sep or scheme not in NEO4J_SCHEMES or not rest:
            hint = " (an HTTP address is Neo4j Browser's, PROVSTREAM_NEO4J_HTTP; the clients speak Bolt)" \
                if scheme in ("http", "https") else ""
            raise ConfigError(
                f"PROVSTREAM_NEO4J_URI must be a Bolt URI such as bolt://127.0.0.1:7687 "
                f"({', '.join(s + '://' for s in NEO4J_SCHEMES)}), got {self.neo4j_uri!r}{hint}")
        scheme, sep, rest = self.neo4j_http.partition("://")
        if not sep or scheme not in ("http", "https") or not rest:
            raise ConfigError(f"PROVSTREAM_NEO4J_HTTP must be an http:// or https:// URL such as "
                              f"http://127.0.0.1:7474, got {self.neo4j_http!r}")
        for name, value in (("PROVSTREAM_WORKERS", self.workers), ("PROVSTREAM_SINKS", self.sinks),
                            ("PROVSTREAM_SINK_WRITERS", self.sink_writers)):
            if value < 1:
                raise ConfigError(f"{name} must be at least 1, got {value}")
        if self.neo4j_procedure not in NEO4J_PROCEDURE_MODES:
            raise ConfigError(f"PROVSTREAM_NEO4J_PROCEDURE must be one of {', '.join(NEO4J_PROCEDURE_MODES)}, "
                              f"got {self.neo4j_procedure!r}")
        if not 0 <= self.sink_linger_ms <= self.sink_batch_ms:
            raise ConfigError(f"PROVSTREAM_SINK_LINGER_MS must be 0 to PROVSTREAM_SINK_BATCH_MS "
                              f"({self.sink_batch_ms}), got {self.sink_linger_ms}")
        if self.gc_gen0 < 0:
            raise ConfigError(f"PROVSTREAM_GC_GEN0 must be 0 (Python's default) or more, got {self.gc_gen0}")
        if self.bulk_processes < 0:
            raise ConfigError(f"PROVSTREAM_BULK_PROCESSES must be 0 (one per core) or more, got {self.bulk_processes}")
        if self.kafka_brokers < 1:
            raise ConfigError(f"PROVSTREAM_KAFKA_BROKERS must be at least 1, got {self.kafka_brokers}")
        if self.kafka_replication_factor < 0:
            raise ConfigError("PROVSTREAM_KAFKA_REPLICATION_FACTOR must be 0 (derived) or more, "
                              f"got {self.kafka_replication_factor}")
        if not 0 <= self.kafka_min_insync_replicas <= self.replication_factor:
            raise ConfigError(f"PROVSTREAM_KAFKA_MIN_INSYNC_REPLICAS must be 0 (derived) to the replication factor "
                              f"{self.replication_factor}, got {self.kafka_min_insync_replicas}")

    @property
    def replication_factor(self) -> int:
        """The topics' replication factor: the setting, else min(brokers, 3) (deploy/kafka.sh derives the same)."""
        return self.kafka_replication_factor or min(self.kafka_brokers, 3)

    @property
    def min_insync_replicas(self) -> int:
        """The topics' ``min.insync.replicas``: the setting, else the replication factor - 1, at least 1."""
        return self.kafka_min_insync_replicas or max(1, self.replication_factor - 1)

    def with_stack_secret(self) -> Settings:
        """These settings, with the password the stack stored if none was given."""
        if self.neo4j_password:
            return self
        return replace(self, neo4j_password=_read_secret(self.stack_dir))

    @property
    def neo4j_auth(self) -> tuple[str, str]:
        if not self.neo4j_password:
            raise ConfigError(
                "no Neo4j password: set PROVSTREAM_NEO4J_PASSWORD or start the stack (make up) "
                f"so that {self.stack_dir / 'secrets' / 'neo4j-password'} exists"
            )
        return (self.neo4j_user, self.neo4j_password)

    @property
    def master_key_path(self) -> Path:
        """The file holding the master key (``PROVSTREAM_MASTER_KEY_FILE``, else the stack's secret)."""
        return Path(self.master_key_file) if self.master_key_file else self.stack_dir / "secrets" / "master-key"


def _convert(name: str, type_name: Any, raw: str) -> Any:
    kind = str(type_name)
    try:
        if kind == "int":
            return int(raw)
        if kind == "Path":
            return Path(raw)
    except ValueError as exc:
        raise ConfigError(f"PROVSTREAM_{name.upper()} must be an integer, got {raw!r}") from exc
    return raw


NEO4J_SCHEMES = ("bolt", "bolt+s", "bolt+ssc", "neo4j", "neo4j+s", "neo4j+ssc")
"""The URI schemes of the Neo4j driver's Bolt protocol (``PROVSTREAM_NEO4J_URI``)."""

NEO4J_PROCEDURE_MODES = ("auto", "on", "off")
"""``PROVSTREAM_NEO4J_PROCEDURE``: write through ``provstream.writeBatch`` if the server has it, always, never."""

# client address <- the server port variable of deploy/*.sh, when the address is not given
_FROM_PORTS = (
    ("neo4j_uri", "PROVSTREAM_NEO4J_BOLT_PORT", "bolt://127.0.0.1:{}"),
    ("neo4j_http", "PROVSTREAM_NEO4J_HTTP_PORT", "http://127.0.0.1:{}"),
)


def cluster_bootstrap(first_port: int, brokers: int) -> str:
    """The bootstrap list of a local stack of ``brokers`` brokers (deploy/kafka.sh: broker i on port + 2(i-1)).

    >>> cluster_bootstrap(9092, 3)
    '127.0.0.1:9092,127.0.0.1:9094,127.0.0.1:9096'
    """
    return ",".join(f"127.0.0.1:{first_port + 2 * i}" for i in range(brokers))


def _stored_brokers(stack_dir: Path) -> int:
    try:
        return int((Path(stack_dir) / "conf" / "kafka" / "brokers").read_text().strip())
    except (OSError, ValueError):
        return 1


def _port(name: str, raw: str) -> int:
    if raw.isdigit() and 0 < int(raw) < 65536:
        return int(raw)
    raise ConfigError(f"{name} must be a port number (1-65535), got {raw!r}")


def _secure_defaults(values: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
    """PROVSTREAM_SECURE=1: what the secured local stack (deploy/*.sh) needs, where not set explicitly."""
    stack_dir = Path(values.get("stack_dir") or _default_stack_dir())
    tls = stack_dir / "secrets" / "tls"
    values.setdefault("kafka_security_protocol", "SASL_SSL")
    values.setdefault("kafka_ca_file", str(tls / "ca.pem"))
    values.setdefault("neo4j_ca_file", str(tls / "ca.pem"))
    uri = values.get("neo4j_uri", Settings.neo4j_uri)
    if uri.startswith("bolt://") and "neo4j_uri" not in explicit:
        values["neo4j_uri"] = "bolt+s://" + uri.removeprefix("bolt://")
    http = values.get("neo4j_http", Settings.neo4j_http)
    if http.startswith("http://") and "neo4j_http" not in explicit:
        values["neo4j_http"] = "https://" + http.removeprefix("http://")
    return values


def _read_secret(stack_dir: Path) -> str:
    path = stack_dir / "secrets" / "neo4j-password"
    try:
        return path.read_text().strip()
    except OSError:
        return ""
