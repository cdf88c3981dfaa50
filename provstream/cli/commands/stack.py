"""``provstream stack up|down|status``: the local Kafka + Neo4j + worker + sink."""

from __future__ import annotations

import argparse

from provstream import stack
from provstream.settings import Settings


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("stack", help="start, stop or inspect the local stack")
    p.add_argument("action", choices=("up", "down", "status"))
    p.add_argument("--servers-only", action="store_true",
                   help="up: start Kafka and Neo4j only (no worker, no sink)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.action == "up":
        stack.up(settings, apps=not args.servers_only)
        return 0
    if args.action == "down":
        stack.down(settings)
        return 0
    lines, healthy = stack.status(settings)
    print("\n".join(lines))
    return 0 if healthy else 3
