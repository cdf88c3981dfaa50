"""``provstream`` command line: one subcommand module per verb.

Each module in :mod:`provstream.commands` exposes ``register(subparsers)``, which adds
its parser and sets ``func(args, settings) -> int``. Settings are read from
the environment here, once, at the edge.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from collections.abc import Sequence

from provstream.cli import commands
from provstream.cli.guard import guarded
from provstream.cli.options import finish


def command_modules() -> list[str]:
    """Every module of :mod:`provstream.commands`, in name order."""
    return [f"{commands.__name__}.{m.name}" for m in sorted(pkgutil.iter_modules(commands.__path__),
                                                             key=lambda m: m.name)]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="provstream", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in command_modules():
        importlib.import_module(name).register(sub)
    return finish(parser)


def run(func_args: argparse.Namespace) -> int:
    """Run a parsed command behind :func:`~provstream.cli.guard.guarded` (one line and exit 1 on an error)."""
    return guarded("provstream", func_args.func, func_args)


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))
