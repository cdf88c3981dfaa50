"""``tg-list-explain-traces`` and ``tg-show-explain-trace``: the seed-compatible read commands.

Settings are read from the environment here, once; project errors become one
line on stderr and exit status 1; Ctrl-C while following exits 0.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence

from provstream.cli.guard import guarded
from provstream.connectors.neo4j.reader import TraceReader
from provstream.core import vocab as v
from provstream.errors import ProvstreamError, TraceNotFound
from provstream.read.asof import add_as_of, moment_of, trace_sources
from provstream.read.follow import follow
from provstream.read.formats import SHOW_FORMATS, render
from provstream.read.lineage_cli import add_lineage, check_lineage_args
from provstream.read.listing import EMPTY, render_table, rows_json
from provstream.read.live import TriplesTail
from provstream.read.loader import load_trace
from provstream.read.model import Trace
from provstream.settings import Settings


def terminal_width() -> int:
    return shutil.get_terminal_size((100, 24)).columns


def add_scope(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-U", "--user", default=None, help="user (default: trustgraph)")
    parser.add_argument("-C", "--collection", default=None, help="collection (default: default)")


def scope(args: argparse.Namespace, settings: Settings) -> tuple[str, str]:
    return args.user or settings.user, args.collection or settings.collection


# -- list ---------------------------------------------------------------------

def list_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tg-list-explain-traces",
                                     description="List recorded traces of a user and collection, newest first.")
    add_scope(parser)
    parser.add_argument("--limit", type=int, default=50, help="at most N sessions (default 50)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    return parser


def list_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit < 1:
        raise ProvstreamError("--limit must be at least 1")
    user, collection = scope(args, settings)
    with TraceReader(settings) as reader:
        rows = reader.list_traces(user=user, collection=collection, limit=args.limit)
    if args.format == "json":
        sys.stdout.write(rows_json(rows))
    elif not rows:
        print(EMPTY.format(user=user, collection=collection))
    else:
        sys.stdout.write(render_table(rows, terminal_width()))
    return 0


def list_main(argv: Sequence[str] | None = None) -> int:
    return guarded("tg-list-explain-traces", list_command, list_parser().parse_args(argv))


# -- show ---------------------------------------------------------------------

def show_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tg-show-explain-trace",
                                     description="Show one trace: question, every step, the answer.")
    parser.add_argument("uri", metavar="URI", help="the question IRI, e.g. urn:trustgraph:agent:<session>, or the IRI "
                        "of one of its steps (e.g. .../i3, as Neo4j Browser and --format json show them): "
                        "the trace is shown with that step marked")
    add_scope(parser)
    parser.add_argument("--format", choices=SHOW_FORMATS, default="text",
                        help="text, json, or a picture: mermaid, dot, html (one self-contained page)")
    parser.add_argument("--follow", action="store_true", help="then print this trace's new steps live (Ctrl-C stops)")
    parser.add_argument("--lineage", action="store_true", help="also print where each step came from: the "
                        "events-topic and triples-topic partition:offset (text and json)")
    add_as_of(parser)
    return parser


def show_command(args: argparse.Namespace, settings: Settings) -> int:
    check_lineage_args(args, moment_of(args))
    if args.follow and moment_of(args) is not None:
        raise ProvstreamError("--follow shows the trace live; it cannot be combined with --as-of / --as-of-offset")
    if not args.follow:
        _show(args, settings, waiting_ok=False)
        return 0
    with TriplesTail(settings) as tail:  # positioned before reading Neo4j: no step falls in between
        trace = _show(args, settings, waiting_ok=True)
        print(f"following {args.uri} live; Ctrl-C to stop", file=sys.stderr, flush=True)
        user, collection = scope(args, settings)
        known = [v.subtrace_question_iri(iri) for iri, _ in getattr(trace, "subtraces", ())]
        return follow(tail, sys.stdout, user=user, collection=collection, question=question_of(args.uri)[0],
                      subtraces=[q for q in known if q is not None], width=terminal_width())


def _show(args: argparse.Namespace, settings: Settings, *, waiting_ok: bool) -> Trace | None:
    """Print the trace; return it (``None`` if not recorded yet and ``waiting_ok``)."""
    user, collection = scope(args, settings)
    question, mark = question_of(args.uri)
    try:
        with trace_sources(settings, moment_of(args)) as (store, reader):
            trace = load_trace(store, reader, question, user=user, collection=collection)
    except TraceNotFound:
        if not waiting_ok:
            raise
        print(f"{args.uri} is not recorded yet for user {user!r} in collection {collection!r}; waiting",
              file=sys.stderr)
        return None
    text = render(trace, args.format, width=terminal_width(), mark=mark)
    sys.stdout.write(add_lineage(text, args, settings, trace, user, collection) if args.lineage else text)
    sys.stdout.flush()
    return trace


def question_of(uri: str) -> tuple[str, str | None]:
    """The question IRI to load for ``uri`` and the step to mark (``None`` for a question IRI).

    :raises ProvstreamError: ``uri`` is neither a question IRI nor a step IRI.
    """
    if v.parse_question_iri(uri) is not None:
        return uri, None
    step = v.parse_step_iri(uri)
    if step is None:
        raise ProvstreamError(f"{uri!r} is not a trace or step IRI (a trace is urn:trustgraph:agent:<session>, "
                              "urn:trustgraph:docrag:<session> or urn:trustgraph:question:<session>; "
                              "tg-list-explain-traces lists them)")
    return step

def show_main(argv: Sequence[str] | None = None) -> int:
    return guarded("tg-show-explain-trace", show_command, show_parser().parse_args(argv))
