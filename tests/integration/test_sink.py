"""The sink on the real Kafka and Neo4j: ``provstream sink`` as a child process.

Triples messages are made with the pure fold from the bundled trajectories and
produced straight to this test's own triples topic (no worker needed).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from rdflib.compare import isomorphic
from sink_support import (
    committed_total,
    cypher,
    interleave,
    produce,
    produce_triples,
    read_topic,
    sessions,
    sink_process,
    wait_until,
)

from provstream.codec import records as wire
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core import vocab as v
from provstream.core.triples import Iri, QuotedTriple, StepTriples, Triple
from provstream.errors import TraceNotFound
from provstream.read.rdf import to_graph
from provstream.settings import Settings
from provstream.testing import fold_all, triples_of

pytestmark = pytest.mark.integration


def _drain(settings: Settings, proc: subprocess.Popen[str], total: int, timeout: float = 90) -> None:
    """Wait until the sink committed ``total`` records, then stop it with SIGTERM (exit 0)."""
    wait_until(lambda: committed_total(settings)[0] >= total, timeout, f"the sink to commit {total} records")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0


def _expected_counts(messages: list[StepTriples]) -> tuple[int, Counter[str]]:
    """(distinct subject nodes, relationships per type) the messages must give, each exactly once."""
    triples = triples_of(messages)
    rels = Counter(t.p.value.rsplit("#", 1)[-1].rsplit("/", 1)[-1] for t in triples
                   if isinstance(t.o, Iri) and t.p.value != v.RDF_TYPE)
    return len({t.s.value for t in triples}), rels


def _stored_counts(settings: Settings) -> tuple[int, Counter[str]]:
    with cypher(settings) as run:
        nodes = run("MATCH (n:Resource) WHERE n.collection = $c RETURN count(n) AS n", c=settings.collection)
        rels = run("MATCH (n:Resource)-[r]->() WHERE n.collection = $c RETURN type(r) AS t, count(r) AS n",
                   c=settings.collection)
    return nodes[0]["n"], Counter({r["t"]: r["n"] for r in rels})


def _cleanup(settings: Settings) -> None:
    with Neo4jStore(settings) as store:
        store.reset_graph(user=settings.user, collection=settings.collection)


def test_bundled_trajectories_land_in_neo4j_with_a_queryable_chain(isolated: Settings, unique: str) -> None:
    per_session = sessions(isolated, f"sink-{unique}")
    messages = fold_all(interleave(per_session))
    produce_triples(isolated, messages)
    try:
        with sink_process(isolated) as proc:
            _drain(isolated, proc, len(messages))
        with Neo4jStore(isolated) as store:
            scope = store.scope_triples(user=isolated.user, collection=isolated.collection)
            assert isomorphic(to_graph(scope), to_graph(triples_of(messages)))
            for events in per_session:
                sid = events[0].session_id
                trace = store.trace_triples(v.question_iri(v.Mechanism.AGENT, sid), user=isolated.user,
                                            collection=isolated.collection)
                assert trace == triples_of(m for m in messages if m.session_id == sid)
            with pytest.raises(TraceNotFound):  # scopes never leak
                store.trace_triples(v.question_iri(v.Mechanism.AGENT, per_session[0][0].session_id),
                                    user=isolated.user, collection=isolated.collection + "-other")
        with cypher(isolated) as run:
            paths = run("MATCH p = (c:Conclusion)-[:wasDerivedFrom*]->(q:Question) "
                        "WHERE c.collection = $c RETURN c.session AS s, length(p) AS n", c=isolated.collection)
            questions = run("MATCH (q:Question:AgentQuestion) WHERE q.collection = $c "
                            "RETURN q.status AS status, q.steps AS steps, q.expectedSteps AS expected",
                            c=isolated.collection)
        iterations = {e[0].session_id: len(e) - 2 for e in per_session}
        assert {r["s"]: r["n"] for r in paths} == {sid: n + 1 for sid, n in iterations.items()}
        assert len(questions) == len(per_session)
        assert all(q["status"] == "complete" and q["steps"] == q["expected"] for q in questions)
    finally:
        _cleanup(isolated)


def test_sigkill_mid_stream_and_restart_leaves_every_step_exactly_once(isolated: Settings, unique: str) -> None:
    messages = fold_all(interleave(sessions(isolated, f"kill-{unique}", copies=20)))
    produce_triples(isolated, messages)
    try:
        with sink_process(isolated, PROVSTREAM_SINK_BATCH_SIZE="20") as proc:
            wait_until(lambda: committed_total(isolated)[0] > 0, 60, "a first commit")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        at_kill, total = committed_total(isolated)
        assert 0 < at_kill < total, "the kill must land mid-stream"
        with sink_process(isolated) as proc:
            _drain(isolated, proc, total)
        assert _stored_counts(isolated) == _expected_counts(messages)
        with Neo4jStore(isolated) as store:
            assert store.scope_triples(user=isolated.user, collection=isolated.collection) == triples_of(messages)
    finally:
        _cleanup(isolated)


def test_parallel_transactions_give_the_same_graph_through_a_sigkill(isolated: Settings, unique: str) -> None:
    """Batches split by session between three parallel transactions: every step once, every status complete."""
    per_session = sessions(isolated, f"lanes-{unique}", copies=100)  # ~6,200 messages: about 20 batches
    messages = fold_all(interleave(per_session))
    produce_triples(isolated, messages)
    lanes = {"PROVSTREAM_SINK_WRITERS": "3", "PROVSTREAM_SINK_BATCH_SIZE": "300"}  # 3 x 100 messages
    try:
        with sink_process(isolated, **lanes) as proc:
            wait_until(lambda: committed_total(isolated)[0] > 0, 60, "a first commit")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        at_kill, total = committed_total(isolated)
        assert at_kill < total, "the kill must land before the end"
        with sink_process(isolated, **lanes) as proc:
            _drain(isolated, proc, total)
        assert _stored_counts(isolated) == _expected_counts(messages)
        with Neo4jStore(isolated) as store:
            assert store.scope_triples(user=isolated.user, collection=isolated.collection) == triples_of(messages)
        with cypher(isolated) as run:
            questions = run("MATCH (q:Question:AgentQuestion) WHERE q.collection = $c "
                            "RETURN q.status AS status, q.steps AS steps, q.expectedSteps AS expected",
                            c=isolated.collection)
        assert len(questions) == len(per_session)
        assert all(q["status"] == "complete" and q["steps"] == q["expected"] for q in questions)
    finally:
        _cleanup(isolated)


def _poison(template: StepTriples) -> StepTriples:
    """A well-formed message the model cannot hold (a quoted triple under a predicate other than tg:edge)."""
    s = Iri(template.question)
    bad = Triple(s, Iri("http://example.org/quotes"), QuotedTriple(s, Iri(v.TG_QUERY), Iri("urn:x")))
    return StepTriples(template.event_id + "-poison", template.session_id, template.mechanism, template.seq,
                       template.user, template.collection, template.question, (bad,), template.status)


def test_garbage_and_rejected_records_are_dead_lettered_and_later_records_land(
        isolated: Settings, unique: str) -> None:
    per_session = sessions(isolated, f"dlq-{unique}")
    before = fold_all(e for s in per_session[:3] for e in s)
    after = fold_all(e for s in per_session[3:6] for e in s)
    poison, big = _poison(before[0]), _oversized(before[1])
    records = [(m.session_id, wire.encode_triples(m), None) for m in before]
    records += [("junk", b"\x00 not avro", None), (poison.session_id, wire.encode_triples(poison), None),
                (big.session_id, wire.encode_triples(big), None)]
    records += [(m.session_id, wire.encode_triples(m), None) for m in after]
    produce(isolated, isolated.triples_topic, records)
    try:
        with sink_process(isolated, PROVSTREAM_SINK_BATCH_SIZE="500") as proc:
            _drain(isolated, proc, len(records))
        dead = read_topic(isolated, isolated.triples_dlq_topic, expected=3)
        assert sorted(r.value for r in dead) == sorted([b"\x00 not avro", wire.encode_triples(poison),
                                                        wire.encode_triples(big)])
        source = {(r.partition, r.offset): r.value for r in read_topic(isolated, isolated.triples_topic, len(records))}
        for r in dead:
            headers = {k: h.decode() for k, h in r.headers}
            assert headers["provstream.source.topic"] == isolated.triples_topic
            position = (int(headers["provstream.source.partition"]), int(headers["provstream.source.offset"]))
            assert source[position] == r.value
            reason = headers["provstream.error"]
            if r.key == b"junk":
                assert "undecodable" in reason
            elif r.value == wire.encode_triples(poison):
                assert "only tg:edge" in reason
            else:
                assert "Neo4j rejected" in reason and "too large" in reason
        with Neo4jStore(isolated) as store:
            stored = store.scope_triples(user=isolated.user, collection=isolated.collection)
        assert stored == triples_of(before + after)
    finally:
        _cleanup(isolated)


def _oversized(template: StepTriples) -> StepTriples:
    """A message Neo4j itself refuses: an IRI too long for the uniqueness index."""
    s = Iri(template.question)
    bad = Triple(s, Iri("http://example.org/seeAlso"), Iri("urn:x:" + "a" * 40_000))
    return StepTriples(template.event_id + "-big", template.session_id, template.mechanism, template.seq,
                       template.user, template.collection, template.question, (bad,), template.status)


def _open_bolt_sockets(port: int) -> int:
    """This process's established TCP connections to ``port`` (from /proc: no extra dependency)."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            remote_port, state, inode = int(fields[2].rsplit(":", 1)[1], 16), fields[3], fields[9]
            count += remote_port == port and state == "01" and inode in inodes
    return count


def test_warm_opens_a_connection_per_lane_and_writes_nothing(isolated: Settings) -> None:
    port = int(isolated.neo4j_uri.rsplit(":", 1)[1])
    others = _open_bolt_sockets(port)  # drivers other fixtures of this process may hold
    with Neo4jStore(isolated) as store:
        nodes = store.count_nodes()
        store.warm(3)
        assert _open_bolt_sockets(port) - others == 3
        assert store.count_nodes() == nodes
        store.warm(1)  # one lane: nothing to wait for
    assert _open_bolt_sockets(port) == others  # closing the store closes them
