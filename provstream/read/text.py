"""Small text helpers shared by the renderers: times, truncation, wrapping, visible control characters."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

MIN_WIDTH = 40


def parse_time(value: str | datetime | None) -> datetime | None:
    """An ``xsd:dateTime`` lexical form (or a datetime) as an aware UTC datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def format_time(value: str | datetime | None) -> str:
    moment = parse_time(value)
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "-"


def iso_time(value: str | datetime | None) -> str | None:
    moment = parse_time(value)
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def truncate(text: str, width: int) -> str:
    """One line of at most ``width`` characters, with an ellipsis when cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(width - 1, 0)] + "…"


def wrap_field(label: str, text: str, width: int, indent: str = "", label_width: int = 12) -> list[str]:
    """``label`` then ``text`` wrapped to ``width``; continuation lines aligned under the text.

    Line breaks inside ``text`` are kept (JSON arguments stay pretty-printed).
    """
    width = max(width, MIN_WIDTH)
    head = f"{indent}{label:<{label_width}} "
    pad = " " * len(head)
    lines: list[str] = []
    for i, paragraph in enumerate(text.splitlines() or [""]):
        first = head if i == 0 else pad
        if not paragraph.strip():
            lines.append(first.rstrip())
            continue
        lead = len(paragraph) - len(paragraph.lstrip())
        lines += textwrap.wrap(paragraph.strip(), width=width, initial_indent=first + " " * lead,
                               subsequent_indent=pad + " " * lead, break_on_hyphens=False) or [first.rstrip()]
    return lines


def wrap_text(text: str, width: int, indent: str = "") -> list[str]:
    width = max(width, MIN_WIDTH)
    return textwrap.wrap(" ".join(text.split()), width=width, initial_indent=indent, subsequent_indent=indent) or []


def _visible_table() -> dict[int, str]:
    # \\uXXXX: visible on a terminal, and still the same character inside a JSON, Turtle or N-Quads string
    controls = [c for c in [*range(0x20), *range(0x7F, 0xA0)] if c not in (0x09, 0x0A)]
    # bidirectional overrides and isolates reorder what a terminal shows
    bidi = [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
    return {c: f"\\u{c:04x}" for c in [*controls, *bidi]}


VISIBLE = _visible_table()


def visible(text: str) -> str:
    """``text`` with every control character written out (``ESC`` as ``\\u001b``); newlines and tabs kept.

    Recorded texts (questions, thoughts, tool observations from web pages)
    are untrusted: printed raw, an escape sequence in them would clear or
    recolour the reader's terminal.

    :param text: any text.
    :returns: the text, safe to print on a terminal.

    Example: ``visible("x \\x1b[2J")`` is ``"x \\\\u001b[2J"`` (printed: ``x \\u001b[2J``).
    """
    return text.translate(VISIBLE)


class VisibleWriter:
    """A text stream writing :func:`visible` text to the one it wraps (other attributes are the wrapped one's).

    :param stream: the stream to wrap, e.g. ``sys.stdout``.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(text.translate(VISIBLE))

    @property
    def raw(self) -> TextIO:
        """The wrapped stream, for text already made visible that adds its own escapes (colours)."""
        return self._stream

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)
