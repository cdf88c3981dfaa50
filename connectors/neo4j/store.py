"""The Neo4j adapter: writes the retrieval graph and reads it back as triples.

The model is docs/neo4j-model.md. Row building (:mod:`.rows`) and triple
rebuilding (:mod:`.rebuild`) are pure; this module only runs the constant
statements of :mod:`.cypher` with parameters. Driver exceptions never
leave it: unavailability becomes :class:`StoreUnavailable` (retryable),
everything else :class:`StoreError`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, LiteralString

from neo4j import ManagedTransaction
from neo4j.exceptions import (
    ClientError,
)

from provstream.connectors.neo4j import cypher as q
from provstream.connectors.neo4j.driver import DriverOwner, translated
from provstream.connectors.neo4j.rebuild import node_triples
from provstream.connectors.neo4j.rows import Origin, batch_rows, batch_rows_at, procedure_batch
from provstream.core import vocab as v
from provstream.core.triples import StepTriples, Triple
from provstream.errors import StoreError, TraceNotFound
from provstream.settings import Settings

log = logging.getLogger(__name__)

DELETE_BATCH = 10_000
_RETRY_SECONDS = 5.0  # the driver's own retries of a managed transaction; callers back off beyond that
_ALREADY_EXISTS = "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists"
_UNAUTHORIZED = "Neo.ClientError.Security.Unauthorized"


class Neo4jStore(DriverOwner):
    """The retrieval graph in Neo4j. No I/O until :meth:`open` (or ``with``)."""

    driver_options = {"max_transaction_retry_time": _RETRY_SECONDS}

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._statement: LiteralString | None = None

    # -- schema -----------------------------------------------------------------

    def setup(self) -> None:
        """Create the uniqueness constraint and indexes if missing (safe to repeat, also concurrently)."""
        with translated("creating the constraint and indexes", self._settings), self._session() as session:
            for statement in q.SCHEMA:
                try:
                    session.run(statement).consume()
                except ClientError as exc:
                    if exc.code != _ALREADY_EXISTS:  # another process created it a moment ago
                        raise
            session.run(q.AWAIT_INDEXES).consume()

    def count_nodes(self) -> int:
        """How many nodes the database holds (any label, any graph)."""
        with translated("counting the nodes", self._settings), self._session() as session:
            record = session.execute_read(_single, q.COUNT_NODES)
            return int(record["nodes"]) if record else 0

    def set_empty_lists(self, statement: LiteralString) -> int:
        """Run a constant ``... SET n.<list> = [] ... RETURN count(n) AS set`` statement (after a bulk import).

        It runs in an implicit transaction (its ``CALL { } IN TRANSACTIONS`` commits as it goes).

        :param statement: e.g. :data:`.cypher.SET_EMPTY_MISSING_STEPS`.
        :returns: how many nodes it set the list on.

        Example: ``store.set_empty_lists(q.SET_EMPTY_MISSING_STEPS)`` is ``len(plan.empty_lists["missingSteps"])``.
        """
        with translated("setting empty lists", self._settings), self._session() as session:
            record = session.run(statement).single()
            return int(record["set"]) if record else 0

    def warm(self, connections: int = 1) -> None:
        """Open ``connections`` pooled connections at once and run the write statement, with no rows, on each.

        A sink calls this before it reports ready, so that its first batches (one transaction per
        lane) start on open, authenticated connections with the statement already planned, instead
        of each paying a Bolt log-in and the server's first planning while steps wait.

        :param connections: how many transactions will run in parallel (the sink's lanes).
        :raises StoreUnavailable: Neo4j cannot be reached.

        Example: ``store.warm(settings.sink_writers)``.
        """
        together = threading.Barrier(connections, timeout=_RETRY_SECONDS)

        def one() -> None:
            with self._session() as session:
                session.execute_write(_warm, statement, together)

        statement = self.write_statement
        with translated("opening the write connections", self._settings), \
                ThreadPoolExecutor(connections, thread_name_prefix="provstream-warm") as pool:
            for done in [pool.submit(one) for _ in range(connections)]:
                done.result()

    # -- write ------------------------------------------------------------------

    @property
    def write_statement(self) -> LiteralString:
        """What :meth:`write` runs: :data:`.cypher.WRITE_BATCH_PROCEDURE` or :data:`.cypher.WRITE_BATCH_QUERY`.

        Chosen once, on first use, by ``PROVSTREAM_NEO4J_PROCEDURE``: ``auto`` calls the
        procedure when the server has ``provstream.writeBatch`` of this code's contract and
        runs the Cypher statement otherwise, ``on`` requires the procedure, ``off`` never uses
        it. Both give the same graph. Setting it overrides the choice (a benchmark's variant).

        :returns: the statement, which takes ``$batch``: ``{"rows": [...]}`` of :func:`.rows.write_rows`
            for the Cypher statement, :func:`.rows.procedure_batch` of them for the procedure.
        :raises StoreError: ``on`` and the server has no procedure of this contract.
        :raises StoreUnavailable: Neo4j cannot be reached.

        Example: ``store.write_statement == q.WRITE_BATCH_PROCEDURE`` on the stack ``make up`` starts.
        """
        if self._statement is None:
            self._statement = self._choose_statement()
        return self._statement

    @write_statement.setter
    def write_statement(self, statement: LiteralString) -> None:
        self._statement = statement

    def _choose_statement(self) -> LiteralString:
        mode = self._settings.neo4j_procedure
        if mode == "off":
            return q.WRITE_BATCH_QUERY
        try:
            with translated(f"looking for the procedure {q.PROCEDURE_NAME}", self._settings), \
                    self._session() as session:
                record = session.execute_read(_single, q.FIND_PROCEDURE, name=q.PROCEDURE_NAME)
        except StoreError as exc:
            refused = exc.__cause__
            if (mode == "on" or not isinstance(refused, ClientError)
                    or (refused.code or "").startswith(_UNAUTHORIZED)):
                raise
            # a server that cannot list procedures for this user (no privilege, an older Cypher)
            log.warning("cannot look for %s (%s): writing with the Cypher statement", q.PROCEDURE_NAME, refused)
            return q.WRITE_BATCH_QUERY
        description = str(record["description"] or "") if record else None
        if description is not None and q.PROCEDURE_CONTRACT in description:
            log.info("writing through the procedure %s", q.PROCEDURE_NAME)
            return q.WRITE_BATCH_PROCEDURE
        found = ("is not installed" if description is None
                 else f"is not of this code's {q.PROCEDURE_CONTRACT} ({description!r})")
        if mode == "on":
            raise StoreError(f"PROVSTREAM_NEO4J_PROCEDURE=on, but {q.PROCEDURE_NAME} {found} on "
                             f"{self._settings.neo4j_uri} (deploy/neo4j.sh installs it: docs/neo4j-model.md)")
        log.info("%s %s: writing with the Cypher statement", q.PROCEDURE_NAME, found)
        return q.WRITE_BATCH_QUERY

    def write(self, batch: Sequence[StepTriples], lineage: Iterable[Mapping[str, Any]] = (), *,
              origins: Sequence[Origin] | None = None) -> int:
        """Write a batch, with its offset lineage, in one managed transaction of one statement.

        :param batch: the triples messages (any order gives the same graph).
        :param lineage: :func:`.rows.lineage_rows` of its messages, in batch order: records on
            each node where it came from (of each offset the first value written is kept).
        :param origins: instead of ``lineage``, each message's ``(event, triples)`` origin
            (:func:`.rows.lineage_at` of them is the lineage; the C rows never make it).
        :returns: the number of rows of :func:`.rows.build_rows` written (0: nothing to write);
            the rows sent are those :func:`.rows.batch_rows` gives.

        Example: ``store.write([msg], lineage_rows(msg, (0, 41), (0, 40)))``, or the same as
        ``store.write([msg], origins=[((0, 41), (0, 40))])``.
        """
        count, rows = batch_rows(batch, lineage) if origins is None else batch_rows_at(batch, origins)
        if count == 0:
            return 0
        statement = self.write_statement
        params = procedure_batch(rows) if statement == q.WRITE_BATCH_PROCEDURE else {"rows": rows}
        with translated(f"writing {len(batch)} triples messages", self._settings), self._session() as session:
            session.execute_write(_write_batch, statement, params)
        return count

    def lineage(self, question_iri: str, *, user: str, collection: str) -> dict[str, dict[str, int | None]]:
        """The recorded lineage of every node of the trace, by IRI (nodes without any are left out)."""
        with translated(f"reading the lineage of {question_iri}"), self._session() as session:
            found = session.execute_read(_single, q.FIND_QUESTION, iri=question_iri, user=user,
                                         collection=collection, graph=v.GRAPH)
            if found is None or found["session"] is None:
                raise TraceNotFound(f"no trace {question_iri} for user {user!r} in collection {collection!r}")
            records = session.execute_read(
                lambda tx: [r.data() for r in tx.run(q.SESSION_LINEAGE, session=found["session"],
                                                     mechanism=found["mechanism"], user=user,
                                                     collection=collection, graph=v.GRAPH)])
        return {r.pop("iri"): r for r in records}

    # -- read -------------------------------------------------------------------

    def trace_triples(self, question_iri: str, *, user: str, collection: str) -> set[Triple]:
        """Every triple of the session whose Question is ``question_iri``, in that scope."""
        with translated(f"reading trace {question_iri}", self._settings), self._session() as session:
            found = session.execute_read(_single, q.FIND_QUESTION, iri=question_iri, user=user,
                                         collection=collection, graph=v.GRAPH)
            if found is None or found["session"] is None:
                raise TraceNotFound(f"no trace {question_iri} for user {user!r} in collection {collection!r}")
            return session.execute_read(_triples, q.SESSION_NODES, session=found["session"],
                                        mechanism=found["mechanism"], user=user, collection=collection,
                                        graph=v.GRAPH)

    def scope_triples(self, *, user: str, collection: str) -> set[Triple]:
        """Every triple of every trace of ``user`` in ``collection``."""
        with translated(f"reading user {user!r} collection {collection!r}", self._settings), self._session() as session:
            return session.execute_read(_triples, q.SCOPE_NODES, user=user, collection=collection, graph=v.GRAPH)

    # -- delete -----------------------------------------------------------------

    def reset_graph(self, *, user: str | None = None, collection: str | None = None) -> int:
        """Delete the retrieval graph (all of it, or one user and/or collection); return nodes deleted.

        Deletes in batches of :data:`DELETE_BATCH` nodes, one transaction each.
        A scoped reset also removes nodes that were only ever referenced as
        objects and have nothing left pointing at them.
        """
        if user is None and collection is None:
            return self._delete_batches(q.DELETE_ALL_BATCH)
        deleted = self._delete_batches(q.DELETE_SCOPE_BATCH, user=user, collection=collection)
        return deleted + self._delete_batches(q.DELETE_ORPHANS_BATCH)

    def erase(self, *, user: str, collection: str | None = None, session: str | None = None
              ) -> tuple[int, list[tuple[str, str, str]]]:
        """Delete the nodes of a user's sessions (``provstream erase``); return (nodes deleted, sessions).

        :param user: whose sessions.
        :param collection: only this collection's (``None``: every collection).
        :param session: only this session (``None``: every session).
        :returns: how many nodes were deleted (with the orphans left behind) and the
            (user, collection, session) of each session found.

        Example: ``store.erase(user="alice", collection="default")``.
        """
        params = {"user": user, "collection": collection, "session": session}
        with translated("finding the sessions to erase"), self._session() as s:
            found = s.execute_read(lambda tx: [(r["user"], r["collection"], r["session"]) for r in tx.run(
                q.ERASE_SESSIONS, graph=v.GRAPH, **params)])
        deleted = self._delete_batches(q.ERASE_BATCH, **params)
        return deleted + self._delete_batches(q.DELETE_ORPHANS_BATCH), sorted(found)

    def _delete_batches(self, statement: LiteralString, **params: Any) -> int:
        total = 0
        with translated("deleting the retrieval graph", self._settings), self._session() as session:
            while True:
                record = session.execute_write(_single, statement, graph=v.GRAPH, limit=DELETE_BATCH, **params)
                deleted = int(record["deleted"]) if record else 0
                total += deleted
                if deleted < DELETE_BATCH:
                    return total

    def _session(self) -> Any:
        if self._driver is None:
            raise StoreError("Neo4jStore is not open: call open() or use it as a context manager")
        return self._driver.session(database=self._settings.neo4j_database)


# -- transaction functions ------------------------------------------------------
# The driver may run these more than once (it retries transient failures), so
# each must be idempotent: they only MERGE, SET to values from the batch, read,
# or delete what matches.

def _warm(tx: ManagedTransaction, statement: LiteralString, together: threading.Barrier) -> None:
    tx.run(statement, batch={"rows": []}).consume()
    try:
        together.wait()  # every connection held at once, so the pool opens one per lane
    except threading.BrokenBarrierError:
        pass  # fewer connections than lanes (a small pool, a retry): warming is best effort


def _write_batch(tx: ManagedTransaction, statement: LiteralString, batch: dict[str, list[Any]]) -> None:
    quiet = {name: QuietRows(values) for name, values in batch.items()}
    try:
        tx.run(statement, batch=quiet).consume()
    finally:
        # The driver keeps a query's parameters in a reference cycle (its result and summary), so
        # without this the batch's rows, tens of thousands of dicts and lists, outlived the
        # transaction until the cyclic collector found them: a fifth of the sink's CPU went to
        # collections walking them (BENCHMARKS.md). A retry runs this again on ``batch``.
        for values in quiet.values():
            values.clear()


class QuietRows(list[Any]):
    """A batch's rows (or another of its lists) as a query parameter, with a short ``repr``.

    The driver formats its ``C: RUN`` debug line, the ``repr`` of every
    parameter, before the logger checks its level: for a batch of thousands
    of rows that text cost more than packing them (BENCHMARKS.md). The packer
    sends a list subclass as a plain list.

    >>> QuietRows([{"iri": "urn:x"}] * 2000)
    <2000 rows>
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<{len(self)} rows>"


def _single(tx: ManagedTransaction, statement: LiteralString, **params: Any) -> Any:
    return tx.run(statement, **params).single()


def _triples(tx: ManagedTransaction, statement: LiteralString, **params: Any) -> set[Triple]:
    out: set[Triple] = set()
    for record in tx.run(statement, **params):
        out.update(node_triples(record["props"], record["rels"]))
    return out

