"""Options every command shares: the scope (``-U`` / ``-C``), ``--version``, and help text without markup.

Example::

    parser = argparse.ArgumentParser(prog="tg-list-explain-traces", description=__doc__)
    add_scope(parser)
    finish(parser)                      # --version everywhere, docstring markup removed from --help
    user, collection = scope(parser.parse_args(), settings)
"""

from __future__ import annotations

import argparse
import re
from importlib import metadata

from provstream.errors import ConfigError
from provstream.settings import Settings

_ROLE = re.compile(r":[a-z]+:`~?([^`<]*?)(?:\s*<[^`>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``", re.DOTALL)


def plain(text: str | None) -> str | None:
    """Docstring text as a terminal shows it: reST roles and literals without their markup.

    :param text: help text written as a docstring (``None`` passes through).
    :returns: the text, ``:class:`~a.b.C``` as ``C``, ``:mod:`x.y``` as ``x.y``, ````--all```` as ``--all``.

    Example: ``plain("see :func:`~provstream.read.follow.follow` and ``--all``")`` is
    ``"see follow and --all"``.
    """
    if text is None:
        return None
    text = _ROLE.sub(lambda m: _last(m.group(0), m.group(1)), text)
    return _LITERAL.sub(r"\1", text)


def _last(role: str, name: str) -> str:
    """The name a role shows: its last component with ``~``, else the whole target."""
    return name.rsplit(".", 1)[-1] if "`~" in role else name


def version() -> str:
    """The installed provstream version (``0+unknown`` when not installed as a distribution)."""
    try:
        return metadata.version("provstream")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def finish(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Give ``parser`` and every sub-command parser ``--version`` and markup-free help; returns ``parser``.

    :param parser: a fully built parser (sub-commands registered).
    :returns: the same parser.
    """
    parser.description = plain(parser.description)
    parser.epilog = plain(parser.epilog)
    if "--version" not in parser._option_string_actions:
        parser.add_argument("--version", action="version", version=f"%(prog)s {version()}",
                            help="print the provstream version and exit")
    for action in parser._actions:
        action.help = plain(action.help) if isinstance(action.help, str) else action.help
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                choice.help = plain(choice.help) if isinstance(choice.help, str) else choice.help
            for sub in set(action.choices.values()):
                finish(sub)
    return parser


def add_scope(parser: argparse.ArgumentParser, what: str = "") -> None:
    """``-U/--user`` and ``-C/--collection`` (defaults from the settings: ``trustgraph`` / ``default``)."""
    parser.add_argument("-U", "--user", default=None, help=f"user{what} (default: trustgraph)")
    parser.add_argument("-C", "--collection", default=None, help=f"collection{what} (default: default)")


def scope(args: argparse.Namespace, settings: Settings) -> tuple[str, str]:
    """The ``(user, collection)`` of ``args``, the settings' where not given.

    :raises ConfigError: ``-U ""`` or ``-C ""`` (an empty scope is refused, not read as the default).

    Example: with ``-C demo`` and default settings, ``("trustgraph", "demo")``.
    """
    for flag, value in (("-U/--user", args.user), ("-C/--collection", args.collection)):
        if value is not None and not value.strip():
            raise ConfigError(f"{flag} must not be empty (leave it out for the default, "
                              f"{settings.user if flag.startswith('-U') else settings.collection!r})")
    return args.user or settings.user, args.collection or settings.collection
