"""Neo4j CPU per triple of the sink's write alone (a script, not a test).

Builds ``--sessions`` agent sessions from the bundled ReAct trajectories, folds
them offline, then writes them with :meth:`Neo4jStore.write` in batches of
``--batch`` messages (default ``sink_batch_size``; the sink's batches are often
smaller: it also cuts one after ``sink_batch_ms``), with offset lineage as the sink passes it (made-up
offsets), into an emptied scope: no Kafka, no sink process, so what the Neo4j
server spends (utime + stime from ``/proc``) is the write's own. ``--warmup``
sessions are written and deleted first (a fresh server compiles its Cypher and
warms its JIT); then ``--repeat`` rounds, each into an emptied scope, and the
median is printed. Each round is also written a second time (a re-delivery:
MERGE then matches everything).

Usage (against a running stack; a private one, see ``PROVSTREAM_*`` settings):
``.venv/bin/python bench/bench_store.py [--sessions 3000] [--warmup 1000] [--repeat 3] [--batch 300]``.
Prints one line per round and ``neo4j cpu/triple: <median> us (write), <median> us (re-delivery)``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace

from bench_sink import cpu_seconds, make_data, neo4j_pid

from provstream.connectors.neo4j.rows import lineage_rows, triple_count
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core.triples import StepTriples
from provstream.settings import Settings


def write_all(store: Neo4jStore, messages: list[StepTriples], size: int) -> None:
    """Write ``messages`` in batches of ``size``, each with its lineage (offset = position)."""
    for i in range(0, len(messages), size):
        batch = messages[i:i + size]
        lineage = [row for j, msg in enumerate(batch) for row in lineage_rows(msg, (0, i + j), (0, i + j))]
        store.write(batch, lineage)


def measure(store: Neo4jStore, messages: list[StepTriples], size: int, server: int | None) -> tuple[float, float]:
    """(Neo4j CPU seconds, wall seconds) to write ``messages``."""
    cpu, wall = cpu_seconds(server), time.perf_counter()
    write_all(store, messages, size)
    return cpu_seconds(server) - cpu, time.perf_counter() - wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=3000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=0, help="messages per write (default: sink_batch_size)")
    args = parser.parse_args()
    base = Settings.from_env()
    settings = replace(base, collection=f"bench-store-{os.getpid()}")
    server = neo4j_pid(settings)
    if server is None:
        raise SystemExit(f"no Neo4j server of the stack in {settings.stack_dir}")
    size = args.batch or settings.sink_batch_size
    _, messages = make_data(settings, args.sessions)
    triples = triple_count(messages)
    first, again = [], []
    with Neo4jStore(settings) as store:
        store.setup()
        if args.warmup > 0:
            warm = replace(settings, collection=f"{settings.collection}-warmup")
            _, warm_messages = make_data(warm, args.warmup)
            write_all(store, warm_messages, size)
            write_all(store, warm_messages, size)
            store.reset_graph(user=warm.user, collection=warm.collection)
        try:
            for round_ in range(args.repeat):
                store.reset_graph(user=settings.user, collection=settings.collection)
                cpu1, wall1 = measure(store, messages, size, server)
                cpu2, wall2 = measure(store, messages, size, server)
                first.append(cpu1 / triples * 1e6)
                again.append(cpu2 / triples * 1e6)
                print(f"round {round_ + 1}: {triples} triples in batches of {size}: write {wall1:.2f} s, "
                      f"neo4j {first[-1]:.1f} us/triple; re-delivery {wall2:.2f} s, neo4j {again[-1]:.1f} us/triple",
                      flush=True)
        finally:
            store.reset_graph(user=settings.user, collection=settings.collection)
    print(f"neo4j cpu/triple: {statistics.median(first):.1f} us (write), "
          f"{statistics.median(again):.1f} us (re-delivery); load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
