"""``provstream check``: sessions that need a look — open for longer than ``--older-than`` (default 10m),
and concluded sessions with missing steps. Exit status 1 when there is any (usable in monitoring and CI)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from provstream.cli.options import add_scope, scope
from provstream.cli.read import terminal_width
from provstream.connectors.neo4j.reader import TraceReader
from provstream.read.check import parse_age, problems, problems_json, problems_text
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("check", help="list stalled open sessions and sessions with missing steps "
                                   "(exit 1 when any)", description=__doc__)
    add_scope(parser)
    parser.add_argument("--older-than", default="10m", metavar="AGE",
                        help="report open sessions started longer ago than AGE (30s, 10m, 2h, 7d; default 10m)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    user, collection = scope(args, settings)
    older_than = parse_age(args.older_than)
    with TraceReader(settings) as reader:
        records = reader.unfinished(user=user, collection=collection)
    found = problems(records, now=datetime.now(UTC), older_than=older_than)
    sys.stdout.write(problems_json(found) if args.format == "json" else problems_text(found, terminal_width()))
    return 1 if found else 0
