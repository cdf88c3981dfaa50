"""Replay's pure parts: start arguments and the offline fold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from provstream.cli.commands.replay import start_of
from provstream.codec import records as wire
from provstream.connectors.replay import OfflineFold, StartAt, parse_offset, parse_time
from provstream.core import events as ev
from provstream.core.vocab import Mechanism
from provstream.errors import ConfigError

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def _event(seq: int, payload: ev.Payload, sid: str = "s1") -> bytes:
    return wire.encode_event(ev.Event(f"{sid}:{seq}", sid, Mechanism.AGENT, seq, T0, payload))


def test_offsets_and_times_parse_or_explain() -> None:
    assert parse_offset("2:1500") == (2, 1500)
    for bad in ("2", "a:1", "1:-3", ""):
        with pytest.raises(ConfigError, match="PARTITION:OFFSET|non-negative"):
            parse_offset(bad)
    assert parse_time("2025-01-01T00:00:00Z") == T0
    assert parse_time("2025-01-01T01:00:00") == T0 + timedelta(hours=1)
    assert parse_time("2025-01-01T01:00:00+01:00") == datetime(2025, 1, 1, 1, tzinfo=timezone(timedelta(hours=1)))
    with pytest.raises(ConfigError, match="ISO 8601"):
        parse_time("yesterday")


def test_command_arguments_choose_the_start() -> None:
    class Args:
        from_offset: list[str] | None = None
        from_time: str | None = None

    args = Args()
    assert start_of(args) == StartAt.beginning()  # type: ignore[arg-type]
    args.from_offset = ["0:5", "3:7"]
    assert start_of(args) == StartAt(offsets=((0, 5), (3, 7)))  # type: ignore[arg-type]
    args.from_offset, args.from_time = None, "2025-01-01T00:00:00Z"
    assert start_of(args) == StartAt(time=T0)  # type: ignore[arg-type]


def test_offline_fold_keeps_state_per_session_and_skips_bad_events() -> None:
    folder = OfflineFold()
    assert folder.add(b"garbage") is None
    assert folder.add(None) is None
    first = folder.add(_event(0, ev.AgentQuestion("q")))
    assert first is not None and first.status.steps == 1
    assert folder.add(_event(1, ev.AgentIteration(1, "t", "Search", "not json"))) is None
    last = folder.add(_event(1, ev.AgentConclusion("a", 0)))
    assert last is not None and last.status.state.value == "CONCLUDED" and last.status.steps == 2
