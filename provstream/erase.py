"""``provstream erase``: remove a user's traces from Neo4j now and from every later replay (crypto-shredding).

Three steps, each idempotent (an interrupted erase is simply run again):

1. the keys topic: a tombstone for every data key of the scope
   (:mod:`provstream.keys`); once the log cleaner compacted it, the sealed
   fields of those sessions on every topic open as ``[erased]``, for ever;
2. Neo4j: the sessions' nodes are deleted (their orphaned object nodes too);
3. the triples topic: one retraction record per erased session
   (:func:`provstream.topics.retraction_record`), after the session's triples
   on its partition, so live consumers act on it (the sink deletes the nodes
   it may have rewritten meanwhile, follow forgets the keys), and one per
   OTLP trace whose key was tombstoned (session ``otlp-trace-<trace id>``:
   the receiver seals a trace's spans under one key, so its readers forget it).

With ``PROVSTREAM_ENCRYPT=0`` only steps 2 and 3 happen and a replay restores
the erased traces (the events topic holds them in clear): :class:`EraseReport`
says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka import KafkaProducer
from kafka.errors import KafkaError

from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core import vocab as v
from provstream.crypto import TRACE_SCOPE_PREFIX, scope_of
from provstream.errors import ConfigError, ProvstreamError
from provstream.keys import KafkaKeyStore
from provstream.security import check_kafka, kafka_python_options
from provstream.settings import Settings
from provstream.topics import retraction_record

ROLE = "admin"  # erasing writes the keys and triples topics and deletes from Neo4j: an operator's act


@dataclass
class EraseReport:
    """What an erase did: keys tombstoned, nodes deleted, sessions retracted."""

    keys: int = 0
    nodes: int = 0
    sessions: list[tuple[str, str, str]] = field(default_factory=list)
    encrypted: bool = True
    traces: list[tuple[str, str, str]] = field(default_factory=list)  # OTLP traces' key scopes (retracted too)

    def summary(self) -> str:
        """One line for the terminal.

        >>> EraseReport(2, 9, [("u", "c", "s1")]).summary()
        'erased 1 session(s): 2 data key(s) tombstoned, 9 Neo4j node(s) deleted, 1 retraction(s) sent'
        >>> EraseReport(2, 9, [("u", "c", "s1")], traces=[("u", "c", "otlp-trace-ab")]).summary()[:42]
        'erased 1 session(s) and 1 OTLP trace(s): 2'
        """
        traces = f" and {len(self.traces)} OTLP trace(s)" if self.traces else ""
        line = (f"erased {len(self.sessions)} session(s){traces}: {self.keys} data key(s) tombstoned, "
                f"{self.nodes} Neo4j node(s) deleted, {len(self.sessions) + len(self.traces)} retraction(s) sent")
        if not self.encrypted:
            line += " (PROVSTREAM_ENCRYPT=0: a replay would restore them from the events topic)"
        return line


def session_of(text: str) -> str:
    """The session id ``--session`` names: a question IRI or the bare id.

    >>> session_of("urn:trustgraph:agent:s1"), session_of("s1")
    ('s1', 's1')
    """
    parsed = v.parse_question_iri(text)
    if parsed is not None:
        return parsed[1]
    if v.valid_session_id(text):
        return text
    raise ConfigError(f"--session {text!r} is neither a question IRI (urn:trustgraph:agent:<id>, ...) "
                      "nor a session id")


def erase(settings: Settings, user: str, collection: str | None = None, session: str | None = None) -> EraseReport:
    """Erase ``user``'s sessions [of ``collection``] [only ``session``] everywhere provstream keeps them.

    :param settings: Kafka, Neo4j, the topics and ``encrypt``.
    :param user: whose traces (required: an erase is never unscoped).
    :param collection: one collection only (``None``: all of the user's).
    :param session: one session only (a session id; ``None``: all).
    :returns: the :class:`EraseReport`.
    :raises ProvstreamError: Kafka or Neo4j failed (run it again: every step is idempotent).

    Example: ``erase(Settings.from_env(), "alice", "default").summary()``.
    """
    if not user:
        raise ConfigError("erase needs a user (-U)")
    check_kafka(settings, ROLE)
    report = EraseReport(encrypted=bool(settings.encrypt))
    found: set[tuple[str, str, str]] = set()
    if settings.encrypt:
        keys = KafkaKeyStore(settings, ROLE)
        try:
            live: dict[str, bytes] = {}
            for kid, record in keys.read_new():
                if record is None:
                    live.pop(kid, None)
                else:
                    live[kid] = record
            for kid, record in sorted(live.items()):
                scope = scope_of(record)
                if scope.matches(user, collection, session):
                    keys.put(kid, None)
                    report.keys += 1
                    found.add((scope.user, scope.collection, scope.session))
        finally:
            keys.close()
    with Neo4jStore(settings) as store:
        report.nodes, sessions = store.erase(user=user, collection=collection, session=session)
    found.update(sessions)
    report.sessions = sorted(f for f in found if not f[2].startswith(TRACE_SCOPE_PREFIX))
    report.traces = sorted(f for f in found if f[2].startswith(TRACE_SCOPE_PREFIX))  # their readers forget the key
    _retract(settings, report.sessions + report.traces)
    return report


def _retract(settings: Settings, sessions: list[tuple[str, str, str]]) -> None:
    if not sessions:
        return
    try:
        producer = KafkaProducer(**kafka_python_options(settings, ROLE), acks="all", client_id="provstream-erase")
        try:
            futures = []
            for scope in sessions:
                key, value, headers = retraction_record(*scope)
                futures.append(producer.send(settings.triples_topic, key=key, value=value, headers=headers))
            producer.flush()
            for future in futures:
                future.get(timeout=30)
        finally:
            producer.close(timeout=10)
    except KafkaError as exc:
        raise ProvstreamError(f"cannot write the retractions to {settings.triples_topic}: {exc} "
                              "(the keys and nodes are erased; run the erase again)") from exc
