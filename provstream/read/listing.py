"""Trace listing: rows from the listing query, as a table or JSON (pure)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from provstream.core.vocab import Mechanism, local_name
from provstream.read.model import UNKNOWN
from provstream.read.text import iso_time, parse_time, truncate

_TYPE_OF_LABEL = {local_name(m.question_type): m.label for m in Mechanism}
HEADERS = ("Session ID", "Type", "Question", "Time (UTC)", "Steps", "Status")
MIN_QUESTION = 30
EMPTY = "No traces for user {user!r} in collection {collection!r}."


@dataclass(frozen=True, slots=True)
class TraceRow:
    iri: str
    session_id: str
    type: str
    question: str
    time: datetime | None
    steps: int | None
    status: str
    subtraces: tuple[TraceRow, ...] = ()


def trace_type(labels: Iterable[str]) -> str:
    """``Agent`` / ``GraphRAG`` / ``DocRAG`` from a Question node's labels."""
    found = sorted({_TYPE_OF_LABEL[x] for x in labels if x in _TYPE_OF_LABEL})
    return found[0] if len(found) == 1 else "?"


def row_from_record(record: Mapping[str, Any]) -> TraceRow:
    """One row from a record of the listing query (sub-traces nested, oldest first)."""
    subs = sorted((row_from_record(s) for s in record.get("subtraces") or ()), key=_oldest_first)
    return TraceRow(
        iri=record["iri"], session_id=record.get("session") or "", type=trace_type(record.get("labels") or ()),
        question=record.get("query") or "", time=parse_time(_native(record.get("time"))),
        steps=record.get("steps"), status=record.get("status") or UNKNOWN, subtraces=tuple(subs),
    )


def _native(value: Any) -> Any:
    """A Neo4j temporal value as a Python one (other values unchanged)."""
    to_native = getattr(value, "to_native", None)
    return to_native() if callable(to_native) else value


def _oldest_first(row: TraceRow) -> tuple[bool, str, str]:
    return (row.time is None, row.time.isoformat() if row.time else "", row.iri)


def rows_json(rows: Sequence[TraceRow]) -> str:
    return json.dumps([_json(r) for r in rows], indent=2, ensure_ascii=False) + "\n"


def _json(row: TraceRow) -> dict[str, Any]:
    return {"session_id": row.iri, "session": row.session_id, "type": row.type, "question": row.question,
            "time": iso_time(row.time), "steps": row.steps, "status": row.status,
            "subtraces": [_json(s) for s in row.subtraces]}


def render_table(rows: Sequence[TraceRow], width: int = 120) -> str:
    cells = [cell for row in rows for cell in _cells(row, "")]
    fixed = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(HEADERS)]
    other = sum(w for i, w in enumerate(fixed) if i != 2) + 3 * (len(HEADERS) - 1)
    fixed[2] = max(min(fixed[2], MIN_QUESTION), min(fixed[2], width - other))
    lines = [_line(HEADERS, fixed), _line(tuple("-" * w for w in fixed), fixed)]
    lines += [_line(tuple(truncate(c, fixed[i]) if i == 2 else c for i, c in enumerate(cell)), fixed)
              for cell in cells]
    return "\n".join(lines) + "\n"


def _cells(row: TraceRow, indent: str) -> list[tuple[str, ...]]:
    steps = "-" if row.steps is None else str(row.steps)
    when = row.time.strftime("%Y-%m-%d %H:%M:%S") if row.time else "-"
    own = (indent + row.iri, row.type, row.question, when, steps, row.status)
    return [own, *(c for sub in row.subtraces for c in _cells(sub, indent + "  └ "))]


def _line(cells: tuple[str, ...], widths: list[int]) -> str:
    return " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
