"""provstream.progress: redrawn with \\r (bar, rate, ETA) on a terminal only; plain and rare elsewhere."""

from __future__ import annotations

import io
import time

from provstream.progress import Progress, Ticker, duration


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_on_a_terminal_the_line_is_redrawn_with_a_bar_rate_and_eta() -> None:
    out, clock = Terminal(), Clock()
    bar = Progress("replay", unit="events", stream=out, clock=clock)
    clock.now += 2
    bar.update(500, 2000, "12 triples")
    clock.now += 2
    bar.update(1000, 2000)
    bar.finish()
    frames = out.getvalue().split("\r")[1:]
    assert frames[0].startswith("replay  [######------------------] 500/2000 events (25.0%)  12 triples  250 events/s")
    assert frames[0].endswith("ETA 0:06") and "ETA 0:04" in frames[1]
    assert out.getvalue().endswith("\n") and "\n" not in out.getvalue()[:-1]


def test_elsewhere_nothing_is_redrawn_and_a_short_run_writes_nothing() -> None:
    out, clock = io.StringIO(), Clock()
    bar = Progress("emit", unit="runs", stream=out, clock=clock)
    clock.now += 1
    bar.update(10, 100)
    bar.finish()
    assert out.getvalue() == ""
    clock.now += 11
    bar.update(50, 100)
    assert out.getvalue() == "emit  50/100 runs (50.0%)  4 runs/s  ETA 0:12\n"


def test_a_ticker_shows_elapsed_time_on_a_terminal_and_clears_it() -> None:
    out = Terminal()
    with Ticker("kafka: starting", stream=out):
        time.sleep(1.3)
    text = out.getvalue()
    assert text.startswith("\rkafka: starting ... 0:01") and text.endswith("\r")
    quiet = io.StringIO()
    with Ticker("kafka: starting", stream=quiet):
        time.sleep(0.1)
    assert quiet.getvalue() == ""


def test_duration() -> None:
    assert [duration(s) for s in (0, 75, 3725)] == ["0:00", "1:15", "1:02:05"]
