"""Bulk rebuild on a real Kafka and Neo4j: the imported graph is the streamed graph, and the sink goes on.

1. The bundled trajectories (and the read-side scenario: GraphRAG quoted edges,
   DocRAG chunks, a sub-trace, an open session), one erased session
   (retraction record) and one undecodable record go to the triples topic; the
   sink writes them (one dead letter).
2. The streamed graph is dumped (every node's labels and typed properties,
   every relationship) and exported (``provstream export --all``).
3. The database is emptied; ``provstream replay --bulk`` rebuilds it with the
   offline importer. Dump and export again: equal.
4. More sessions go to the topic; a sink started now writes exactly those
   (its last line counts the records) and commits to the new end.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
from bulk_support import PORTS, private_env
from kafka import KafkaProducer
from neo4j import GraphDatabase
from rdflib import Dataset, Graph
from rdflib.compare import isomorphic
from sink_support import (
    START,
    committed_total,
    cypher,
    env_for,
    interleave,
    produce,
    produce_triples,
    read_topic,
    sessions,
    wait_until,
)

from provstream.codec import records as wire
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core.triples import StepTriples
from provstream.settings import Settings
from provstream.testing import fold_all, load_trajectories, scenario
from provstream.topics import retraction_record

pytestmark = pytest.mark.privatestack

DUMP_NODES = """
MATCH (n)
RETURN n.iri AS iri, labels(n) AS labels,
       [k IN keys(n) | [k, valueType(n[k])]] AS types, properties(n) AS values
"""
DUMP_RELS = """
MATCH (s)-[r]->(o)
RETURN s.iri AS s, type(r) AS type, o.iri AS o,
       [k IN keys(r) | [k, valueType(r[k])]] AS types, properties(r) AS values
"""


def _dump(settings: Settings) -> tuple[list[Any], list[Any]]:
    """Every node and relationship with labels and typed properties, in a canonical order."""
    with cypher(settings) as run:
        nodes = sorted((r["iri"], sorted(r["labels"]), _props(r)) for r in run(DUMP_NODES))
        rels = sorted((r["s"], r["type"], r["o"], _props(r)) for r in run(DUMP_RELS))
    return nodes, rels


def _props(record: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(name, Cypher type, value) of each property: ``LIST<NOTHING>`` and ``LIST<STRING>`` tell apart."""
    return sorted((name, kind, repr(record["values"][name])) for name, kind in record["types"])


def _wipe(settings: Settings) -> None:
    with GraphDatabase.driver(settings.neo4j_uri, auth=settings.neo4j_auth) as driver, \
            driver.session(database=settings.neo4j_database) as session:
        session.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()


def _env(settings: Settings) -> dict[str, str]:
    return {**env_for(settings), **{k: v for k, v in private_env().items() if k in PORTS}}


def _cli(settings: Settings, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "provstream", *args], env=_env(settings),
                          capture_output=True, text=True, timeout=timeout, check=False)


def _export(settings: Settings) -> Graph:
    """``provstream export --all --format nquads`` of the test's scope, parsed (quoted edges are blank nodes)."""
    done = _cli(settings, "export", "--all", "-U", settings.user, "-C", settings.collection, "--format", "nquads")
    assert done.returncode == 0, done.stderr
    data = Dataset()
    data.parse(data=done.stdout, format="nquads")
    out = Graph()
    for s, p, o, _ in data.quads():
        out.add((s, p, o))
    return out


def _messages(settings: Settings, prefix: str, copies: int) -> list[StepTriples]:
    per_session = sessions(settings, prefix, copies=copies)
    extra = scenario(load_trajectories(), f"{prefix}-scn", start=START, user=settings.user,
                     collection=settings.collection)
    return fold_all([*interleave(per_session), *extra])


def _sink_wrote(log: str) -> int:
    """The records the sink handled, from its last line (``provstream sink stopped: N messages, ...``)."""
    found = re.findall(r"provstream sink stopped: (\d+) messages", log)
    assert found, log[-2000:]
    return int(found[-1])


def _run_sink_until_caught_up(settings: Settings) -> str:
    """Run ``provstream sink`` until its group committed the topic's end; return its log."""
    proc = subprocess.Popen([sys.executable, "-m", "provstream", "sink"], env=_env(settings),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (lambda d, e: d == e)(*committed_total(settings)), 180, "the sink to catch up")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    return err


