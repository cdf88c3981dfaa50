"""streams.quiet.RepeatLimit: one record per kind and interval, then a count of what was dropped."""

from __future__ import annotations

import io
import logging

from provstream.streams.quiet import RepeatLimit


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_repeats_are_dropped_for_the_interval_then_counted() -> None:
    clock, out = Clock(), io.StringIO()
    logger = logging.getLogger("test.quiet.repeats")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = logging.StreamHandler(out)
    second = logging.StreamHandler(io.StringIO())
    limit = RepeatLimit(30, clock=clock)
    handler.addFilter(limit)
    second.addFilter(limit)  # a second handler sees the same decision, not a repeat
    logger.addHandler(handler)
    logger.addHandler(second)
    try:
        for n in range(100):
            clock.now = n * 0.01
            logger.error("Unable connect to node with id %s: %s", 1, f"refused {n}")
        logger.error("Unable to update metadata from %s", [1])
        logger.info("info %s", "is never limited")
        logger.info("info %s", "is never limited")
        clock.now = 31.0
        logger.error("Unable connect to node with id %s: %s", 1, "refused again")
    finally:
        logger.removeHandler(handler)
        logger.removeHandler(second)
    assert out.getvalue().splitlines() == [
        "Unable connect to node with id 1: refused 0",
        "Unable to update metadata from [1]",
        "info is never limited",
        "info is never limited",
        "Unable connect to node with id 1: refused again (99 more like this in the last 31 s)",
    ]
    assert second.stream.getvalue() == out.getvalue()  # type: ignore[attr-defined]
