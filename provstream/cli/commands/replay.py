"""``provstream replay``: rebuild the Neo4j graph from the events topic (see docs/replay.md).

Exactly one start: ``--from-beginning``, ``--from-offset PARTITION:OFFSET``
(repeatable; only the partitions named are read) or ``--from-time ISO8601``
(per partition, the first event at or after that time; no zone means UTC).
``--reset-graph`` deletes the whole retrieval graph (every user and
collection) before writing. Progress on stderr (redrawn with a rate and ETA
on a terminal, a plain line every 10 s elsewhere), then a one-line summary.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from provstream.connectors.replay import ReplayStats, Reset, StartAt, parse_offset, parse_time, replay
from provstream.progress import Progress
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("replay", help="rebuild the Neo4j graph from the events topic",
                                   description=__doc__)
    start = parser.add_mutually_exclusive_group(required=True)
    start.add_argument("--from-beginning", action="store_true", help="every event of every partition")
    start.add_argument("--from-offset", action="append", metavar="PARTITION:OFFSET",
                       help="start a partition at an offset (repeatable)")
    start.add_argument("--from-time", metavar="ISO8601", help="start every partition at a time")
    parser.add_argument("--reset-graph", action="store_true",
                        help="delete the whole retrieval graph (all scopes) first")
    parser.set_defaults(func=run)


def start_of(args: argparse.Namespace) -> StartAt:
    if args.from_offset:
        return StartAt(offsets=tuple(parse_offset(o) for o in args.from_offset))
    if args.from_time:
        return StartAt(time=parse_time(args.from_time))
    return StartAt.beginning()


def run(args: argparse.Namespace, settings: Settings) -> int:
    bar = Progress("replay", unit="events")

    def progress(stats: ReplayStats) -> None:
        bar.update(stats.events, stats.total, f"{stats.triples} triples")

    try:
        stats = replay(settings, start_of(args), reset=Reset() if args.reset_graph else None, progress=progress)
        progress(stats)
    finally:
        bar.finish()
    if args.reset_graph:
        print(f"deleted {stats.deleted} nodes of the retrieval graph", file=sys.stderr)
    print(stats.summary())
    return 0
