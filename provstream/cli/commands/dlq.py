"""``provstream dlq [events|triples]``: the dead-letter topics, with the reason of every record.

Without a topic: how many records each dead-letter topic holds and their most
frequent reasons. With one: its records (the last ``--limit``, or from
``--from-offset``), each with where it sits, where it was read from
(``provstream.source.*``), its session when the value still decodes, and the
reason (``provstream.error``). Dead letters are the operator's view: every
scope is shown unless ``-U`` / ``-C`` restrict it to the records whose value
names that user / collection.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from provstream.errors import ProvstreamError
from provstream.read import dlq
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("dlq", help="list and inspect the dead-letter topics, with reasons",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("topic", nargs="?", choices=("events", "triples"),
                        help="show this dead-letter topic's records (default: a summary of both)")
    parser.add_argument("--limit", type=int, default=20, help="at most N records (default 20; the last ones "
                        "unless --from-offset)")
    parser.add_argument("--from-offset", type=int, metavar="N", help="records from offset N on (every partition)")
    parser.add_argument("-U", "--user", default=None, help="only records of this user (default: every user)")
    parser.add_argument("-C", "--collection", default=None,
                        help="only records of this collection (default: every collection)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    for flag, value in (("-U/--user", args.user), ("-C/--collection", args.collection)):
        if value is not None and not value.strip():
            raise ProvstreamError(f"{flag} must not be empty (leave it out for every scope)")
    if args.limit < 1:
        raise ProvstreamError("--limit must be at least 1")
    if args.from_offset is not None and args.from_offset < 0:
        raise ProvstreamError("--from-offset must be 0 or more")

    def keep(letter: dlq.DeadLetter) -> bool:
        return (args.user is None or letter.user == args.user) and \
            (args.collection is None or letter.collection == args.collection)

    filtered = args.user is not None or args.collection is not None
    if args.topic is None:
        summaries = dlq.summary(settings, [settings.events_dlq_topic, settings.triples_dlq_topic],
                                keep=keep if filtered else None)
        sys.stdout.write(dlq.summary_json(summaries) if args.format == "json" else dlq.render_summary(summaries))
        return 0
    topic = settings.events_dlq_topic if args.topic == "events" else settings.triples_dlq_topic
    if args.from_offset is None:
        letters = [x for x in dlq.read_dead_letters(settings, topic) if keep(x)][-args.limit:]
    else:
        letters = [x for x in dlq.read_dead_letters(settings, topic, from_offset=args.from_offset)
                   if keep(x)][:args.limit]
    sys.stdout.write(dlq.letters_json(letters) if args.format == "json" else dlq.render_letters(letters))
    return 0
