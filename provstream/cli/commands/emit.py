"""``provstream emit --jsonl FILE``: import recorded agent/RAG runs as live sessions.

The whole file is checked first (parsed and every step validated and encoded,
nothing sent), so a bad line stops the import before any session is recorded;
the message names the line. Then each run is emitted step by step and its
session URI printed on its own line, in input order. If the reader of the
output goes away (``provstream emit ... | head -1``) the import still runs to
the end, silently. The command flushes at the end and exits non-zero if Kafka
is unreachable or any step was not delivered.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from provstream.cli.options import add_scope, scope
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import KafkaTransport, MemoryTransport
from provstream.core.trajectories import load, replay
from provstream.errors import InvalidInput, InvalidStep
from provstream.progress import Progress, Ticker
from provstream.settings import Settings


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("emit", help="emit recorded agent/RAG runs (JSON lines) as live sessions",
                                   description=__doc__)
    parser.add_argument("--jsonl", required=True, type=Path, metavar="FILE",
                        help="one run per line (ReAct trajectory, docrag or graphrag record)")
    add_scope(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    user, collection = scope(args, settings)
    settings = replace(settings, user=user, collection=collection)
    total = check(args.jsonl, settings)
    emitter = Emitter(settings)
    bar = Progress("emit", unit="runs")
    try:
        transport = emitter.transport
        if isinstance(transport, KafkaTransport):
            transport.wait_connected(settings.emit_block_ms / 1000 + 5)
        printing = True
        for n, (_, record) in enumerate(load(args.jsonl), start=1):
            uri = replay(emitter, record)
            printing = printing and print_line(uri)
            bar.update(n, total)
        with Ticker(f"emit: waiting for Kafka at {settings.kafka_bootstrap} to acknowledge every step"):
            emitter.flush()
    finally:
        bar.finish()
        emitter.close()
    return 0


def print_line(text: str) -> bool:
    """Print ``text``; ``False`` once the reader has gone, with stdout then sent to /dev/null."""
    try:
        print(text, flush=True)
        return True
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return False


def check(path: Path, settings: Settings) -> int:
    """Dry run of the whole file (nothing sent); :class:`InvalidInput` naming the first bad line."""
    count = 0
    with Emitter(settings, transport=MemoryTransport()) as dry:
        for number, record in load(path):
            try:
                replay(dry, record)
            except InvalidStep as exc:
                raise InvalidInput(f"{path}:{number}: {exc}") from exc
            dry.transport.sent.clear()  # type: ignore[attr-defined]
            count += 1
    if count == 0:
        print(f"provstream: {path} has no runs", file=sys.stderr)
    return count
