"""``provstream follow [URI]``: print every step of a user and collection live, as it reaches the triples topic.

With ``URI`` (a trace's question IRI), only that trace's steps, and under the
step that called it each sub-trace's steps (a RAG session or another agent),
indented, as they arrive.

A consumer without a consumer group (nothing committed); starts at the end of
the topic unless ``--from-beginning``; runs until Ctrl-C (exit 0).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from provstream.cli.options import add_scope, scope
from provstream.cli.read import question_of, terminal_width
from provstream.read.follow import follow
from provstream.read.live import TriplesTail
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("follow", help="print steps live as they happen", description=__doc__)
    parser.add_argument("uri", nargs="?", metavar="URI",
                        help="follow only this trace (question IRI) and the sub-traces its steps call")
    add_scope(parser)
    parser.add_argument("--from-beginning", action="store_true", help="start at the oldest step kept")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    user, collection = scope(args, settings)
    question = None if args.uri is None else question_of(args.uri)[0]
    with TriplesTail(settings, from_beginning=args.from_beginning) as tail:
        what = settings.triples_topic if question is None else f"{question} and its sub-traces"
        print(f"following {what} for user {user!r} collection {collection!r}; Ctrl-C to stop",
              file=sys.stderr, flush=True)
        return follow(tail, sys.stdout, user=user, collection=collection, question=question, width=terminal_width())
