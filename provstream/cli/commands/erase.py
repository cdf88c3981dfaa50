"""``provstream erase -U user [-C collection] [--session URI]``: the right to be forgotten (docs/security.md).

Tombstones the scope's data keys in the keys topic (with ``PROVSTREAM_ENCRYPT=1``
the sealed fields then replay as ``[erased]``), deletes the sessions from
Neo4j at once, and sends a retraction record per session on the triples
topic for live consumers. Prints one summary line.
"""

from __future__ import annotations

import argparse
from typing import Any

from provstream.erase import erase, session_of
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("erase", help="erase a user's traces (Neo4j now, every later replay)",
                                   description=__doc__)
    parser.add_argument("-U", "--user", required=True, help="whose traces")
    parser.add_argument("-C", "--collection", help="only this collection (default: all of the user's)")
    parser.add_argument("--session", metavar="URI", help="only this session (its question IRI or id)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    session = session_of(args.session) if args.session else None
    print(erase(settings, args.user, args.collection, session).summary())
    return 0
