"""The Avro contract: every schema file, and the golden examples next to them.

Each ``schemas/examples/<Type>.json`` holds one message in a readable form
and its single-object bytes (hex) written once, with the schema of that time.
The bytes must keep decoding to the same message: a schema change that breaks
old events fails here. When a schema changes compatibly, keep the old version
under ``schemas/history/<version>/`` so its fingerprint stays known; never
regenerate the hex. A later form of a type gets an example of its own,
``<Type>.<form>.json`` (``AgentQuestion.conversation.json``: the optional fields
added after 0.1.0).
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastavro.schema import load_schema

from provstream.codec import avro as codec
from provstream.codec import records as wire
from provstream.core import events as ev
from provstream.core.fold import fold, validate
from provstream.core.triples import StepTriples

SCHEMAS = codec.schema_dir()
EXAMPLES = SCHEMAS / "examples"
EVENT_EXAMPLES = sorted(p for p in EXAMPLES.glob("*.json") if p.stem != "StepTriples")


def event_from_example(path: Path) -> ev.Event:
    doc = json.loads(path.read_text(encoding="utf-8"))["event"]
    record: dict[str, Any] = {k: v for k, v in doc.items() if k not in ("payload_type", "payload")}
    record["event_time"] = datetime.fromisoformat(doc["event_time"])
    record["payload"] = (doc["payload_type"], doc["payload"])
    return wire.event_from_avro(record)


def golden_bytes(path: Path) -> bytes:
    return bytes.fromhex(json.loads(path.read_text(encoding="utf-8"))["single_object_hex"])


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("provstream.*.avsc")), ids=lambda p: p.stem)
def test_each_schema_file_holds_one_named_type_named_like_the_file(path: Path) -> None:
    raw = json.loads(path.read_text())
    assert f"{raw['namespace']}.{raw['name']}" == path.stem
    parsed = load_schema(str(path))
    assert parsed["name"] == path.stem


def step_type(path: Path) -> str:
    """``AgentQuestion`` of ``AgentQuestion.json`` and of ``AgentQuestion.conversation.json``."""
    return path.name.split(".")[0]


def test_there_is_a_golden_example_per_step_type() -> None:
    step_types = {t.__name__ for t in ev.MECHANISM_OF}
    assert {step_type(p) for p in EVENT_EXAMPLES} == step_types
    assert (EXAMPLES / "StepTriples.json").is_file()


@pytest.mark.parametrize("path", EVENT_EXAMPLES, ids=lambda p: p.stem)
def test_golden_example_round_trips_with_the_current_schemas(path: Path) -> None:
    event = event_from_example(path)
    assert type(event.payload).__name__ == step_type(path)
    assert wire.decode_event(wire.encode_event(event)) == event


@pytest.mark.parametrize("path", EVENT_EXAMPLES, ids=lambda p: p.stem)
def test_stored_golden_bytes_still_decode_to_the_same_event(path: Path) -> None:
    data = golden_bytes(path)
    assert wire.decode_event(data) == event_from_example(path)
    if data[2:codec.HEADER_LEN] == codec.current_fingerprint(codec.EVENT):
        assert wire.encode_event(event_from_example(path)) == data, "same schema must give the same bytes"


@pytest.mark.parametrize("path", EVENT_EXAMPLES, ids=lambda p: p.stem)
def test_golden_events_satisfy_the_fold_contract(path: Path) -> None:
    event = event_from_example(path)
    validate(event)
    fold(None, event)


def test_golden_step_triples_round_trip_and_still_decode() -> None:
    path = EXAMPLES / "StepTriples.json"
    msg: StepTriples = wire.triples_from_avro(json.loads(path.read_text(encoding="utf-8"))["triples"])
    assert wire.decode_triples(wire.encode_triples(msg)) == msg
    assert wire.decode_triples(golden_bytes(path)) == msg


def test_current_fingerprints_are_those_of_the_golden_bytes_or_kept_in_history() -> None:
    _, writers = codec._registry()
    for path in [*EVENT_EXAMPLES, EXAMPLES / "StepTriples.json"]:
        assert golden_bytes(path)[2:codec.HEADER_LEN] in writers, f"{path.name}: writer schema not kept"


def test_an_agent_question_written_before_the_optional_fields_reads_with_none() -> None:
    old = wire.decode_event(golden_bytes(EXAMPLES / "AgentQuestion.json"))
    assert isinstance(old.payload, ev.AgentQuestion)
    assert old.payload.conversation_id is None and old.payload.agent_name is None
    assert golden_bytes(EXAMPLES / "AgentQuestion.json")[2:codec.HEADER_LEN] != codec.current_fingerprint(codec.EVENT)
    new = wire.decode_event(golden_bytes(EXAMPLES / "AgentQuestion.conversation.json"))
    assert new.payload == ev.AgentQuestion(
        "Which magazine was started first, Arthur's Magazine or First for Women?",
        conversation_id="thread-2025-06-02-0042", agent_name="researcher")
