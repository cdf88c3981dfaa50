"""Forgetting idle sessions: the worker's table must not grow for ever.

A session whose state has not changed for ``retention`` seconds is dropped
from the table (a tombstone on its changelog, so a restarted worker does not
recover it either). Its graph is untouched. If a step of it arrives later, the
fold starts it afresh: the step's triples are written as usual (they depend
on the event alone and the sink MERGEs them), but it is not recognised as a
duplicate or a late step, and its status message counts only the steps seen
since; the sink ignores a status with fewer steps than the stored one, so
the session's recorded status stays as it was.

:class:`IdleSessions` is pure (the clock reading is an argument): each sweep
it compares every table value with the one it saw before, by identity (the
worker stores a new value object whenever a session changes), and returns the
keys unchanged for at least ``retention`` seconds. A session is dropped
between ``retention`` and ``retention`` + one sweep interval after its last
change; a restart starts every clock again.
"""

from __future__ import annotations

from collections.abc import Iterable


class IdleSessions:
    """Which table keys have kept the same value for ``retention`` seconds."""

    def __init__(self, retention_s: float) -> None:
        if retention_s <= 0:
            raise ValueError("retention must be positive")
        self.retention_s = retention_s
        self._since: dict[bytes, tuple[float, object]] = {}  # key -> (first seen with this value, the value)

    def sweep(self, items: Iterable[tuple[bytes, object]], now: float) -> list[bytes]:
        """The keys to drop now; remembers the rest (keys gone from ``items`` are forgotten)."""
        since: dict[bytes, tuple[float, object]] = {}
        idle: list[bytes] = []
        previous = self._since
        for key, value in items:
            seen = previous.get(key)
            if seen is None or seen[1] is not value:
                since[key] = (now, value)
            elif now - seen[0] >= self.retention_s:
                idle.append(key)
            else:
                since[key] = seen
        self._since = since
        return idle

    def __len__(self) -> int:
        return len(self._since)


def sweep_interval(retention_s: float) -> float:
    """How often to sweep: a quarter of the retention, between 1 s and 5 min."""
    return min(300.0, max(1.0, retention_s / 4))
