"""The one error wrapper every entry point runs behind.

Settings are read from the environment here, once, at the edge. A project
error (:class:`ProvstreamError`, bad settings included) becomes one line on
stderr, ``<prog>: <message>``, and exit status 1; Ctrl-C exits 130 quietly.
Everything a command prints on stdout, and the error line, goes through
:func:`~provstream.read.text.visible`: a control character in recorded text
(``ESC[2J`` in a question or a tool observation) is shown, not obeyed.

Example::

    def main(argv=None) -> int:
        return guarded("tg-list-explain-traces", list_command, list_parser().parse_args(argv))
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from provstream.errors import ProvstreamError
from provstream.read.text import VisibleWriter, visible
from provstream.settings import Settings

Command = Callable[[argparse.Namespace, Settings], "int | None"]


def one_line(text: str) -> str:
    """``text`` with every run of white space (newlines included) folded to one space, control characters shown."""
    return visible(" ".join(text.split()))


def guarded(prog: str, command: Command, args: argparse.Namespace) -> int:
    """Run ``command(args, settings)``; its return value (``None`` = 0) is the exit status.

    :param prog: the program name that prefixes an error line.
    :param command: the command; it may raise :class:`ProvstreamError`.
    :param args: the parsed arguments.
    :returns: the exit status: the command's, 1 after a project error, 130 on Ctrl-C.
    """
    stdout = sys.stdout
    if not isinstance(stdout, VisibleWriter):
        sys.stdout = VisibleWriter(stdout)  # type: ignore[assignment]
    try:
        return int(command(args, Settings.from_env()) or 0)
    except ProvstreamError as exc:
        print(f"{prog}: {one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        sys.stdout = stdout
