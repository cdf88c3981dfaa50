"""``provstream replay``: rebuild the Neo4j graph from the events topic (see docs/replay.md).

``--bulk`` instead rebuilds an empty database of the local stack from the
triples topic with Neo4j's offline importer, then hands over to the sink at
the offsets it imported (``provstream rebuild`` is the same; ``--force``
replaces a database that is not empty).

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
from pathlib import Path
from typing import Any

from provstream.connectors.bulk import BulkOptions, BulkStats, bulk_rebuild
from provstream.connectors.replay import ReplayStats, Reset, StartAt, parse_offset, parse_time, replay
from provstream.errors import ConfigError
from provstream.gc_tuning import tune_gc
from provstream.progress import Progress
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("replay", help="rebuild the Neo4j graph from the events topic",
                                   description=__doc__)
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="every event of every partition")
    start.add_argument("--from-offset", action="append", metavar="PARTITION:OFFSET",
                       help="start a partition at an offset (repeatable)")
    start.add_argument("--from-time", metavar="ISO8601", help="start every partition at a time")
    parser.add_argument("--reset-graph", action="store_true",
                        help="delete the whole retrieval graph (all scopes) first")
    add_bulk_options(parser, with_flag=True)
    parser.set_defaults(func=run)


def add_bulk_options(parser: Any, with_flag: bool) -> None:
    """``--bulk`` (replay only), ``--force``, ``--keep-files DIR``."""
    if with_flag:
        parser.add_argument("--bulk", action="store_true",
                            help="rebuild an empty database from the triples topic with the offline importer, "
                                 "then hand over to the sink")
    parser.add_argument("--force", action="store_true", help="bulk: replace a database that is not empty")
    parser.add_argument("--keep-files", metavar="DIR", type=Path,
                        help="bulk: write the CSV files into DIR and keep them")


def start_of(args: argparse.Namespace) -> StartAt:
    if args.from_offset:
        return StartAt(offsets=tuple(parse_offset(o) for o in args.from_offset))
    if args.from_time:
        return StartAt(time=parse_time(args.from_time))
    return StartAt.beginning()


def run_bulk(args: argparse.Namespace, settings: Settings) -> int:
    """The bulk rebuild: progress on stderr, the summary line on stdout."""
    tune_gc(settings)
    bar = Progress("bulk", unit="records")

    def progress(stats: BulkStats) -> None:
        bar.update(stats.records, stats.total, f"{stats.triples} triples")

    options = BulkOptions(force=args.force, keep_files=args.keep_files is not None, directory=args.keep_files)
    try:
        stats = bulk_rebuild(settings, options, progress=progress)
    finally:
        bar.finish()
    print(stats.summary())
    return 0


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.bulk:
        if args.from_offset or args.from_time or args.reset_graph:
            raise ConfigError("--bulk rebuilds the whole database from the beginning of the triples topic: "
                              "drop --from-offset/--from-time/--reset-graph (--force replaces a non-empty database)")
        return run_bulk(args, settings)
    if args.force or args.keep_files:
        raise ConfigError("--force and --keep-files go with --bulk")
    if not (args.from_beginning or args.from_offset or args.from_time):
        raise ConfigError("replay needs a start: --from-beginning, --from-offset PARTITION:OFFSET or --from-time TIME "
                          "(or --bulk)")
    tune_gc(settings)
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
