"""``provstream sink``: write the triples topic into Neo4j until SIGTERM/SIGINT.

Prints ``provstream sink ready: ...`` on stdout once Neo4j (constraint and
indexes in place) and Kafka are reachable; waits for them with backoff before
that. Stops cleanly on SIGTERM or SIGINT (the batch in hand is written and
committed if Neo4j is up) and exits 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from typing import Any

from provstream.connectors.sink import run_sink
from provstream.gc_tuning import tune_gc
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("sink", help="write the triples topic into Neo4j (runs until stopped)",
                                   description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log each retry and batch")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("kafka").setLevel(logging.ERROR)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    tune_gc(settings)

    def ready(write: str) -> None:
        print(f"provstream sink ready: {settings.triples_topic} -> {settings.neo4j_uri} "
              f"(group {settings.sink_group}; writes with the {write})", flush=True)

    stats = run_sink(settings, stop, on_ready=ready)
    print(f"provstream sink stopped: {stats.messages} messages, {stats.triples} triples, "
          f"{stats.dead_lettered} dead-lettered", file=sys.stderr, flush=True)
    return 0
