"""The direct StepTriples writer: byte for byte what fastavro writes, and the same errors."""

from __future__ import annotations

import dataclasses
import os
import tracemalloc
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wire_support import assert_encodes_like_fastavro

from provstream import testing
from provstream.codec import avro as codec
from provstream.codec import records as wire
from provstream.core import events as ev
from provstream.core.triples import Iri, Literal, QuotedTriple, SessionState, SessionStatus, StepTriples, Triple
from provstream.core.vocab import Mechanism
from provstream.data import REACT_TRAJECTORIES

CORPUS = REACT_TRAJECTORIES


def fastavro_bytes(msg: StepTriples) -> bytes:
    return codec.encode(codec.STEP_TRIPLES, wire.triples_to_avro(msg))


def direct_bytes(msg: StepTriples) -> bytes:
    """The direct writer alone (``encode_triples`` would hide its failures behind fastavro)."""
    return wire._TRIPLES_HEADER + wire._step_triples_body(msg)


try:
    from provstream.codec import _triples_c
except ImportError:  # pragma: no cover - CI builds it (test_triples_reader checks)
    _triples_c = None  # type: ignore[assignment]
needs_c = pytest.mark.skipif(_triples_c is None, reason="provstream.codec._triples_c is not built")


def c_bytes(msg: StepTriples) -> bytes:
    """The C writer alone."""
    return _triples_c.write_step_triples(msg, wire._TRIPLES_HEADER)


WRITERS = [pytest.param(direct_bytes, id="python"), pytest.param(c_bytes, id="c", marks=needs_c)]


def test_the_direct_writer_is_on_for_the_current_schema() -> None:
    # A schema change turns it off (fingerprint mismatch); update _step_triples_body and this fingerprint.
    assert codec.current_fingerprint(codec.STEP_TRIPLES).hex() == wire.DIRECT_TRIPLES_FINGERPRINT
    assert wire._DIRECT_TRIPLES
    assert wire.encode_triples is wire._encode_triples_direct and wire.decode_triples is wire._decode_triples_direct


strings = st.text() | st.sampled_from(["", "http://www.w3.org/ns/prov#Entity", "x" * 5000, "é🎸" * 1500])
optional = st.none() | strings
terms: st.SearchStrategy[Any] = st.one_of(
    st.builds(Iri, strings),
    st.builds(Literal, strings, optional, optional),
    st.builds(QuotedTriple, st.builds(Iri, strings), st.builds(Iri, strings),
              st.builds(Iri, strings) | st.builds(Literal, strings, optional, optional)),
)
ints = st.integers(-(2**31), 2**31 - 1)
messages = st.builds(
    StepTriples, strings, strings, st.sampled_from(Mechanism), st.integers(-(2**63), 2**63 - 1), strings, strings,
    strings, st.lists(st.builds(Triple, st.builds(Iri, strings), st.builds(Iri, strings), terms), max_size=6)
    .map(tuple),
    st.builds(SessionStatus, st.sampled_from(SessionState), ints, st.none() | ints, ints,
              st.lists(ints, max_size=5).map(tuple)),
    st.booleans(), strings,
)


@pytest.mark.parametrize("write", WRITERS)
@settings(max_examples=300, deadline=None)
@given(messages)
def test_any_message_is_written_as_fastavro_writes_it(write: Any, msg: StepTriples) -> None:
    assert write(msg) == fastavro_bytes(msg)
    assert wire.decode_triples(wire.encode_triples(msg)) == msg


PAYLOADS: list[ev.Payload] = [
    ev.AgentQuestion("q?"), ev.AgentIteration(1),
    ev.AgentIteration(3, "think", "Search", '{"input": "x"}', "saw", (1, 2), ev.SubTrace(Mechanism.DOCRAG, "d-1")),
    ev.AgentConclusion("answer", 5), ev.GraphRagQuestion("g?"), ev.GraphRagExploration(7),
    ev.GraphRagFocus((ev.SelectedEdge("http://x/s", "http://x/p", "lit", "why"), ev.SelectedEdge("a:b", "a:c", "a:d"))),
    ev.GraphRagSynthesis("s"), ev.DocRagQuestion("d?"), ev.DocRagExploration(2**40, ("c1", "c2")),
    ev.DocRagSynthesis(""),
]


@pytest.mark.parametrize("write", WRITERS)
def test_every_folded_step_is_written_as_fastavro_writes_it(write: Any) -> None:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    events = [ev.Event(f"e{n}", f"p-{ev.MECHANISM_OF[type(p)].value}", ev.MECHANISM_OF[type(p)], n, start, p, "u", "c")
              for n, p in enumerate(PAYLOADS)]
    for n, record in enumerate(testing.load_trajectories(CORPUS)):
        events += testing.trajectory_events(record, f"s{n}", start)
    for step in testing.fold_all(events):
        assert write(step) == wire.encode_triples(step) == fastavro_bytes(step)


