"""``provstream replay``: rebuild the Neo4j graph from the events topic (see docs/replay.md).

Exactly one start: ``--from-beginning``, ``--from-offset PARTITION:OFFSET``
(repeatable; only the partitions named are read) or ``--from-time ISO8601``
(per partition, the first event at or after that time; no zone means UTC).
``--reset-graph`` deletes the whole retrieval graph (every user and
collection) before writing. Progress on stderr, then a one-line summary.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from provstream.connectors.replay import ReplayStats, Reset, StartAt, parse_offset, parse_time, replay
from provstream.settings import Settings

PROGRESS_EVERY = 0.25  # seconds


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


class ProgressLine:
    """A ``\\r`` progress line on stderr, redrawn at most every :data:`PROGRESS_EVERY` seconds."""

    def __init__(self) -> None:
        self._began = time.monotonic()
        self._last = 0.0
        self._drawn = False

    def __call__(self, stats: ReplayStats, final: bool = False) -> None:
        now = time.monotonic()
        if now - self._last < PROGRESS_EVERY and not final:
            return
        self._last = now
        pct = 100.0 * stats.events / stats.total if stats.total else 100.0
        rate = stats.events / max(now - self._began, 1e-9)
        sys.stderr.write(f"\rreplay {stats.events}/{stats.total} events ({pct:5.1f}%) "
                         f"{stats.triples} triples  {rate:.0f} events/s ")
        sys.stderr.flush()
        self._drawn = True

    def done(self) -> None:
        if self._drawn:
            sys.stderr.write("\n")


def run(args: argparse.Namespace, settings: Settings) -> int:
    line = ProgressLine()
    try:
        stats = replay(settings, start_of(args), reset=Reset() if args.reset_graph else None, progress=line)
        line(stats, final=True)
    finally:
        line.done()
    if args.reset_graph:
        print(f"deleted {stats.deleted} nodes of the retrieval graph", file=sys.stderr)
    print(stats.summary())
    return 0
