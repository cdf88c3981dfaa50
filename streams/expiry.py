"""Forgetting idle sessions: the worker's table must not grow for ever.

A session whose state has not changed for ``retention`` seconds is dropped
from the table (a tombstone on its changelog, so a restarted worker does not
recover it either). Its graph is untouched. If a step of it arrives later, the
fold starts it afresh: the step's triples are written as usual (they depend
on the event alone and the sink MERGEs them), but it is not recognised as a
duplicate or a late step, and its status message counts only the steps seen
since; the sink ignores a status with fewer steps than the stored one, so
the session's recorded status stays as it was.

The worker stamps each state it stores with the wall-clock time
(:data:`TOUCHED`; the fold itself has no clock and ignores the field), so the
age survives restarts; a state stored before stamps existed counts from the
worker's start. A session is dropped between ``retention`` and ``retention``
+ one sweep interval after its last change.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

TOUCHED = "touched"  # wall-clock seconds of the session's last change


def idle_keys(items: Iterable[tuple[bytes, Any]], now: float, retention_s: float, unstamped: float) -> list[bytes]:
    """The keys whose state was last changed ``retention_s`` or more before ``now``.

    ``unstamped``: the time to assume for a state without :data:`TOUCHED`.
    """
    cutoff = now - retention_s
    return [key for key, state in items if isinstance(state, dict) and state.get(TOUCHED, unstamped) <= cutoff]


def sweep_interval(retention_s: float) -> float:
    """How often to sweep: a quarter of the retention, between 1 s and 5 min."""
    return min(300.0, max(1.0, retention_s / 4))
