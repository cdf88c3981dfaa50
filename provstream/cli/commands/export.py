"""``provstream export (URI | --all)``: a trace, or a whole scope, out of Neo4j as RDF or PROV.

Turtle, TriG, N-Quads and JSON-LD (TriG / N-Quads / JSON-LD in the named graph
``urn:graph:retrieval``) parse back to the stored graph; PROV-N and PROV-JSON
go through the ``prov`` package. ``--strict-prov`` writes the mapping of
docs/export.md that passes the PROV constraints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from provstream.cli.options import add_scope, scope
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.errors import ProvstreamError
from provstream.progress import Ticker
from provstream.read.export import FORMATS, export
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("export", help="export a trace or a whole scope as RDF / PROV",
                                   description=__doc__)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("uri", nargs="?", metavar="URI", help="question IRI of the trace")
    target.add_argument("--all", action="store_true", help="every trace of the user and collection")
    add_scope(parser)
    parser.add_argument("--format", required=True, choices=FORMATS)
    parser.add_argument("--strict-prov", action="store_true",
                        help="map derivations from activities so the output passes the PROV constraints")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="write to FILE instead of stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    user, collection = scope(args, settings)
    what = f"user {user!r} collection {collection!r}" if args.all else args.uri
    with Neo4jStore(settings) as store, Ticker(f"export: reading {what} from Neo4j"):
        if args.all:
            triples = store.scope_triples(user=user, collection=collection)
        else:
            triples = store.trace_triples(args.uri, user=user, collection=collection)
    with Ticker(f"export: writing {len(triples)} triples as {args.format}"):
        text = export(triples, args.format, strict=args.strict_prov)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ProvstreamError(f"cannot write {args.output}: {exc}") from exc
    return 0
