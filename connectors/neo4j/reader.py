"""Neo4j adapter of the read side: the listing, a session's status, sub-trace links.

Runs only the constant queries of :mod:`.cypher`. Driver
errors are translated at this boundary (unavailable -> :class:`StoreUnavailable`,
anything else -> :class:`StoreError`); no I/O before :meth:`TraceReader.open`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, LiteralString

from neo4j import RoutingControl

from provstream.connectors.neo4j import cypher as q
from provstream.connectors.neo4j.driver import DriverOwner, translated
from provstream.core import vocab as v
from provstream.errors import StoreError
from provstream.read.listing import TraceRow, row_from_record
from provstream.read.model import UNKNOWN, Completeness


class TraceReader(DriverOwner):
    """Read-only queries over the retrieval graph in Neo4j."""

    def list_traces(self, *, user: str, collection: str, limit: int, status: str | None = None,
                    mechanism: v.Mechanism | None = None, since: datetime | None = None) -> list[TraceRow]:
        """Top-level sessions of the scope, newest first, sub-traces nested.

        :param status: only traces with this status (``complete``, ``open``, ``incomplete``).
        :param mechanism: only traces of this type; GraphRAG/DocRAG sub-traces are then listed on their own too.
        :param since: only traces started at or after this (aware) moment.
        :returns: the rows, at most ``limit``.
        """
        records = self._read("listing traces", q.LIST_TRACES, user=user, collection=collection, limit=limit,
                             status=status, mechanism=None if mechanism is None else mechanism.value,
                             since=None if since is None else since.isoformat())
        return [row_from_record(r) for r in records]

    def completeness(self, question_iri: str, *, user: str, collection: str) -> Completeness:
        records = self._read(f"reading the status of {question_iri}", q.QUESTION_STATUS, iri=question_iri,
                             user=user, collection=collection)
        if not records:
            return Completeness()
        r = records[0]
        return Completeness(r["status"] or UNKNOWN, r["steps"], r["expected"], r["late"] or 0,
                            tuple(r["missing"] or ()))

    def subtrace_question(self, synthesis_iri: str, *, user: str, collection: str) -> str | None:
        """The Question IRI of the session whose Synthesis is ``synthesis_iri`` (same scope), if recorded."""
        records = self._read(f"following the sub-trace {synthesis_iri}", q.SUBTRACE_QUESTION, iri=synthesis_iri,
                             user=user, collection=collection)
        return str(records[0]["iri"]) if records else None

    def unfinished(self, *, user: str, collection: str) -> list[dict[str, Any]]:
        """Every session of the scope still open or concluded with missing steps (``provstream check``).

        :returns: one record per Question: ``iri``, ``session``, ``mechanism``, ``query``, ``time``,
            ``status`` (``open`` / ``incomplete``), ``steps``, ``expected``, ``late``, ``missing``.
        """
        return self._read("checking the scope", q.CHECK_SESSIONS, user=user, collection=collection,
                          statuses=["open", "incomplete"])

    def _read(self, action: str, query: LiteralString, **params: Any) -> list[dict[str, Any]]:
        if self._driver is None:
            raise StoreError("TraceReader is not open: call open() or use it as a context manager")
        with translated(action, self._settings):
            result = self._driver.execute_query(
                query, {**params, "graph": v.GRAPH}, routing_=RoutingControl.READ,
                database_=self._settings.neo4j_database,
            )
        return [r.data() for r in result.records]
