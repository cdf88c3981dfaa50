"""``provstream rebuild``: ``provstream replay --bulk`` (see docs/replay.md).

Rebuilds an empty database of the local stack from the triples topic with
Neo4j's offline importer (the server is stopped for the import and started
again), then commits the sink group's offsets to exactly what was imported.
The sink must be stopped; ``--force`` replaces a database that is not empty.
"""

from __future__ import annotations

import argparse
from typing import Any

from provstream.cli.commands.replay import add_bulk_options, run_bulk
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("rebuild", help="bulk-rebuild an empty database from the triples topic",
                                   description=__doc__)
    add_bulk_options(parser, with_flag=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    return run_bulk(args, settings)
