"""The agent request model and its wire form (backward compatible)."""

from __future__ import annotations

import json

import pytest

from provstream.core.request import AgentRequest
from provstream.errors import InvalidInput


def test_defaults_record_nothing() -> None:
    req = AgentRequest("What is the capital of France?")
    assert (req.user, req.collection, req.session_id) == ("trustgraph", "default", "")
    assert not req.records


def test_wire_round_trip_keeps_every_field_and_is_json() -> None:
    req = AgentRequest("Q ü", user="alice", collection="papers", session_id="s-1", max_steps=4)
    wire = json.loads(json.dumps(req.to_wire()))
    assert AgentRequest.from_wire(wire) == req
    assert req.records


def test_old_wire_dicts_get_the_defaults() -> None:
    req = AgentRequest.from_wire({"question": "Q", "user": "bob"})
    assert (req.user, req.collection, req.session_id) == ("bob", "default", "")
    assert AgentRequest.from_wire({"question": "Q"}).user == "trustgraph"


def test_unknown_wire_keys_are_ignored() -> None:
    assert AgentRequest.from_wire({"question": "Q", "streaming": True}) == AgentRequest("Q")


@pytest.mark.parametrize("wire", [
    {},
    {"question": 3},
    {"question": "Q", "session_id": "has space"},
    {"question": "Q", "session_id": None},
    {"question": "Q", "user": ""},
    {"question": "Q", "collection": 5},
    {"question": "Q", "max_steps": 0},
    {"question": "Q", "max_steps": True},
    ["question"],
])
def test_bad_wire_dicts_raise_invalid_input(wire: object) -> None:
    with pytest.raises(InvalidInput):
        AgentRequest.from_wire(wire)  # type: ignore[arg-type]


def test_frozen() -> None:
    req = AgentRequest("Q")
    with pytest.raises(AttributeError):
        req.question = "other"  # type: ignore[misc]
