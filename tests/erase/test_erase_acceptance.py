"""Erase one user of three, then replay from the beginning into an empty database (issue 20).

Each user records through the emitter; alice (erased) and bob (kept) also
send one OpenTelemetry trace with the real SDK and its OTLP gRPC exporter to
``provstream otlp`` (which seals the span texts), translated by the worker.
The other two users' traces come back exact (bob's OTLP trace too); the
erased user's planted marker has zero plaintext hits in the raw log segment
files of every topic (read from the private broker's log dirs: the spans topic
and the worker's changelog included) and in every node and relationship
property; the erased sessions' structure is there with its texts ``[erased]``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from erase_support import STACK_DIR, otlp_receiver, provstream
from neo4j import GraphDatabase
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from otlp_support import Call, Clock, Recorded, Run, Turn, emit_run, expected_events, fold_triples, sdk_tracer
from sink_support import sink_process, wait_until
from worker_support import running_worker

from provstream.connectors.emitter import Emitter
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.connectors.replay import Reset, StartAt, replay
from provstream.core.triples import Literal, Triple
from provstream.crypto import ERASED, scope_of
from provstream.keys import KafkaKeyStore
from provstream.settings import Settings
from provstream.topics import ensure_topics

pytestmark = pytest.mark.privatestack

MARKER = "ERASE-ME-7f3a9c"
USERS = ("alice", "bob", "carol")


def _record(settings: Settings, user: str, tag: str, run: str) -> None:
    with Emitter(settings) as emitter:
        a = emitter.agent(f"{tag} where does {user} live?", user=user, session_id=f"{user}-agent-{run}")
        a.iteration(thought=f"{tag} look up {user}", action="Search", arguments={"q": f"{tag} {user}"},
                    observation=f"{tag} {user} lives at 4 Privet Drive")
        a.conclude(f"{tag} Privet Drive")
        g = emitter.graphrag(f"{tag} who knows {user}?", user=user, session_id=f"{user}-graph-{run}")
        g.explore(2)
        g.focus([("urn:person:1", "urn:rel:knows", "urn:person:2", f"{tag} the edge about {user}")])
        g.synthesize(f"{tag} person 1 knows {user}")
        emitter.flush(30)


def _otlp_run(user: str, tag: str) -> Run:
    return Run(f"{tag} what did {user} order?", f"{tag} a red bicycle", [
        Turn(f"{tag} I check the orders", [Call("Orders", {"input": f"{tag} orders of {user}"},
                                               f"{tag} {user} ordered a red bicycle",
                                               documents=({"content": f"{tag} order 1 of {user}"},))]),
        Turn(f"{tag} one more thought"),
    ])


def _record_otlp(settings: Settings, user: str, tag: str) -> tuple[Run, Recorded]:
    """One agent trace of ``user`` through the OpenTelemetry SDK's OTLP gRPC exporter to ``provstream otlp``."""
    run = _otlp_run(user, tag)
    exporter = OTLPSpanExporter(endpoint=f"127.0.0.1:{settings.otlp_grpc_port}", insecure=True, timeout=30)
    try:
        with sdk_tracer(exporter, replace(settings, user=user)) as tracer:  # the resource names user and collection
            rec = emit_run(tracer, run, Clock())
    finally:
        exporter.shutdown()
    return run, rec


def _scope(settings: Settings, user: str) -> set[Triple]:
    with Neo4jStore(settings) as store:
        return store.scope_triples(user=user, collection=settings.collection)


def _segment_hits(needle: bytes) -> dict[str, int]:
    """Plaintext hits of ``needle`` per topic-partition directory of the broker's log dirs."""
    hits: dict[str, int] = {}
    for path in (STACK_DIR / "data" / "kafka").rglob("*"):
        if path.is_file() and path.suffix in (".log", ".index", ".timeindex", ".snapshot", ".txnindex", ""):
            count = path.read_bytes().count(needle)
            if count:
                hits[path.parent.name] = hits.get(path.parent.name, 0) + count
    return hits


def _all_properties(settings: Settings) -> list[str]:
    with GraphDatabase.driver(settings.neo4j_uri, auth=settings.neo4j_auth) as driver:
        nodes, _, _ = driver.execute_query("MATCH (n) RETURN properties(n) AS p", database_=settings.neo4j_database)
        rels, _, _ = driver.execute_query("MATCH ()-[r]->() RETURN properties(r) AS p",
                                          database_=settings.neo4j_database)
    return [repr(r["p"]) for r in [*nodes, *rels]]


