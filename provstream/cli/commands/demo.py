"""``provstream demo``: stream the bundled demo sessions live (see :mod:`provstream.agent.demo`).

Emits the 12 ReAct trajectories, the DocRAG and GraphRAG sessions and one
agent run, printing a progress line per session. With ``--wait`` it then waits
until every session is complete in Neo4j. ``--uris-out FILE`` writes the
session URIs, one per line, in the order emitted (the ``tg-invoke-agent`` run
and its DocRAG sub-trace last).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from provstream.agent.demo import DEFAULT_DATA, DEFAULT_DELAY, run_demo, wait_for_sessions
from provstream.cli.options import add_scope, scope
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("demo", help="stream the bundled demo sessions live", description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", type=float, default=DEFAULT_DELAY, metavar="SECONDS",
                        help=f"pause before each step (default: {DEFAULT_DELAY})")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, metavar="DIR",
                        help="a data folder holding react/hotpot_fever.jsonl (default: the bundled provstream/data)")
    add_scope(parser)
    parser.add_argument("--wait", action="store_true", help="then wait until every session is complete in Neo4j")
    parser.add_argument("--timeout", type=float, default=180.0, metavar="SECONDS",
                        help="how long --wait waits (default: 180)")
    parser.add_argument("--uris-out", type=Path, metavar="FILE", help="write the session URIs here, one per line")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from provstream.connectors.emitter import Emitter
    from provstream.connectors.transport import KafkaTransport

    user, collection = scope(args, settings)
    settings = replace(settings, user=user, collection=collection)
    with Emitter(settings) as emitter:
        if isinstance(emitter.transport, KafkaTransport):
            emitter.transport.wait_connected(settings.emit_block_ms / 1000)
        uris = run_demo(emitter, settings, data_dir=args.data, delay=max(args.delay, 0.0),
                        out=lambda line: print(line, flush=True))
        emitter.flush()
    print(f"{len(uris)} sessions on {settings.events_topic} (user {settings.user}, "
          f"collection {settings.collection})", flush=True)
    if args.uris_out:
        args.uris_out.write_text("".join(f"{u}\n" for u in uris), encoding="utf-8")
    if args.wait:
        wait_for_sessions(settings, uris, timeout=args.timeout, out=lambda line: print(line, flush=True))
    return 0
