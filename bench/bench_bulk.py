"""Bulk rebuild vs online replay on the same log (a script, not a test; run it on a private stack).

The bulk rebuild stops and restarts Neo4j and replaces its whole database:
run this only against a stack of its own, e.g. ``.stack/private-bulk``
(``PROVSTREAM_STACK_DIR`` and the ``PROVSTREAM_*_PORT`` variables set as for
``provstream stack up --servers-only``). It refuses the default stack dir.

Builds sessions from the bundled ReAct trajectories until ``--triples``
triples, folds them offline, and writes the events to a fresh events topic and
the triples messages to a fresh triples topic (what the worker would have
written). Then, per round:

* **online replay** (``provstream replay --from-beginning``, events topic →
  fold → batched MERGE), into an emptied database, after an untimed warm-up
  replay of ``--warmup`` triples (a freshly started Neo4j compiles and warms up
  on its first ~100k triples, see bench_sink.py);
* **bulk** (``provstream replay --bulk --force``: triples topic → GraphImage →
  CSV → ``neo4j-admin database import full`` → restart → constraint and indexes
  → offsets handed over), its rate overall and without the Neo4j stop/start.

Prints one line per measurement, the load average with each, and checks that
both runs leave the same number of nodes and relationships. Usage:
``.venv/bin/python bench/bench_bulk.py [--triples 200000] [--warmup 50000] [--rounds 1] [--skip-online]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from neo4j import GraphDatabase

from provstream.codec import records as wire
from provstream.connectors.bulk import BulkOptions, bulk_rebuild
from provstream.connectors.replay import StartAt, replay
from provstream.core import events as ev
from provstream.core.triples import StepTriples
from provstream.gc_tuning import tune_gc
from provstream.settings import Settings
from provstream.testing import fold_all, load_trajectories, trajectory_events
from provstream.topics import ensure_topics

COUNTS = "CALL () { MATCH (n) RETURN count(n) AS n } CALL () { MATCH ()-[r]->() RETURN count(r) AS r } RETURN n, r"
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def workload(settings: Settings, prefix: str, triples: int) -> tuple[list[ev.Event], list[StepTriples]]:
    """Sessions cycling through the bundled trajectories until ``triples`` triples (events, folded messages)."""
    records = load_trajectories()
    events: list[ev.Event] = []
    messages: list[StepTriples] = []
    n = count = 0
    while count < triples:
        chunk = [e for i in range(n, n + 120) for e in trajectory_events(
            records[i % len(records)], f"{prefix}-{i}", START, settings.user, settings.collection)]
        events += chunk
        folded = fold_all(chunk)
        messages += folded
        count += _count(folded)
        n += 120
    return events, messages


def _count(messages: Sequence[StepTriples]) -> int:
    return sum(len(m.triples) for m in messages)


def produce(settings: Settings, topic: str, items: Iterable[tuple[str, bytes]]) -> None:
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all", linger_ms=20,
                             batch_size=512 * 1024, compression_type=None)
    try:
        for key, value in items:
            producer.send(topic, key=key.encode(), value=value)
        producer.flush()
    finally:
        producer.close(timeout=30)


def wipe(settings: Settings) -> tuple[int, int]:
    """Delete every node; return the (nodes, relationships) there were."""
    with GraphDatabase.driver(settings.neo4j_uri, auth=settings.neo4j_auth) as driver, \
            driver.session(database=settings.neo4j_database) as session:
        counted = session.run(COUNTS).single()
        session.run("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS").consume()
        assert counted is not None
        return int(counted["n"]), int(counted["r"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--triples", type=int, default=200_000)
    parser.add_argument("--warmup", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--skip-online", action="store_true", help="measure the bulk rebuild only")
    args = parser.parse_args(argv)

    base = Settings.from_env().with_stack_secret()
    if base.stack_dir.resolve() == (Path(__file__).resolve().parents[1] / ".stack").resolve():
        print("bench_bulk: refusing the default stack (the bulk rebuild replaces its database); "
              "set PROVSTREAM_STACK_DIR to a private stack", file=sys.stderr)
        return 2
    run = uuid.uuid4().hex[:8]
    settings = replace(base, events_topic=f"bench.bulk.{run}.events", triples_topic=f"bench.bulk.{run}.triples",
                       events_dlq_topic=f"bench.bulk.{run}.events.dlq",
                       triples_dlq_topic=f"bench.bulk.{run}.triples.dlq", sink_group=f"bench-bulk-{run}-sink",
                       collection=f"bench-bulk-{run}")
    warm = replace(settings, events_topic=f"bench.bulk.{run}.warm", collection=f"bench-bulk-{run}-warm")
    ensure_topics(settings)
    ensure_topics(warm)
    print(f"machine: {platform.node()} {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load {load()}", flush=True)
    events, messages = workload(settings, f"bench-{run}", args.triples)
    warm_events, _ = workload(warm, f"warm-{run}", 0 if args.skip_online else args.warmup)
    began = time.monotonic()
    produce(settings, settings.events_topic, ((e.session_id, wire.encode_event(e)) for e in events))
    produce(settings, settings.triples_topic, ((m.session_id, wire.encode_triples(m)) for m in messages))
    produce(warm, warm.events_topic, ((e.session_id, wire.encode_event(e)) for e in warm_events))
    print(f"log: {len(events)} events, {len(messages)} triples messages, {_count(messages)} triples "
          f"({len({e.session_id for e in events})} sessions) written in {time.monotonic() - began:.1f} s", flush=True)
    tune_gc(settings)  # as `provstream replay` does at its start (the workload above is frozen with the rest)
    try:
        for round_ in range(1, args.rounds + 1):
            online_graph = (-1, -1)
            if not args.skip_online:
                wipe(settings)
                replay(warm, StartAt.beginning())  # untimed warm-up
                wipe(settings)
                online_load = load()
                stats = replay(settings, StartAt.beginning())
                print(f"round {round_} online replay: {stats.triples} triples ({stats.events} events) in "
                      f"{stats.seconds:.1f} s: {stats.triples_per_second:.0f} triples/s "
                      f"({stats.events_per_second:.0f} events/s); load before {online_load}, after {load()}",
                      flush=True)
                online_graph = wipe(settings)
            bulk_load = load()
            bulk = bulk_rebuild(settings, BulkOptions(force=True))
            print(f"round {round_} {bulk.summary()}; load before {bulk_load}, after {load()}", flush=True)
            with GraphDatabase.driver(settings.neo4j_uri, auth=settings.neo4j_auth) as driver:
                got, _, _ = driver.execute_query(COUNTS, database_=settings.neo4j_database)
            bulk_graph = (int(got[0]["n"]), int(got[0]["r"]))
            same = "not compared" if args.skip_online else "same" if bulk_graph == online_graph else "DIFFERENT"
            print(f"round {round_} graphs: online {online_graph[0]} nodes {online_graph[1]} relationships, "
                  f"bulk {bulk_graph[0]} nodes {bulk_graph[1]} relationships ({same}); "
                  f"peak RSS so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB", flush=True)
    finally:
        admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, client_id="bench-bulk")
        try:
            admin.delete_topics([t for t in admin.list_topics() if t.startswith(f"bench.bulk.{run}.")])
        finally:
            admin.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