def _roll_and_compact(settings: Settings, alice_wrapped: list[bytes], timeout: float = 120) -> None:
    """Append to the keys topic past segment.ms until the log cleaner dropped every erased key's record."""
    keys = KafkaKeyStore(settings, "admin")
    try:
        deadline = time.monotonic() + timeout
        n = 0
        while any(_segment_hits(w) for w in alice_wrapped):
            assert time.monotonic() < deadline, f"the erased keys are still on disk: {_segment_hits(alice_wrapped[0])}"
            time.sleep(1.2)  # > segment.ms: the next append rolls the segment, the cleaner may clean the old ones
            keys.put(f"roll~{n}", None)
            n += 1
    finally:
        keys.close()


def test_erase_one_user_of_three_then_replay_into_an_empty_database(private_stack: Settings,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    run = uuid.uuid4().hex[:8]  # the private stack keeps its data between runs
    settings = replace(private_stack, collection=f"erase-{run}")
    ensure_topics(settings)
    for user in USERS:
        _record(settings, user, MARKER if user == "alice" else f"kept-{user}", run)
    expected = 2 * 4 + 3 * 5  # a rough floor: every user's two sessions reached Neo4j
    with running_worker(settings), sink_process(settings, PROVSTREAM_NEO4J_PASSWORD=settings.neo4j_password):
        with otlp_receiver():
            otlp = {u: _record_otlp(settings, u, MARKER if u == "alice" else f"kept-{u}") for u in ("alice", "bob")}
        otlp_want = {u: fold_triples(expected_events(r, rec, replace(settings, user=u), monkeypatch))
                     for u, (r, rec) in otlp.items()}  # the emitter's trace of the same steps, in clear
        wait_until(lambda: all(len(_scope(settings, u)) >= expected for u in USERS)
                   and all(otlp_want[u] <= _scope(settings, u) for u in otlp_want), 120, "three users' traces")
        before = {u: _scope(settings, u) for u in USERS}
        assert any(MARKER in str(t) for t in before["alice"])  # the sink opened alice's sealed fields
        assert any("kept-bob" in str(t) for t in before["bob"])
        assert otlp_want["bob"] <= before["bob"] and any(f"kept-bob {x}" in str(t) for t in otlp_want["bob"]
                                                         for x in ("what did", "a red bicycle"))

        keys = KafkaKeyStore(settings, "admin")
        try:
            records = keys.read_new()
        finally:
            keys.close()
        alice_wrapped = [r.split(b'"wrapped": "')[1].split(b'"')[0] for _, r in records
                         if r is not None and scope_of(r).matches("alice", settings.collection)]
        assert len(alice_wrapped) == 3  # her two emitter sessions' keys, her OTLP trace's key

        done = provstream("erase", "-U", "alice", "-C", settings.collection)
        assert done.returncode == 0, done.stdout + done.stderr
        # agent + GraphRAG sessions, the OTLP agent session and its DocRAG sub-trace; the trace's key scope
        assert "erased 4 session(s) and 1 OTLP trace(s): 3 data key(s) tombstoned" in done.stdout
        assert _scope(settings, "alice") == set()  # at once
        time.sleep(2)  # the sink acts on the retraction records too; nothing of alice comes back
        assert _scope(settings, "alice") == set()

    _roll_and_compact(settings, alice_wrapped)
    replay(settings, StartAt.beginning(), reset=Reset())  # an empty database, rebuilt from the events topic

    for user in ("bob", "carol"):
        assert _scope(settings, user) == before[user], f"{user}'s trace is not exact after the replay"
    erased = _scope(settings, "alice")
    texts = [t.o.value for t in erased if isinstance(t.o, Literal)]
    assert len(erased) == len(before["alice"]) and ERASED in texts
    assert not any(MARKER in str(t) for t in erased)
    structure = {(t.s, t.p) for t in erased}
    assert structure == {(t.s, t.p) for t in before["alice"]}  # the same nodes and predicates, [erased] texts

    hits = _segment_hits(MARKER.encode())
    assert hits == {}, f"plaintext of the erased user in the raw log segments: {hits}"
    assert _segment_hits(f"alice-agent-{run}".encode()), "the segment scan reads the topics (a clear field is found)"
    topics = {p.name.rsplit("-", 1)[0] for p in (STACK_DIR / "data" / "kafka").iterdir() if p.is_dir()}
    changelog = {t for t in topics if t.startswith(settings.worker_app_id) and "otlp_traces" in t}
    assert {settings.events_topic, settings.triples_topic, settings.keys_topic, settings.otlp_spans_topic} <= topics
    assert changelog, f"no changelog of the worker's OTLP table among {sorted(topics)}"
    scanned = {d.rsplit("-", 1)[0] for d in _segment_hits(b"execute_tool Orders")}  # a span name, in clear
    assert {settings.otlp_spans_topic} | changelog <= scanned, f"the scan reads the spans and changelog: {scanned}"
    assert not any(MARKER in p for p in _all_properties(settings))
    for w in alice_wrapped:
        assert _segment_hits(w) == {}, "an erased data key is still in the keys topic's files"
    assert Path(settings.master_key_path).stat().st_mode & 0o777 == 0o600
