"""Print steps from a live tail until interrupted (shared by ``provstream follow`` and ``show --follow``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterable
from types import FrameType
from typing import TextIO

from provstream.read.live import TriplesTail
from provstream.read.steps import describe, format_line, in_scope
from provstream.triples import StepTriples


def print_steps(messages: Iterable[StepTriples], out: TextIO, *, user: str, collection: str,
                question: str | None = None, width: int = 120) -> int:
    """Print the messages in scope (and of ``question`` when given); return how many were printed."""
    printed = 0
    for msg in messages:
        if in_scope(msg, user=user, collection=collection, question=question):
            print(format_line(describe(msg), width), file=out, flush=True)
            printed += 1
    return printed


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def follow(tail: TriplesTail, out: TextIO, *, user: str, collection: str, question: str | None = None,
           width: int = 120) -> int:
    """Print steps as they arrive until Ctrl-C (or SIGTERM); the caller closes the tail. Returns 0."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    try:
        while True:
            print_steps(tail.poll(), out, user=user, collection=collection, question=question, width=width)
    except KeyboardInterrupt:
        return 0
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