def test_bulk_rebuild_gives_the_streamed_graph_and_hands_over(isolated: Settings, unique: str) -> None:
    settings = isolated
    messages = _messages(settings, f"bulk-{unique}", copies=2)
    erased = next(m for m in messages if m.session_id.endswith("-3"))
    produce_triples(settings, messages)
    key, value, headers = retraction_record(erased.user, erased.collection, erased.session_id)
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
    try:
        producer.send(settings.triples_topic, key=key, value=value, headers=headers).get(timeout=30)
    finally:
        producer.close(timeout=10)
    produce(settings, settings.triples_topic, [("garbage", b"not a triples message", None)])  # a dead letter

    _wipe(settings)  # the private database holds only this test's graph
    log = _run_sink_until_caught_up(settings)
    assert _sink_wrote(log) == len(messages) + 2  # with the retraction and the dead letter
    assert len(read_topic(settings, settings.triples_dlq_topic, 1)) == 1
    streamed, streamed_export = _dump(settings), _export(settings)
    assert not any(erased.session_id in str(s) for s in streamed_export.subjects())
    assert len(streamed[0]) > 100 and len(streamed[1]) > 100

    # refused while not empty
    refused = _cli(settings, "replay", "--bulk")
    assert refused.returncode == 1 and "is not empty" in refused.stderr and len(refused.stderr.splitlines()) == 1

    # one process folds every partition, then two (each its own partitions, merged): the same graph
    for processes in (1, 2):
        _wipe(settings)
        with Neo4jStore(settings) as store:
            assert store.count_nodes() == 0
        done = _cli(replace(settings, bulk_processes=processes), "replay", "--bulk")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("bulk: ") and "1 dead letters, 1 retractions" in done.stdout, done.stdout
        assert f"folded in {processes} process" in done.stdout, done.stdout
        rebuilt, rebuilt_export = _dump(settings), _export(settings)
        assert len(rebuilt_export) == len(streamed_export) > 500
        assert isomorphic(rebuilt_export, streamed_export)
        assert rebuilt == streamed
    assert len(read_topic(settings, settings.triples_dlq_topic, 2, timeout=5)) == 1  # the sink had dead-lettered it
    done_offsets, end = committed_total(settings)
    assert done_offsets == end

    # handover: the sink writes exactly what came after the import
    more = _messages(settings, f"more-{unique}", copies=1)
    produce_triples(settings, more)
    log = _run_sink_until_caught_up(settings)
    assert _sink_wrote(log) == len(more)
    with Neo4jStore(settings) as store:
        scope = store.scope_triples(user=settings.user, collection=settings.collection)
    expected = {t for m in [*messages, *more] if m.session_id != erased.session_id for t in m.triples}
    assert scope == expected


def test_a_session_split_over_partitions_is_folded_in_one_process(isolated: Settings, unique: str) -> None:
    """Records not keyed by session (sessions over two partitions): the parts would not merge, one process reads."""
    settings = replace(isolated, bulk_processes=2)
    messages = _messages(settings, f"split-{unique}", copies=1)
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
    try:
        futures = [producer.send(settings.triples_topic, key=m.session_id.encode(), value=wire.encode_triples(m),
                                 partition=i % 2)
                   for i, m in enumerate(messages)]
        producer.flush()
        for future in futures:
            future.get(timeout=30)
    finally:
        producer.close(timeout=10)
    _wipe(settings)
    _run_sink_until_caught_up(settings)
    streamed = _dump(settings)
    _wipe(settings)
    done = _cli(settings, "replay", "--bulk")
    assert done.returncode == 0, done.stderr
    assert "folded in one process: node " in done.stdout and "two processes' partitions" in done.stdout, done.stdout
    assert _dump(settings) == streamed


def test_bulk_refuses_while_the_sink_runs(isolated: Settings) -> None:
    produce_triples(isolated, _messages(isolated, "running", copies=1)[:5])
    proc = subprocess.Popen([sys.executable, "-m", "provstream", "sink"], env=_env(isolated),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None and "ready" in proc.stdout.readline()
        wait_until(lambda: (lambda d, e: d == e)(*committed_total(isolated)), 120, "the sink to catch up")
        done = _cli(isolated, "rebuild", "--force")
        assert done.returncode == 1
        assert "running member" in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_bulk_option_errors_are_one_line(isolated: Settings) -> None:
    for args in (("replay", "--bulk", "--from-time", "2025-01-01"), ("replay", "--from-beginning", "--force"),
                 ("replay",)):
        done = _cli(isolated, *args, timeout=60)
        assert done.returncode == 1 and len(done.stderr.splitlines()) == 1, (args, done.stderr)


