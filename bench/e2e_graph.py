"""What reached Neo4j: every planned step exactly once, and the graph equal to the fold of the events log.

* :func:`check` counts, for the planned sessions of one scope, the step nodes
  present and missing, nodes nobody planned, nodes per session, relationships
  merged more than once, conflicting values (``extraLiterals``: a second,
  different value of a single-valued predicate) and session statuses that are
  not ``complete`` with exactly the expected steps.
* :func:`log_triples` folds the events topic offline from its beginning (the
  source of truth) with the worker's pure fold; :func:`same_graph` compares it
  with the scope's triples read back from Neo4j (``rdflib.compare.isomorphic``).

The queries are constants with parameters, like the project's own.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, LiteralString

from e2e_workload import TRAJECTORIES as _TRAJECTORIES
from e2e_workload import Planned
from kafka import KafkaConsumer
from kafka.structs import TopicPartition
from neo4j import Driver, GraphDatabase
from rdflib.compare import isomorphic

from provstream import testing
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.connectors.replay import OfflineFold
from provstream.core.triples import Triple
from provstream.read.rdf import to_graph
from provstream.settings import Settings

STEP_NODES: Final[LiteralString] = """
MATCH (n:Resource {user: $user, collection: $collection}) WHERE n.types IS NOT NULL RETURN n.iri AS iri
"""
STEP_COUNT: Final[LiteralString] = """
MATCH (n:Resource {user: $user, collection: $collection}) WHERE n.types IS NOT NULL RETURN count(n) AS n
"""
NODES_PER_SESSION: Final[LiteralString] = """
MATCH (n:Resource {user: $user, collection: $collection}) RETURN n.session AS session, count(n) AS nodes
"""
DUPLICATE_RELATIONSHIPS: Final[LiteralString] = """
MATCH (n:Resource {user: $user, collection: $collection})-[r]->(o)
WITH n, type(r) AS t, coalesce(r.predicate, '') AS p, o, count(r) AS c WHERE c > 1
RETURN count(*) AS n
"""
CONFLICTS: Final[LiteralString] = """
MATCH (n:Resource {user: $user, collection: $collection}) WHERE n.extraLiterals IS NOT NULL RETURN count(n) AS n
"""
STATUSES: Final[LiteralString] = """
MATCH (q:Resource {user: $user, collection: $collection}) WHERE q.status IS NOT NULL
RETURN q.iri AS iri, q.status AS status, q.steps AS steps, q.expectedSteps AS expected, q.lateSteps AS late
"""
# The IRIs travel in a map ($watch.iris): a list parameter would be planned anew for every
# power of ten of its length (Neo4j's plan cache key), in the middle of the latency run.
ARRIVED: Final[LiteralString] = """
UNWIND $watch.iris AS iri MATCH (n:Resource {iri: iri}) WHERE n.types IS NOT NULL
RETURN n.iri AS iri, n.eventPartition AS ep, n.eventOffset AS eo, n.triplesPartition AS tp, n.triplesOffset AS to
"""


class Cypher:
    """A driver for read queries in the checks (opened with ``with``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._driver: Driver | None = None

    def __enter__(self) -> Cypher:
        self._driver = GraphDatabase.driver(self.settings.neo4j_uri, auth=self.settings.neo4j_auth,
                                            notifications_min_severity="OFF")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._driver is not None:
            self._driver.close()

    def rows(self, query: LiteralString, **params: Any) -> list[dict[str, Any]]:
        assert self._driver is not None
        records, _, _ = self._driver.execute_query(query, params, database_=self.settings.neo4j_database)
        return [r.data() for r in records]

    def value(self, query: LiteralString, **params: Any) -> Any:
        rows = self.rows(query, **params)
        return next(iter(rows[0].values())) if rows else None


def step_count(db: Cypher, user: str, collection: str) -> int:
    """Step nodes (nodes with an ``rdf:type``: one per step) in a scope."""
    return int(db.value(STEP_COUNT, user=user, collection=collection) or 0)


def wait_for_steps(db: Cypher, user: str, collection: str, count: int, timeout: float) -> float | None:
    """Seconds until the scope has at least ``count`` step nodes; ``None`` on timeout."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        try:
            if step_count(db, user, collection) >= count:
                return time.monotonic() - began
        except Exception:  # Neo4j restarting: keep polling
            pass
        time.sleep(0.25)
    return None


@dataclass(frozen=True)
class GraphReport:
    expected_steps: int
    steps_in_graph: int
    lost: tuple[str, ...]
    unexpected: tuple[str, ...]
    duplicate_relationships: int
    conflicting_values: int
    wrong_node_counts: tuple[str, ...]
    bad_status: tuple[str, ...]

    @property
    def duplicated(self) -> int:
        """Anything that shows a step written twice: repeated relationships, second values, over-counted sessions."""
        return self.duplicate_relationships + self.conflicting_values + len(self.bad_status)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.unexpected or self.duplicated or self.wrong_node_counts)

    def summary(self) -> str:
        return (f"{self.steps_in_graph}/{self.expected_steps} steps, lost {len(self.lost)} {list(self.lost[:5])}, "
                f"unexpected {len(self.unexpected)} {list(self.unexpected[:5])}, duplicate relationships "
                f"{self.duplicate_relationships}, conflicting values {self.conflicting_values}, wrong node counts "
                f"{list(self.wrong_node_counts[:5])}, bad status {list(self.bad_status[:5])}")


def check(db: Cypher, sessions: Sequence[Planned], user: str, collection: str) -> GraphReport:
    scope = {"user": user, "collection": collection}
    expected = {iri for p in sessions for iri in p.step_iris()}
    present = {r["iri"] for r in db.rows(STEP_NODES, **scope)}
    nodes = {r["session"]: r["nodes"] for r in db.rows(NODES_PER_SESSION, **scope)}
    wrong = tuple(p.session_id for p in sessions if nodes.get(p.session_id) != p.node_count())
    statuses = {r["iri"]: r for r in db.rows(STATUSES, **scope)}
    bad = tuple(p.question_iri for p in sessions if not _complete(statuses.get(p.question_iri), p))
    return GraphReport(
        expected_steps=len(expected), steps_in_graph=len(expected & present),
        lost=tuple(sorted(expected - present)), unexpected=tuple(sorted(present - expected)),
        duplicate_relationships=int(db.value(DUPLICATE_RELATIONSHIPS, **scope) or 0),
        conflicting_values=int(db.value(CONFLICTS, **scope) or 0),
        wrong_node_counts=wrong, bad_status=bad,
    )


def _complete(row: dict[str, Any] | None, p: Planned) -> bool:
    steps = len(p.step_iris())
    return row is not None and (row["status"], row["steps"], row["expected"], row["late"]) == (
        "complete", steps, steps, 0)


# -- the events log, folded offline ------------------------------------------------

def read_log(settings: Settings) -> list[bytes | None]:
    """Every record value of the events topic, from the beginning to the end offsets seen now."""
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, group_id=None, enable_auto_commit=False,
                             client_id="provstream-e2e-log", max_partition_fetch_bytes=4 * 1024 * 1024)
    try:
        parts = [TopicPartition(settings.events_topic, p)
                 for p in sorted(consumer.partitions_for_topic(settings.events_topic) or ())]
        ends = consumer.end_offsets(parts)
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        values: list[bytes | None] = []
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            for tp, records in consumer.poll(timeout_ms=500).items():
                values += [r.value for r in records if r.offset < ends[tp]]
        return values
    finally:
        consumer.close(autocommit=False)


def record_times(settings: Settings, topic: str, wanted: set[tuple[int, int]]) -> dict[tuple[int, int], float]:
    """The timestamps (s since the epoch) of the records of ``topic`` at ``wanted`` (partition, offset) pairs.

    A record's timestamp is its producer's create time (the topics keep the default
    ``message.timestamp.type``): for the events topic the emitter's send, for the
    triples topic the worker's.
    """
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, group_id=None, enable_auto_commit=False,
                             client_id="provstream-e2e-times", max_partition_fetch_bytes=4 * 1024 * 1024)
    try:
        spans: dict[int, tuple[int, int]] = {}
        for p, o in wanted:
            low, high = spans.get(p, (o, o))
            spans[p] = (min(low, o), max(high, o))
        parts = {p: TopicPartition(topic, p) for p in spans}
        consumer.assign(list(parts.values()))
        for p, (low, _) in spans.items():
            consumer.seek(parts[p], low)
        times: dict[tuple[int, int], float] = {}
        while any(consumer.position(parts[p]) <= high for p, (_, high) in spans.items()):
            for tp, records in consumer.poll(timeout_ms=500).items():
                times.update(((tp.partition, r.offset), r.timestamp / 1000) for r in records
                             if (tp.partition, r.offset) in wanted)
        return times
    finally:
        consumer.close(autocommit=False)


def log_triples(settings: Settings, user: str, collection: str) -> tuple[set[Triple], int]:
    """The triples the fold gives for the scope's events in the log, and the number of events read."""
    values = read_log(settings)
    folder, out = OfflineFold(), set()
    for value in values:
        msg = folder.add(value)
        if msg is not None and (msg.user, msg.collection) == (user, collection):
            out.update(msg.triples)
    return out, len(values)


def stored_triples(settings: Settings, user: str, collection: str) -> set[Triple]:
    with Neo4jStore(settings) as store:
        return store.scope_triples(user=user, collection=collection)


@dataclass(frozen=True)
class Comparison:
    isomorphic: bool
    missing: tuple[str, ...]
    extra: tuple[str, ...]


def same_graph(stored: Iterable[Triple], expected: Iterable[Triple]) -> Comparison:
    stored, expected = set(stored), set(expected)
    return Comparison(
        isomorphic(to_graph(stored), to_graph(expected)),
        tuple(sorted(str(t) for t in expected - stored))[:10],
        tuple(sorted(str(t) for t in stored - expected))[:10],
    )


def warm_up(settings: Settings, sessions: int = 6000, collection: str = "warm-up") -> float:
    """Write (then delete) folded sessions straight into Neo4j so its query plans are compiled; seconds taken.

    A freshly started Neo4j runs the sink's first batches many times slower
    than later ones (interpreted Cypher and JVM code until the JIT compiled
    them); without this the first case would measure that. 600 sessions
    (16k triples) were not enough: the first 20 s run after it still cost
    Neo4j 189 µs CPU per event against 89 on a warm server.
    """
    began = time.monotonic()
    records = testing.load_trajectories(_TRAJECTORIES)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    events = [e for s in testing.sessions(records, "warm-up", start, sessions, settings.user, collection)
              for e in s]
    messages = testing.fold_all(events)
    with Neo4jStore(settings) as store:
        store.setup()
        for i in range(0, len(messages), settings.sink_batch_size):
            store.write(messages[i:i + settings.sink_batch_size])
        store.reset_graph(user=settings.user, collection=collection)
    return time.monotonic() - began
