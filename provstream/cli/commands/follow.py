"""``provstream follow``: print every step of a user and collection live, as it reaches the triples topic.

A consumer without a consumer group (nothing committed); starts at the end of
the topic unless ``--from-beginning``; runs until Ctrl-C (exit 0).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from provstream.cli.options import add_scope, scope
from provstream.cli.read import terminal_width
from provstream.read.follow import follow
from provstream.read.live import TriplesTail
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("follow", help="print steps live as they happen", description=__doc__)
    add_scope(parser)
    parser.add_argument("--from-beginning", action="store_true", help="start at the oldest step kept")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    user, collection = scope(args, settings)
    with TriplesTail(settings, from_beginning=args.from_beginning) as tail:
        print(f"following {settings.triples_topic} for user {user!r} collection {collection!r}; Ctrl-C to stop",
              file=sys.stderr, flush=True)
        return follow(tail, sys.stdout, user=user, collection=collection, width=terminal_width())
