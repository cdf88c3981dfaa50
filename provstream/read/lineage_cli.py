"""Glue for ``tg-show-explain-trace --lineage``: check the options, read the lineage, add it to the output."""

from __future__ import annotations

import argparse

from provstream.connectors.neo4j.store import Neo4jStore
from provstream.errors import ProvstreamError
from provstream.read.asof import AsOf
from provstream.read.lineage import with_lineage
from provstream.read.model import Trace
from provstream.settings import Settings


def check_lineage_args(args: argparse.Namespace, moment: AsOf | None) -> None:
    """:raises ProvstreamError: ``--lineage`` with a picture format, ``--follow`` or ``--as-of``."""
    if not getattr(args, "lineage", False):
        return
    if args.format not in ("text", "json"):
        raise ProvstreamError("--lineage is printed with --format text or json")
    if args.follow or moment is not None:
        raise ProvstreamError("--lineage shows the live graph's offsets; it cannot be combined with --follow or "
                              "--as-of / --as-of-offset")


def add_lineage(rendered: str, args: argparse.Namespace, settings: Settings, trace: Trace, user: str,
                collection: str) -> str:
    """``rendered`` with the trace's offset lineage (read from Neo4j) added."""
    with Neo4jStore(settings) as store:
        lineage = store.lineage(trace.question.iri, user=user, collection=collection)
    return with_lineage(rendered, args.format, trace, lineage, events_topic=settings.events_topic,
                        triples_topic=settings.triples_topic)
