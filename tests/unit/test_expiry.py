"""IdleSessions: which sessions the worker forgets, and when."""

from __future__ import annotations

import pytest

from provstream.streams.expiry import IdleSessions, sweep_interval


def test_a_value_unchanged_for_the_retention_is_dropped() -> None:
    idle = IdleSessions(10)
    state = {"steps": []}
    assert idle.sweep([(b"s", state)], now=0) == []
    assert idle.sweep([(b"s", state)], now=9.9) == []
    assert idle.sweep([(b"s", state)], now=10) == [b"s"]
    assert len(idle) == 0


def test_a_new_value_starts_the_clock_again_even_when_equal() -> None:
    idle = IdleSessions(10)
    assert idle.sweep([(b"s", {"steps": [1]})], now=0) == []
    assert idle.sweep([(b"s", {"steps": [1]})], now=8) == []  # stored again: a change as far as the worker knows
    assert idle.sweep([(b"s", {"steps": [1]})], now=16) == []


def test_sessions_are_judged_one_by_one() -> None:
    idle = IdleSessions(10)
    quiet, busy = object(), object()
    idle.sweep([(b"quiet", quiet), (b"busy", busy)], now=0)
    busy = object()
    assert idle.sweep([(b"quiet", quiet), (b"busy", busy)], now=5) == []
    assert idle.sweep([(b"quiet", quiet), (b"busy", busy)], now=12) == [b"quiet"]
    assert idle.sweep([(b"busy", busy)], now=15) == [b"busy"]


def test_keys_gone_from_the_table_are_forgotten() -> None:
    idle = IdleSessions(10)
    state = object()
    idle.sweep([(b"s", state)], now=0)
    assert idle.sweep([], now=5) == []
    assert len(idle) == 0
    assert idle.sweep([(b"s", state)], now=11) == []  # back (recovered, re-assigned): a new clock


def test_retention_must_be_positive() -> None:
    with pytest.raises(ValueError):
        IdleSessions(0)


@pytest.mark.parametrize(("retention", "interval"), [(2, 1.0), (60, 15.0), (7 * 24 * 3600, 300.0)])
def test_sweeps_run_a_quarter_of_the_retention_apart_within_bounds(retention: int, interval: float) -> None:
    assert sweep_interval(retention) == interval
