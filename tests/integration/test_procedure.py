"""``provstream.writeBatch`` (the procedure ``make up`` installs) and the Cypher statement give one graph.

Both run on the stack's real Neo4j: the same batches, with their offset lineage,
re-deliveries and an older batch after newer ones, written once through each;
every node (labels and properties) and relationship (type, properties, end)
they leave must be the same.
"""

from __future__ import annotations

import select
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest
from neo4j import GraphDatabase
from sink_support import env_for

from provstream.connectors.neo4j import cypher as q
from provstream.connectors.neo4j.rows import build_rows, lineage_rows, write_rows
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core.triples import Iri, StepTriples, Triple
from provstream.errors import StoreError
from provstream.settings import Settings
from provstream.testing import agent_events, fold_all, load_trajectories, scenario

pytestmark = pytest.mark.integration

START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
NODES = "MATCH (n:Resource) WHERE n.iri IN $iris RETURN n.iri AS iri, labels(n) AS labels, properties(n) AS props"
RELS = ("MATCH (n:Resource)-[r]->(o) WHERE n.iri IN $iris "
        "RETURN n.iri AS s, type(r) AS type, properties(r) AS props, o.iri AS o")
DELETE = "MATCH (n:Resource) WHERE n.iri IN $iris DETACH DELETE n"


def _batches(settings: Settings, unique: str) -> list[list[StepTriples]]:
    """Batches of every kind of node, status and relationship, re-delivered and out of order."""
    trajectories = load_trajectories()
    events = [*scenario(trajectories, f"proc-{unique}", start=START, user=settings.user,
                        collection=settings.collection)]
    for i in range(3, 7):
        events += agent_events(trajectories[i], f"proc-{unique}-{i}", start=START, user=settings.user,
                               collection=settings.collection)
    messages = fold_all(events)
    # two predicates outside the model's relationship types between the same nodes: two LINKs
    first = messages[3]
    subject = first.triples[0].s
    links = tuple(Triple(subject, Iri(f"http://example.org/ontology/{name}"), Iri(first.question))
                  for name in ("mentions", "cites"))
    elsewhere = Triple(subject, Iri("http://example.org/ontology/mentions"), Iri(f"urn:proc-{unique}:elsewhere"))
    messages[3] = replace(first, triples=(*first.triples, *links, elsewhere))
    batches = [messages[i:i + 7] for i in range(0, len(messages), 7)]
    # a re-delivery, then an older batch after the newer ones (status must not regress), then one in reverse
    return [*batches, batches[2], batches[0], list(reversed(batches[-1]))]


def _lineages(batches: list[list[StepTriples]]) -> list[list[dict[str, Any]]]:
    out, offset = [], 0
    for batch in batches:
        out.append([row for j, msg in enumerate(batch) for row in lineage_rows(msg, (0, offset + j), (1, offset + j))])
        offset += len(batch)
    return out


def _write(settings: Settings, statement: Any, batches: list[list[StepTriples]]) -> None:
    with Neo4jStore(settings) as store:
        store.setup()
        store.write_statement = statement
        for batch, lineage in zip(batches, _lineages(batches), strict=True):
            assert store.write(batch, lineage) > 0


def _write_maps(settings: Settings, batches: list[list[StepTriples]]) -> None:
    """The procedure given write_rows's maps (contract 1), as the Cypher statement takes them."""
    with Neo4jStore(settings) as store:
        store.setup()
    with GraphDatabase.driver(settings.neo4j_uri, auth=settings.neo4j_auth) as driver:
        for batch, lineage in zip(batches, _lineages(batches), strict=True):
            driver.execute_query(q.WRITE_BATCH_PROCEDURE, batch={"rows": write_rows(build_rows(batch), lineage)},
                                 database_=settings.neo4j_database)


def _snapshot(settings: Settings, iris: list[str]) -> tuple[list[Any], list[Any]]:
    with GraphDatabase.driver(settings.neo4j_uri, auth=settings.neo4j_auth) as driver:
        nodes = [(r["iri"], sorted(r["labels"]), r["props"]) for r in
                 driver.execute_query(NODES, iris=iris, database_=settings.neo4j_database).records]
        rels = [(r["s"], r["type"], r["props"], r["o"]) for r in
                driver.execute_query(RELS, iris=iris, database_=settings.neo4j_database).records]
        driver.execute_query(DELETE, iris=iris, database_=settings.neo4j_database)
    return sorted(nodes, key=lambda n: n[0]), sorted(rels, key=lambda r: (r[0], r[1], r[3], str(r[2])))


def test_the_stack_has_the_procedure_and_the_store_writes_through_it(isolated: Settings) -> None:
    with Neo4jStore(isolated) as store:
        assert store.write_statement == q.WRITE_BATCH_PROCEDURE
    with Neo4jStore(replace(isolated, neo4j_procedure="off")) as store:
        assert store.write_statement == q.WRITE_BATCH_QUERY


@pytest.mark.parametrize(("mode", "write"), [("auto", "procedure provstream.writeBatch"), ("off", "Cypher statement")])
def test_the_sink_says_how_it_writes_when_ready(isolated: Settings, mode: str, write: str) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "provstream", "sink"], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True,
                            env=env_for(isolated, PROVSTREAM_NEO4J_PROCEDURE=mode))
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""
        assert line.startswith("provstream sink ready: ") and line.rstrip().endswith(f"writes with the {write})")
    finally:
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.parametrize("rows", ["procedure_batch", "write_rows maps"])
def test_the_procedure_and_the_cypher_statement_leave_the_same_graph(isolated: Settings, unique: str,
                                                                    rows: str) -> None:
    """The sink's batch (contract 2) and write_rows's maps (contract 1, as a client of the
    Cypher statement's rows sends them) leave the graph the Cypher statement leaves."""
    batches = _batches(isolated, unique)
    iris = sorted({row["iri"] for batch in batches for row in write_rows(build_rows(batch))})
    _write(isolated, q.WRITE_BATCH_QUERY, batches)
    by_cypher = _snapshot(isolated, iris)
    if rows == "procedure_batch":
        _write(isolated, q.WRITE_BATCH_PROCEDURE, batches)
    else:
        _write_maps(isolated, batches)
    by_procedure = _snapshot(isolated, iris)

    nodes, rels = by_cypher
    assert len(nodes) == len(iris)
    assert {r[1] for r in rels} >= {"wasDerivedFrom", "wasGeneratedBy", "selectedEdge"}
    assert sorted(r[2]["predicate"] for r in rels if r[1] == "LINK") == [
        "http://example.org/ontology/cites", "http://example.org/ontology/mentions",
        "http://example.org/ontology/mentions"]
    assert any("missingSteps" in props for _, _, props in nodes)
    assert any("eventOffset" in props for _, _, props in nodes)
    assert by_procedure == by_cypher


def test_a_procedure_of_another_contract_is_not_used(isolated: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` falls back to the Cypher statement; ``on`` fails with one clear line."""
    monkeypatch.setattr(q, "PROCEDURE_CONTRACT", "contract 0")
    with Neo4jStore(isolated) as store:
        assert store.write_statement == q.WRITE_BATCH_QUERY
    with Neo4jStore(replace(isolated, neo4j_procedure="on")) as store, \
            pytest.raises(StoreError, match=r"PROVSTREAM_NEO4J_PROCEDURE=on, but provstream.writeBatch is not of"):
        _ = store.write_statement
