"""Which sessions the worker forgets, and when."""

from __future__ import annotations

import pytest

from provstream.core.fold import FoldState
from provstream.core.vocab import Mechanism
from provstream.streams.expiry import TOUCHED, idle_keys, sweep_interval


def test_a_state_last_changed_a_retention_ago_is_dropped() -> None:
    items = [(b"old", {TOUCHED: 100.0}), (b"edge", {TOUCHED: 110.0}), (b"new", {TOUCHED: 110.1})]
    assert idle_keys(items, now=120.0, retention_s=10, unstamped=0.0) == [b"old", b"edge"]


def test_an_unstamped_state_counts_from_the_workers_start() -> None:
    items = [(b"legacy", {"steps": []})]
    assert idle_keys(items, now=120.0, retention_s=10, unstamped=115.0) == []
    assert idle_keys(items, now=125.0, retention_s=10, unstamped=115.0) == [b"legacy"]


def test_values_that_are_not_states_are_left_alone() -> None:
    assert idle_keys([(b"gone", None)], now=1e9, retention_s=1, unstamped=0.0) == []


def test_the_fold_reads_a_stamped_state_as_before() -> None:
    state = FoldState(Mechanism.AGENT, "u", "c", (("question", "e1"),), None)
    assert FoldState.from_dict({**state.to_dict(), TOUCHED: 1.0}) == state


@pytest.mark.parametrize(("retention", "interval"), [(2, 1.0), (60, 15.0), (7 * 24 * 3600, 300.0)])
def test_sweeps_run_a_quarter_of_the_retention_apart_within_bounds(retention: int, interval: float) -> None:
    assert sweep_interval(retention) == interval
