"""The C Event reader returns what fastavro's path returns, and leaves it every case it does not take.

``provstream.codec._events_c`` is checked against ``decode_event``'s fastavro
path (fastavro + ``event_from_avro``) input by input: equal values of the same
types where it returns, and a refusal wherever fastavro refuses; ``decode_event``
itself must give fastavro's answer (the event, or :class:`DecodeError`) for
every input.
"""

from __future__ import annotations

import dataclasses
import doctest
import enum
import io
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from fastavro import schemaless_writer
from hypothesis import given, settings
from hypothesis import strategies as st
from test_wire_events import GOOD, events
from wire_support import damaged

from provstream import testing
from provstream.codec import avro as codec
from provstream.codec import event_writer
from provstream.codec import records as wire
from provstream.codec.binary import zigzag
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.core import events as ev
from provstream.core.vocab import Mechanism
from provstream.data import REACT_TRAJECTORIES
from provstream.errors import DecodeError
from provstream.settings import Settings

CORPUS = REACT_TRAJECTORIES
REPO = Path(__file__).resolve().parents[2]

NO_C = os.environ.get("PROVSTREAM_NO_C_EXTENSIONS", "") not in ("", "0")
try:
    from provstream.codec import _events_c
except ImportError:  # not built: only test_the_c_reader_is_built_and_chosen says so
    _events_c = None  # type: ignore[assignment]
needs_c = pytest.mark.skipif(_events_c is None, reason="provstream.codec._events_c is not built")


def fastavro_path(data: bytes) -> ev.Event | type[DecodeError]:
    try:
        return wire._decode_event_fastavro(data)
    except DecodeError:
        return DecodeError


def c_reader(data: bytes) -> ev.Event:
    return _events_c.read_event(data, codec.HEADER_LEN)


def answer(data: bytes) -> ev.Event | None:
    """What the C reader returns, or None when it raises."""
    try:
        return c_reader(data)
    except Exception:  # noqa: BLE001 - any exception is a refusal (decode_event falls back to fastavro)
        return None


def assert_same(got: Any, expected: Any) -> None:
    """Equal, and of the same types all the way down (tuples, None, the enum members, timezone.utc)."""
    assert type(got) is type(expected), (got, expected)
    if dataclasses.is_dataclass(got):
        for field in dataclasses.fields(got):
            assert_same(getattr(got, field.name), getattr(expected, field.name))
    elif isinstance(got, tuple):
        assert len(got) == len(expected)
        for mine, theirs in zip(got, expected, strict=True):
            assert_same(mine, theirs)
    elif isinstance(got, enum.Enum):
        assert got is expected
    elif isinstance(got, datetime):
        assert got == expected and got.tzinfo is expected.tzinfo and got.fold == expected.fold
        assert got.timetuple() == expected.timetuple() and got.microsecond == expected.microsecond
    else:
        assert got == expected


def agrees(data: bytes) -> ev.Event | None:
    """decode_event gives fastavro's answer; the C reader alone gives the same value or raises.

    Returns what the C reader returned (None: it refused).
    """
    expected = fastavro_path(data)
    if expected is DecodeError:
        with pytest.raises(DecodeError):
            wire.decode_event(data)
    else:
        assert_same(wire.decode_event(data), expected)
    if _events_c is None:
        return None
    got = answer(data)
    if got is not None:
        assert expected is not DecodeError, f"the C reader took what fastavro refuses: {data!r}"
        assert_same(got, expected)
        assert hash(got) == hash(expected)
    return got


