"""``provstream diff URI_A URI_B``: two runs side by side, and where they first diverge.

Steps are aligned by position; a pair matches when it has the same action and
arguments, and is the same when its observation and thought are equal too.
Exit status 0 when the runs are equivalent (same question, steps and answer),
1 when they differ: usable in CI to catch an agent regression. Text is
coloured on a terminal (``NO_COLOR`` turns it off); ``--format json`` and
``--format mermaid`` for tools and pages.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from provstream.cli.options import add_scope, scope
from provstream.cli.read import question_of, terminal_width
from provstream.connectors.neo4j.reader import TraceReader
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.read.diff import compare, diff_json, diff_mermaid, diff_text
from provstream.read.loader import load_trace
from provstream.read.text import VisibleWriter
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("diff", help="compare two traces step by step (exit 1 when they differ)",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("uri_a", metavar="URI_A", help="question IRI of the first run (the reference)")
    parser.add_argument("uri_b", metavar="URI_B", help="question IRI of the second run")
    add_scope(parser)
    parser.add_argument("--format", choices=("text", "json", "mermaid"), default="text")
    parser.add_argument("--ignore-thoughts", action="store_true",
                        help="do not compare the agents' thoughts (only actions, arguments, observations, answers)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    user, collection = scope(args, settings)
    qa, qb = question_of(args.uri_a)[0], question_of(args.uri_b)[0]
    with Neo4jStore(settings) as store, TraceReader(settings) as reader:
        a = load_trace(store, reader, qa, user=user, collection=collection)
        b = load_trace(store, reader, qb, user=user, collection=collection)
    d = compare(a, b, ignore_thoughts=args.ignore_thoughts)
    if args.format == "json":
        sys.stdout.write(json.dumps(diff_json(d), indent=2, ensure_ascii=False) + "\n")
    elif args.format == "mermaid":
        sys.stdout.write(diff_mermaid(d))
    else:
        out = sys.stdout
        colour = out.isatty() and not os.environ.get("NO_COLOR")
        raw = out.raw if isinstance(out, VisibleWriter) else out  # diff_text made the recorded text visible
        raw.write(diff_text(d, terminal_width(), colour=colour))
        raw.flush()
    return 0 if d.equivalent else 1
