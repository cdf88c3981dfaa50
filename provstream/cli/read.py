"""``tg-list-explain-traces`` and ``tg-show-explain-trace``: the seed-compatible read commands.

Settings are read from the environment here, once; project errors become one
line on stderr and exit status 1; Ctrl-C while following exits 0.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from urllib.parse import quote, urlencode

from provstream.cli.guard import guarded
from provstream.cli.options import add_scope, finish, scope
from provstream.connectors.neo4j.reader import TraceReader
from provstream.core import vocab as v
from provstream.errors import ConfigError, ProvstreamError, TraceNotFound
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


# -- list ---------------------------------------------------------------------

STATUSES = ("complete", "open", "incomplete")
TYPES = {m.label.lower(): m for m in v.Mechanism}  # agent, graphrag, docrag

def list_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tg-list-explain-traces",
                                     description="List recorded traces of a user and collection, newest first.")
    add_scope(parser)
    parser.add_argument("--limit", type=int, default=50, help="at most N sessions (default 50)")
    parser.add_argument("--status", choices=STATUSES, help="only traces with this status")
    parser.add_argument("--type", choices=sorted(TYPES), type=str.lower,
                        help="only traces of this type (a type's sub-traces are then listed on their own too)")
    parser.add_argument("--since", metavar="WHEN", help="only traces started since WHEN: an ISO 8601 date or time "
                        "(UTC unless it names a zone, e.g. 2026-12-01 or 2026-12-01T09:30) or a duration ago "
                        "(30m, 2h, 7d)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    return parser


def list_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.limit < 1:
        raise ProvstreamError("--limit must be at least 1")
    user, collection = scope(args, settings)
    since = None if args.since is None else parse_since(args.since)
    with TraceReader(settings) as reader:
        rows = reader.list_traces(user=user, collection=collection, limit=args.limit, status=args.status,
                                  mechanism=None if args.type is None else TYPES[args.type], since=since)
    if args.format == "json":
        sys.stdout.write(rows_json(rows))
        return 0
    if not rows:
        print(EMPTY.format(user=user, collection=collection) if args.status is args.type is args.since is None
              else f"No traces match these filters for user {user!r} in collection {collection!r}.")
    else:
        sys.stdout.write(render_table(rows, terminal_width()))
        print(f"\nNeo4j Browser: {browser_link(settings, user, collection)}")
    return 0


def browser_link(settings: Settings, user: str, collection: str) -> str:
    """A Neo4j Browser URL that connects to the stack and puts this scope's listing query in the editor.

    :returns: ``<PROVSTREAM_NEO4J_HTTP>/browser/?dbms=<bolt>&db=<database>&cmd=edit&arg=<Cypher>``
        (Neo4j Browser's URL parameters: the connection frame filled in, the query in the editor).
    """
    query = (f"MATCH (q:Question) WHERE q.user = {json.dumps(user)} AND q.collection = {json.dumps(collection)}\n"
             "RETURN q ORDER BY q.startedAtTime DESC LIMIT 25")
    params = urlencode({"dbms": settings.neo4j_uri, "db": settings.neo4j_database, "cmd": "edit", "arg": query},
                       quote_via=quote)
    return f"{settings.neo4j_http.rstrip('/')}/browser/?{params}"


def parse_since(text: str) -> datetime:
    """``--since``: an ISO 8601 date or time (UTC unless zoned) or a duration ago (``30m``, ``2h``, ``7d``).

    :raises ConfigError: anything else, in one line.

    Example: ``parse_since("2026-12-01")`` is midnight UTC on 1 December 2026.
    """
    ago = re.fullmatch(r"\s*(\d+)\s*([smhdw])\s*", text)
    if ago:
        seconds = int(ago[1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[ago[2]]
        return datetime.now(UTC) - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"--since {text!r}: give an ISO 8601 date or time (2026-12-01, 2026-12-01T09:30Z) "
                          "or a duration ago (30m, 2h, 7d)") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def list_main(argv: Sequence[str] | None = None) -> int:
    return guarded("tg-list-explain-traces", list_command, finish(list_parser()).parse_args(argv))


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
    return guarded("tg-show-explain-trace", show_command, finish(show_parser()).parse_args(argv))