@pytest.fixture(params=[True, False], ids=["slots", "calls"])
def construction(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Both ways the C reader makes values: filling the slots, calling the classes."""
    if _events_c is None:
        pytest.skip("provstream.codec._events_c is not built")
    before = _events_c.direct_construction(request.param)
    yield request.param
    _events_c.direct_construction(before)


# -- the events: the bundled trajectories, the read-side scenario, the emitter's workload ---

START = datetime(2025, 1, 1, tzinfo=UTC)


@cache
def corpus_events() -> tuple[ev.Event, ...]:
    records = testing.load_trajectories(CORPUS)
    out = [e for n, record in enumerate(records) for e in testing.trajectory_events(record, f"s{n}", START)]
    out += testing.scenario(records, "sc", start=START)
    return tuple(out)


@cache
def emitted_messages() -> tuple[bytes, ...]:
    """What the emitter sends for 60 sessions of the end-to-end workload: agent, DocRAG and GraphRAG."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        from e2e_workload import emit_steps, plan
    finally:
        sys.path.remove(str(REPO / "bench"))
    transport = MemoryTransport()
    emitter = Emitter(Settings(), transport=transport)
    for planned in plan("w", 60):
        for _ in emit_steps(emitter, planned, "u", "c"):
            pass
    emitter.flush()
    return tuple(value for _, value in transport.sent)


@cache
def corpus_messages() -> tuple[bytes, ...]:
    return (*(wire.encode_event(e) for e in corpus_events()), *emitted_messages())


def test_the_messages_hold_every_payload_type_and_optional_field() -> None:
    decoded = [wire.decode_event(m) for m in corpus_messages()]
    assert {type(e.payload) for e in decoded} == set(ev.MECHANISM_OF)
    assert {e.mechanism for e in decoded} == set(Mechanism)
    iterations = [e.payload for e in decoded if isinstance(e.payload, ev.AgentIteration)]
    assert any(p.subtrace is not None for p in iterations) and any(p.used for p in iterations)
    assert all(m.startswith(event_writer.HEADER) for m in corpus_messages())


# -- the C reader is there, and chosen ---------------------------------------------

def test_the_c_reader_is_built_and_chosen() -> None:
    if NO_C:
        assert wire._read_event is None and wire.decode_event is wire._decode_event_fastavro
        return
    assert _events_c is not None, "the C extension was not built: pip install -e . (needs gcc and Python headers)"
    assert _events_c.FINGERPRINT == event_writer.DIRECT_EVENT_FINGERPRINT, "update _events_c.c for the new form"
    assert codec.current_fingerprint(codec.EVENT).hex() == _events_c.FINGERPRINT
    assert wire._read_event is _events_c.read_event
    assert wire.decode_event is wire._decode_event_direct
    assert _events_c.direct_construction() is True


def test_provstream_no_c_extensions_keeps_fastavro() -> None:
    check = ("from provstream.codec import records; "
             "assert records._read_event is None and records.decode_event is records._decode_event_fastavro")
    subprocess.run([sys.executable, "-c", check], check=True, env={**os.environ, "PROVSTREAM_NO_C_EXTENSIONS": "1"})


@needs_c
def test_the_c_readers_examples_run() -> None:
    result = doctest.testmod(_events_c)
    assert result.attempted > 0 and result.failed == 0
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner()
    for test in finder.find(wire._choose_event_reader, globs=vars(wire)):
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0


# -- the C reader returns what fastavro's path returns ------------------------------

def test_every_corpus_message_is_read_by_c_as_fastavro_reads_it(construction: bool) -> None:
    for message in corpus_messages():
        assert agrees(message) is not None


def test_the_events_come_back_as_they_were_written() -> None:
    for event in corpus_events():
        assert_same(wire.decode_event(wire.encode_event(event)), event)


@needs_c
@settings(max_examples=300, deadline=None)
@given(events)
def test_any_event_is_read_by_c_as_fastavro_reads_it(event: ev.Event) -> None:
    data = wire.encode_event(event)
    got = agrees(data)
    assert got == dataclasses.replace(event, event_time=event.event_time.astimezone(UTC))


@settings(max_examples=600, deadline=None)
@given(st.data())
def test_damaged_messages_get_fastavros_answer(data: st.DataObject) -> None:
    agrees(damaged(data, [*corpus_messages()[:40:3], *few_messages()]))


def rich_messages() -> list[bytes]:
    """Every payload type, with every optional field present and arrays of several items."""
    when = datetime(2025, 6, 2, 11, 59, 59, 999999, tzinfo=UTC)
    payloads: list[ev.Payload] = [
        ev.AgentQuestion("é?", "thread-1", "researcher"),
        ev.AgentIteration(2**31 - 1, "🎸", "Search", '{"q": "x"}', "", (-(2**31), 0, 1),
                          ev.SubTrace(Mechanism.GRAPHRAG, "g-1")),
        ev.AgentConclusion("a", -(2**31)), ev.GraphRagQuestion(""), ev.GraphRagExploration(-(2**63)),
        ev.GraphRagFocus((ev.SelectedEdge("urn:s", "urn:p", "o", "why"), ev.SelectedEdge("a:b", "a:c", "a:d"))),
        ev.GraphRagSynthesis("s" * 300), ev.DocRagQuestion("d?"), ev.DocRagExploration(2**63 - 1, ("c1", "", "c3")),
        ev.DocRagSynthesis("x"),
    ]
    return [wire.encode_event(ev.Event(f"e{n}", "s", ev.MECHANISM_OF[type(p)], n, when, p, "u", "c"))
            for n, p in enumerate(payloads)]


def few_messages() -> list[bytes]:
    return [*rich_messages(), wire.encode_event(GOOD)]


@needs_c
@pytest.mark.parametrize("index", range(11))
def test_every_truncation_is_refused(index: int) -> None:
    data = few_messages()[index]
    assert agrees(data) is not None
    for end in range(codec.HEADER_LEN, len(data)):
        assert agrees(data[:end]) is None
        with pytest.raises(DecodeError):
            wire.decode_event(data[:end])


@needs_c
@pytest.mark.parametrize("index", range(11))
def test_every_byte_changed_gets_fastavros_answer(index: int) -> None:
    data = few_messages()[index]
    for at in range(codec.HEADER_LEN, len(data)):
        for value in (0x00, 0x01, 0x02, 0x03, 0x04, 0x13, 0x14, 0x7F, 0x80, 0xC0, 0xED, 0xFF):
            agrees(data[:at] + bytes([value]) + data[at + 1:])


def test_a_message_with_trailing_bytes_is_refused() -> None:
    for extra in (b"\x00", b"\x02x", b"\xff" * 3):
        data = wire.encode_event(GOOD) + extra
        assert agrees(data) is None
        with pytest.raises(DecodeError, match="trailing"):
            wire.decode_event(data)


# -- bodies built field by field (the canonical form of provstream.Event), broken one field at a time --

def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return zigzag(len(raw)) + raw


def branch(index: int) -> bytes:
    return zigzag(index)


MICROS = 1_735_689_600_000_000  # 2025-01-01T00:00:00Z
MIN_MICROS = -62_135_596_800_000_000  # datetime.min, in UTC
MAX_MICROS = 253_402_300_799_999_999  # datetime.max, in UTC
ITERATION = zigzag(1) + s("t") + s("Search") + s("{}") + s("o") + zigzag(0) + b"\x00"
FIELDS = {"event_id": s("e"), "session_id": s("s"), "mechanism": zigzag(0), "seq": zigzag(1),
          "event_time": zigzag(MICROS), "user": s("u"), "collection": s("c"), "payload": branch(1) + ITERATION}


def body(**change: bytes) -> bytes:
    return event_writer.HEADER + b"".join({**FIELDS, **change}.values())


def iteration(**change: bytes) -> bytes:
    parts = {"iteration": zigzag(1), "thought": s("t"), "action": s("Search"), "arguments": s("{}"),
             "observation": s("o"), "used": zigzag(0), "subtrace": b"\x00", **change}
    return branch(1) + b"".join(parts.values())


@needs_c
def test_the_hand_built_body_is_read() -> None:
    assert body(payload=iteration()) == body()
    assert agrees(body()) == ev.Event("e", "s", Mechanism.AGENT, 1, datetime(2025, 1, 1, tzinfo=UTC),
                                      ev.AgentIteration(1, "t", "Search", "{}", "o"), "u", "c")


REFUSED_BY_BOTH = [
    {"event_id": zigzag(-1)},  # a negative length
    {"event_id": zigzag(2**62) + b"e"},  # a huge length
    {"event_id": zigzag(2**63 - 1) + b"e"},  # the largest length
    {"event_id": s(b"\xff")},  # invalid UTF-8
    {"event_id": s(b"\xc0\x80")},  # an overlong encoding
    {"session_id": s(b"\xed\xa0\x80")},  # a surrogate
    {"user": s(b"\xf4\x90\x80\x80")},  # past U+10FFFF
    {"collection": s(b"ok\xe2\x82")},  # a sequence cut short
    {"mechanism": zigzag(3)},  # enum index out of range
    {"event_time": zigzag(MIN_MICROS - 1)}, {"event_time": zigzag(MAX_MICROS + 1)},  # outside datetime's range
    {"event_time": zigzag(-(2**63))}, {"event_time": zigzag(2**63 - 1)},
    {"payload": branch(10) + ITERATION[:1]},  # payload union index out of range
    {"payload": branch(1) + ITERATION[:-1]},  # the message ends early
    {"payload": b""},  # no payload
    {"payload": iteration(thought=s(b"\x80"))},
    {"payload": iteration(subtrace=b"\x02" + zigzag(3) + s("d"))},  # sub-trace mechanism out of range
    {"payload": iteration(subtrace=b"\x04" + zigzag(0) + s("d"))},  # union index 2 of ["null", SubTrace]
    {"payload": iteration(subtrace=b"\x02" + zigzag(2) + s(b"\xff"))},
    {"payload": iteration(used=zigzag(2) + zigzag(1) + zigzag(0))},  # fewer items than announced
    {"payload": iteration(used=zigzag(2**62) + zigzag(1) + zigzag(0))},  # a huge count
    {"payload": branch(0) + s("q") + b"\x04" + s("c") + b"\x00"},  # union index 2 of ["null", "string"]
    {"payload": branch(0) + s("q") + b"\x02" + s(b"\xc3") + b"\x00"},
    {"payload": branch(5) + zigzag(1) + s("a") + s("b") + s("c") + s(b"\xfe") + zigzag(0)},
    {"payload": branch(8) + zigzag(2) + zigzag(2) + s("c1") + s(b"\xe2\x28\xa1") + zigzag(0)},
    {"payload": branch(8) + zigzag(2)},  # no chunks array
]

LEFT_TO_FASTAVRO = [  # what fastavro may take and the C reader does not: decode_event must give fastavro's answer
    {"event_id": b"\x80" * 10 + b"\x00"},  # a varint longer than ten bytes
    {"event_id": b"\xff" * 9 + b"\x02"},  # a ten-byte varint past the long range
    {"mechanism": zigzag(-1)},  # a negative enum index
    {"payload": branch(-1) + s("x")},  # a negative union index
    {"payload": iteration(iteration=zigzag(2**31))},  # ints out of the int range
    {"payload": iteration(iteration=zigzag(-(2**31) - 1))},
    {"payload": iteration(used=zigzag(1) + zigzag(2**40) + zigzag(0))},
    {"payload": branch(2) + s("a") + zigzag(2**31)},
    {"payload": iteration(used=zigzag(-1) + zigzag(1) + zigzag(4) + zigzag(0))},  # a block with its byte size
    {"payload": branch(8) + zigzag(1) + zigzag(-2) + zigzag(6) + s("c1") + s("c2") + zigzag(0)},
    {"payload": branch(5) + zigzag(-1) + zigzag(8) + s("a") + s("b") + s("c") + s("d") + zigzag(0)},
    {"payload": iteration(subtrace=b"\x80\x00")},  # an optional's union index in two bytes
    {"payload": iteration(subtrace=b"\x01")},  # union index -1
    {"payload": branch(0) + s("q") + b"\x82\x00" + s("c") + b"\x00"},
    {"payload": branch(0) + s("q") + b"\x03" + s("c") + b"\x00"},
]


@needs_c
@pytest.mark.parametrize("change", REFUSED_BY_BOTH, ids=repr)
def test_bodies_fastavro_refuses_are_refused_by_c(change: dict[str, bytes]) -> None:
    assert fastavro_path(body(**change)) is DecodeError
    assert agrees(body(**change)) is None


@needs_c
@pytest.mark.parametrize("change", LEFT_TO_FASTAVRO, ids=repr)
def test_bodies_the_c_reader_leaves_to_fastavro_get_fastavros_answer(change: dict[str, bytes]) -> None:
    assert agrees(body(**change)) is None


@needs_c
@pytest.mark.parametrize("change", [
    {"event_id": b"\x80\x00"},  # a non-canonical zero length
    {"seq": b"\xff" * 9 + b"\x01"},  # the smallest long
    {"seq": b"\xfe" + b"\xff" * 8 + b"\x01"},  # the largest long
    {"event_time": zigzag(MIN_MICROS)}, {"event_time": zigzag(MAX_MICROS)},  # datetime.min, datetime.max
    {"event_time": zigzag(0)}, {"event_time": zigzag(-1)}, {"event_time": zigzag(951_782_400_000_000)},  # 2000-02-29
    {"event_time": b"\x80\x80\x00"},  # a non-canonical zero
    {"payload": b"\x82\x00" + ITERATION},  # a non-canonical payload union index
    {"payload": iteration(used=zigzag(1) + zigzag(3) + zigzag(2) + zigzag(1) + zigzag(2) + zigzag(0))},  # two blocks
    {"payload": iteration(subtrace=b"\x02" + zigzag(2) + s("d-1"))},
    {"payload": branch(5) + zigzag(1) + s("a") + s("b") + s("c") + s("") + zigzag(1) + s("d") * 4 + zigzag(0)},
    {"payload": branch(8) + zigzag(-5) + zigzag(1) + s("c1") + zigzag(0)},
    {"payload": branch(4) + zigzag(2**63 - 1)},
    {"payload": branch(0) + s("q") + b"\x00\x00"}, {"payload": branch(9) + s("")},
], ids=repr)
def test_unusual_but_valid_bodies_are_read_by_c(change: dict[str, bytes]) -> None:
    assert agrees(body(**change)) is not None


@needs_c
@settings(max_examples=400, deadline=None)
@given(st.integers(-(2**63), 2**63 - 1) | st.integers(MIN_MICROS - 2, MIN_MICROS + 86_400_000_000)
       | st.integers(MAX_MICROS - 86_400_000_000, MAX_MICROS + 2))
def test_any_time_is_read_as_fastavro_reads_it(micros: int) -> None:
    got = agrees(body(event_time=zigzag(micros)))
    if MIN_MICROS <= micros <= MAX_MICROS:
        assert got is not None
        assert got.event_time == datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    else:
        assert got is None


@needs_c
def test_the_c_reader_refuses_what_is_not_a_message() -> None:
    data = wire.encode_event(GOOD)
    for bad in ((bytearray(data), codec.HEADER_LEN), (data, -1), (data, len(data) + 1), (data, "10")):
        with pytest.raises((TypeError, ValueError)):
            _events_c.read_event(*bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _events_c.read_event(data)  # type: ignore[call-arg]


def test_what_is_not_bytes_still_goes_through_fastavro() -> None:
    data = wire.encode_event(GOOD)
    assert wire.decode_event(bytearray(data)) == wire.decode_event(memoryview(data)) == GOOD  # type: ignore[arg-type]
    for bad in (None, "text", data[:5], b"\xc3\x02" + data[2:], data[:2] + b"\x00" * 8 + data[10:]):
        with pytest.raises(DecodeError):
            wire.decode_event(bad)  # type: ignore[arg-type]


@needs_c
def test_the_c_reader_does_not_leak(construction: bool) -> None:
    inputs = [*few_messages(), *(m[:len(m) // 2] for m in few_messages()), wire.encode_event(GOOD) + b"\x00",
              *(body(**change) for change in REFUSED_BY_BOTH[::3])]

    def run() -> None:
        for data in inputs:
            answer(data)

    for _ in range(50):
        run()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(500):
            run()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes kept after {500 * len(inputs)} reads"


# -- messages written with an older form of the schema go through fastavro -------------------

def older_messages() -> list[tuple[bytes, ev.Event]]:
    """The corpus's events as every kept older writer schema of provstream.Event writes them."""
    current, writers = codec._registry()
    older = [w for w in writers.values() if w.name == codec.EVENT and w.fingerprint != current[codec.EVENT].fingerprint]
    assert older, "schemas/history/ keeps no older provstream.Event"
    out = []
    for writer in older:
        for event in corpus_events():
            buf = io.BytesIO()
            buf.write(codec.MAGIC + writer.fingerprint)
            schemaless_writer(buf, writer.parsed, wire.event_to_avro(event))
            out.append((buf.getvalue(), event))
    return out


def test_older_messages_decode_through_fastavro(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[bytes] = []
    read = wire._read_event

    def spy(data: bytes, pos: int) -> ev.Event:
        calls.append(data)
        assert read is not None
        return read(data, pos)

    monkeypatch.setattr(wire, "_read_event", spy if read is not None else None)
    for data, event in older_messages():
        assert not data.startswith(event_writer.HEADER)
        expected = fastavro_path(data)
        assert expected == event  # the scenario's questions leave the fields added since at None
        assert_same(wire.decode_event(data), expected)
    assert calls == []
    current = wire.encode_event(GOOD)
    assert wire.decode_event(current) == GOOD
    assert calls == ([current] if read is not None else [])
