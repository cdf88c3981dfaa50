"""Small text helpers shared by the renderers: times, truncation, wrapping."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime

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
