"""provstream erase without servers: the retraction record, the sink's split, --session parsing."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from provstream.connectors.sink import split_retractions
from provstream.erase import EraseReport, session_of
from provstream.errors import ConfigError
from provstream.topics import retraction_of, retraction_record


def test_the_sink_takes_retractions_apart_from_triples() -> None:
    key, value, headers = retraction_record("alice", "c", "s1")
    records = [SimpleNamespace(headers=[], value=b"x"), SimpleNamespace(headers=headers, value=value),
               SimpleNamespace(headers=None, value=b"y")]
    retracted, rest = split_retractions(records)
    assert retracted == [("alice", "c", "s1")] and [r.value for r in rest] == [b"x", b"y"]
    assert key == b"s1" and retraction_of(headers) == ("alice", "c", "s1")


def test_session_option_takes_an_iri_or_an_id() -> None:
    assert session_of("urn:trustgraph:agent:abc-1") == "abc-1"
    assert session_of("abc-1") == "abc-1"
    with pytest.raises(ConfigError, match="neither a question IRI"):
        session_of("urn:nope:x y")


def test_report_says_when_a_replay_would_restore() -> None:
    assert "a replay would restore" in EraseReport(0, 3, [("u", "c", "s")], encrypted=False).summary()
