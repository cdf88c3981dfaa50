"""``provstream`` command line: one subcommand module per verb.

Each module in :data:`COMMANDS` exposes ``register(subparsers)``, which adds
its parser and sets ``func(args, settings) -> int``. Settings are read from
the environment here, once, at the edge.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from provstream.errors import ProvstreamError
from provstream.settings import Settings

COMMANDS = (
    "provstream.commands.stack",
    "provstream.commands.emit",
    "provstream.commands.worker",
    "provstream.commands.sink",
    "provstream.commands.replay",
    "provstream.commands.export",
    "provstream.commands.follow",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="provstream", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def run(func_args: argparse.Namespace) -> int:
    """Run a parsed command; project errors become a one-line message and exit 1."""
    try:
        return int(func_args.func(func_args, Settings.from_env()) or 0)
    except ProvstreamError as exc:
        print(f"provstream: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))
