"""Progress on stderr for long commands (replay, export --all, emit, stack up).

On a terminal a line is redrawn in place with ``\\r`` (at most every
:data:`TTY_EVERY` seconds): a bar, the count, the rate and the ETA when the
total is known. Anywhere else (a pipe, a file, CI logs) nothing is redrawn:
a plain line is written at most every :data:`PLAIN_EVERY` seconds, so a
short run writes nothing and a long one a line now and then.

Example::

    bar = Progress("replay", unit="events")
    for n in range(total):
        bar.update(n + 1, total)
    bar.finish()

    with Ticker("kafka: starting"):     # elapsed seconds while something slow runs
        start_kafka()
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

TTY_EVERY = 0.25
PLAIN_EVERY = 10.0
BAR = 24


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is an interactive terminal (redrawing with ``\\r`` makes sense)."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):  # closed or detached
        return False


def duration(seconds: float) -> str:
    """``seconds`` as ``m:ss`` (or ``h:mm:ss``): ``duration(75)`` is ``"1:15"``."""
    s = max(int(seconds + 0.5), 0)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """A count towards an optional total, shown on ``stream`` (stderr by default).

    :param label: what is progressing (``"replay"``).
    :param unit: what is counted (``"events"``).
    :param stream: where to write (default ``sys.stderr``); a terminal gets the redrawn bar.
    :param clock: the time source (tests pass a fake one).
    """

    def __init__(self, label: str, *, unit: str = "items", stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.unit = label, unit
        self.stream = sys.stderr if stream is None else stream
        self.tty = is_terminal(self.stream)
        self._clock = clock
        self._began = clock()
        self._last = self._began
        self._width = 0
        self._state: tuple[int, int | None, str] = (0, None, "")

    def update(self, done: int, total: int | None = None, extra: str = "") -> None:
        """Record ``done`` of ``total``; redraw if it is time (see the module doc)."""
        self._state = (done, total, extra)
        now = self._clock()
        if now - self._last >= (TTY_EVERY if self.tty else PLAIN_EVERY):
            self._last = now
            self._draw(now)

    def finish(self) -> None:
        """End the progress: on a terminal the last state is drawn and the line ended; elsewhere nothing."""
        if self.tty:
            self._draw(self._clock())
            self.stream.write("\n")
            self.stream.flush()

    def line(self, now: float | None = None) -> str:
        """The progress text for the current state (no ``\\r``)."""
        done, total, extra = self._state
        elapsed = max((self._clock() if now is None else now) - self._began, 1e-9)
        rate = done / elapsed
        parts = [self.label]
        if total:
            filled = min(BAR, BAR * done // total)
            bar = f"[{'#' * filled}{'-' * (BAR - filled)}] " if self.tty else ""
            parts.append(f"{bar}{done}/{total} {self.unit} ({100.0 * done / total:.1f}%)")
        else:
            parts.append(f"{done} {self.unit}")
        if extra:
            parts.append(extra)
        parts.append(f"{rate:.0f} {self.unit}/s")
        if total and done < total:
            parts.append(f"ETA {duration((total - done) / rate)}" if rate > 0 else "ETA ?")
        else:
            parts.append(f"in {duration(elapsed)}")
        return "  ".join(parts)

    def _draw(self, now: float) -> None:
        text = self.line(now)
        if self.tty:
            pad = max(self._width - len(text), 0)
            self._width = len(text)
            self.stream.write(f"\r{text}{' ' * pad}")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


class Ticker:
    """Elapsed time while a slow step runs: redrawn each second on a terminal, a line every
    :data:`PLAIN_EVERY` seconds elsewhere; the line is cleared when the step ends."""

    def __init__(self, label: str, *, stream: TextIO | None = None) -> None:
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.tty = is_terminal(self.stream)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="provstream-ticker", daemon=True)
        self._began = time.monotonic()
        self._drawn = 0

    def __enter__(self) -> Ticker:
        self._began = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        if self.tty and self._drawn:
            self.stream.write("\r" + " " * self._drawn + "\r")
            self.stream.flush()

    def _run(self) -> None:
        every = 1.0 if self.tty else PLAIN_EVERY
        while not self._stop.wait(every):
            elapsed = duration(time.monotonic() - self._began)
            if self.tty:
                text = f"{self.label} ... {elapsed}"
                self.stream.write(f"\r{text}")
                self._drawn = len(text)
            else:
                self.stream.write(f"{self.label} ... still running ({elapsed})\n")
            self.stream.flush()
