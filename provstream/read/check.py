"""Completeness at a glance: sessions left open too long, and concluded sessions with missing steps (pure).

Example::

    >>> parse_age("10m")
    datetime.timedelta(seconds=600)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from provstream.core import vocab as v
from provstream.errors import ConfigError
from provstream.read.model import INCOMPLETE, OPEN, missing_names
from provstream.read.text import format_time, iso_time, parse_time, truncate

_AGE = re.compile(r"^(\d+)\s*([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def _native(value: Any) -> Any:
    """A Neo4j temporal value as a Python one (other values unchanged)."""
    to_native = getattr(value, "to_native", None)
    return to_native() if callable(to_native) else value


def parse_age(text: str) -> timedelta:
    """``30s``, ``10m``, ``2h``, ``7d`` as a duration.

    :raises ConfigError: anything else.
    """
    match = _AGE.match(text.strip())
    if match is None:
        raise ConfigError(f"--older-than wants a duration such as 30s, 10m, 2h or 7d, got {text!r}")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


@dataclass(frozen=True, slots=True)
class Problem:
    """One session that needs a look: ``open`` for longer than the threshold, or ``incomplete``."""

    iri: str
    session_id: str
    type: str
    question: str
    time: datetime | None
    status: str
    steps: int | None
    expected: int | None
    missing: tuple[str, ...]
    reason: str


def problems(records: Iterable[Mapping[str, Any]], *, now: datetime, older_than: timedelta) -> list[Problem]:
    """The sessions to report, oldest first: open ones started more than ``older_than`` before ``now``
    (or with no recorded start), and every incomplete one.

    :param records: the records of :meth:`TraceReader.unfinished`.
    :param now: the current time (timezone-aware).
    :param older_than: how long a session may stay open.
    """
    out = []
    for r in records:
        mechanism = v.Mechanism(r["mechanism"]) if r.get("mechanism") else v.Mechanism.AGENT
        started = parse_time(_native(r.get("time")))
        status = r.get("status") or ""
        missing = missing_names(mechanism, tuple(r.get("missing") or ()))
        if status == OPEN:
            if started is not None and now - started <= older_than:
                continue
            age = "no recorded start" if started is None else f"open for {_age(now - started)}"
            reason = f"{age} (threshold {_age(older_than)})"
        elif status == INCOMPLETE:
            reason = "concluded with missing steps: " + ", ".join(missing)
        else:
            continue
        out.append(Problem(r["iri"], r.get("session") or "", mechanism.label, r.get("query") or "", started,
                           status, r.get("steps"), r.get("expected"), missing, reason))
    return sorted(out, key=lambda p: (p.time is None, p.time.isoformat() if p.time else "", p.iri))


def _age(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def problems_json(found: Iterable[Problem]) -> str:
    return json.dumps([{"session_id": p.iri, "session": p.session_id, "type": p.type, "question": p.question,
                        "time": iso_time(p.time), "status": p.status, "steps": p.steps,
                        "expected_steps": p.expected, "missing_steps": list(p.missing), "reason": p.reason}
                       for p in found], indent=2, ensure_ascii=False) + "\n"


def problems_text(found: list[Problem], width: int = 100) -> str:
    if not found:
        return "all sessions complete: none open past the threshold, none with missing steps\n"
    lines = [f"{len(found)} session{'s' if len(found) != 1 else ''} need{'s' if len(found) == 1 else ''} a look:"]
    for p in found:
        lines += [f"  {p.status:<10} {p.type:<8} {p.session_id}  {format_time(p.time)}",
                  f"             {truncate(p.reason, width - 13)}",
                  f"             {truncate(p.question, width - 13)}"]
    return "\n".join(lines) + "\n"
