"""``provstream export (URI | --all)``: a trace, or a whole scope, out of Neo4j as RDF or PROV.

Turtle, TriG, N-Quads and JSON-LD (TriG / N-Quads / JSON-LD in the named graph
``urn:graph:retrieval``) parse back to the stored graph; PROV-N and PROV-JSON
go through the ``prov`` package. ``--strict-prov`` writes the mapping of
docs/export.md that passes the PROV constraints. An agent trace comes with
the sub-traces its steps called (``--no-subtraces`` leaves them out);
``--as-of`` / ``--as-of-offset`` export the trace as the graph held it then.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from provstream.cli.options import add_scope, scope
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core.triples import Triple
from provstream.errors import ProvstreamError
from provstream.progress import Ticker
from provstream.read.asof import AsOf, add_as_of, moment_of, trace_sources
from provstream.read.collect import trace_with_subtraces
from provstream.read.export import FORMATS, export
from provstream.read.lineage import lineage_triples
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
    parser.add_argument("--no-subtraces", action="store_true",
                        help="leave out the sub-traces an agent trace's steps called (inlined by default)")
    parser.add_argument("--with-lineage", action="store_true",
                        help="add each node's Kafka offsets as PROV statements in the named graph "
                        "urn:graph:provstream:lineage (trig, nquads, jsonld)")
    add_as_of(parser)
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="write to FILE instead of stdout")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    user, collection = scope(args, settings)
    moment = moment_of(args)
    triples: set[Triple]
    inlined: list[str] = []
    if args.all and moment is not None:
        raise ProvstreamError("--as-of / --as-of-offset export one trace (a URI), not --all")
    what = f"user {user!r} collection {collection!r}" if args.all else args.uri
    if args.all:
        with Neo4jStore(settings) as store, Ticker(f"export: reading {what} from Neo4j"):
            triples = store.scope_triples(user=user, collection=collection)
    else:
        with trace_sources(settings, moment) as (source, reader), Ticker(f"export: reading {what}"):
            triples, inlined = trace_with_subtraces(source, reader, args.uri, user=user, collection=collection,
                                                    subtraces=not args.no_subtraces)
    lineage = _lineage(args, settings, user, collection, moment, [] if args.all else [args.uri, *inlined])
    with Ticker(f"export: writing {len(triples)} triples as {args.format}"):
        text = export(triples, args.format, strict=args.strict_prov, lineage=lineage)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ProvstreamError(f"cannot write {args.output}: {exc}") from exc
    return 0


def _lineage(args: argparse.Namespace, settings: Settings, user: str, collection: str, moment: AsOf | None,
             questions: list[str]) -> set[Triple]:
    if not args.with_lineage:
        return set()
    if moment is not None or args.all:
        raise ProvstreamError("--with-lineage exports the live graph's offsets of one trace: not with --all or --as-of")
    found: dict[str, Any] = {}
    with Neo4jStore(settings) as store:
        for question in questions:
            found.update(store.lineage(question, user=user, collection=collection))
    return lineage_triples(found, events_topic=settings.events_topic, triples_topic=settings.triples_topic)