GOOD = StepTriples("e", "s", Mechanism.AGENT, 1, "u", "c", "urn:q",
                   (Triple(Iri("urn:a"), Iri("urn:p"), Literal("v")),), SessionStatus(SessionState.OPEN, 1))


@pytest.mark.parametrize("change", [
    {"seq": 2**63}, {"seq": "1"}, {"mechanism": "AGENT"}, {"user": b"u"}, {"duplicate": 1},
    {"status": SessionStatus(SessionState.OPEN, 2**31)}, {"status": SessionStatus("OPEN", 1)},  # type: ignore[arg-type]
    {"triples": (Triple(Iri("urn:a"), Iri("urn:p"), "v"),)},  # type: ignore[arg-type]
    {"triples": (Triple(Iri("urn:a"), Iri(5), Iri("urn:o")),)},  # type: ignore[arg-type]
    {"question": "\ud800"},
], ids=str)
def test_values_it_does_not_take_go_through_fastavro(change: dict[str, Any]) -> None:
    msg = dataclasses.replace(GOOD, **change)
    assert_encodes_like_fastavro(wire.encode_triples, fastavro_bytes, msg)


def test_the_c_writer_is_chosen_when_built() -> None:
    if _triples_c is None or os.environ.get("PROVSTREAM_NO_C_EXTENSIONS", "") not in ("", "0"):
        assert wire._write_step_triples is wire._write_step_triples_py
        return
    assert wire._write_step_triples is _triples_c.write_step_triples


class _LookAlike(StepTriples):
    """A subclass: the Python writer takes it, the C writer leaves it to fastavro."""


@needs_c
@pytest.mark.parametrize("change", [
    {"seq": 2**63}, {"seq": "1"}, {"mechanism": "AGENT"}, {"user": b"u"}, {"duplicate": 1}, {"graph": None},
    {"status": SessionStatus(SessionState.OPEN, 2**31)}, {"status": SessionStatus("OPEN", 1)},  # type: ignore[arg-type]
    {"status": SessionStatus(SessionState.OPEN, 1, missing=[1, True])},  # type: ignore[arg-type]
    {"triples": (Triple(Iri("urn:a"), Iri("urn:p"), "v"),)},  # type: ignore[arg-type]
    {"triples": (Triple(Iri("urn:a"), Iri(5), Iri("urn:o")),)},  # type: ignore[arg-type]
    {"triples": iter(())},  # type: ignore[arg-type]
    {"question": "\ud800"}, {"question": "x" * 100_000 + "\ud800"},
], ids=str)
def test_the_c_writer_raises_on_what_it_does_not_take(change: dict[str, Any]) -> None:
    msg = dataclasses.replace(GOOD, **change)
    with pytest.raises((TypeError, AttributeError, UnicodeEncodeError)):
        c_bytes(msg)
    assert_encodes_like_fastavro(wire.encode_triples, fastavro_bytes, msg)


@needs_c
def test_the_c_writer_takes_a_list_and_leaves_look_alikes_to_fastavro() -> None:
    as_list = dataclasses.replace(GOOD, triples=list(GOOD.triples))  # type: ignore[arg-type]
    assert c_bytes(as_list) == direct_bytes(GOOD)
    look_alike = _LookAlike(*(getattr(GOOD, f.name) for f in dataclasses.fields(GOOD)))
    with pytest.raises(TypeError):
        c_bytes(look_alike)
    assert wire.encode_triples(look_alike) == fastavro_bytes(GOOD)
    with pytest.raises(TypeError):
        _triples_c.write_step_triples(GOOD, bytearray(b"x"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _triples_c.write_step_triples(GOOD)  # type: ignore[call-arg]


@needs_c
def test_the_c_writer_frees_its_buffer() -> None:
    big = dataclasses.replace(GOOD, triples=tuple(
        Triple(Iri(f"urn:s{i}"), Iri("urn:p"), Literal("v" * 1000)) for i in range(50)))
    bad = dataclasses.replace(big, duplicate=1)  # type: ignore[arg-type]  # fails after the whole body is written
    for _ in range(200):  # warm up caches
        c_bytes(big)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(2000):
            c_bytes(big)
            with pytest.raises(TypeError):
                c_bytes(bad)
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 100_000, f"{grown} bytes more after 4,000 writes of a 50 kB message"
