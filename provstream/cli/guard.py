"""The one error wrapper every entry point runs behind.

Settings are read from the environment here, once, at the edge. A project
error (:class:`ProvstreamError`, bad settings included) becomes one line on
stderr, ``<prog>: <message>``, and exit status 1; Ctrl-C exits 130 quietly.

Example::

    def main(argv=None) -> int:
        return guarded("tg-list-explain-traces", list_command, list_parser().parse_args(argv))
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from provstream.errors import ProvstreamError
from provstream.settings import Settings

Command = Callable[[argparse.Namespace, Settings], "int | None"]


def one_line(text: str) -> str:
    """``text`` with every run of white space (newlines included) folded to one space."""
    return " ".join(text.split())


def guarded(prog: str, command: Command, args: argparse.Namespace) -> int:
    """Run ``command(args, settings)``; its return value (``None`` = 0) is the exit status.

    :param prog: the program name that prefixes an error line.
    :param command: the command; it may raise :class:`ProvstreamError`.
    :param args: the parsed arguments.
    :returns: the exit status: the command's, 1 after a project error, 130 on Ctrl-C.
    """
    try:
        return int(command(args, Settings.from_env()) or 0)
    except ProvstreamError as exc:
        print(f"{prog}: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
