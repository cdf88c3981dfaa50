"""The emitter SDK over the in-memory transport (and the Kafka transport's policy with no broker)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from provstream.codec.records import decode_event, encode_event
from provstream.connectors.emitter import TOO_LARGE, Emitter, NullSession, arguments_json, size_bound, too_large
from provstream.connectors.transport import KafkaTransport, MemoryTransport, Value
from provstream.core import events as ev
from provstream.core.fold import FoldState, fold
from provstream.core.triples import SessionState
from provstream.core.vocab import Mechanism
from provstream.errors import DeliveryFailed, EmitError, EmitTimeout, InvalidStep, StepTooLarge
from provstream.settings import Settings

SETTINGS = Settings(user="alice", collection="papers")


def make() -> tuple[Emitter, MemoryTransport]:
    transport = MemoryTransport()
    return Emitter(SETTINGS, transport=transport), transport


def events(transport: MemoryTransport) -> list[ev.Event]:
    return [decode_event(v) for _, v in transport.sent]


def test_agent_session_records_each_step_as_it_happens() -> None:
    emitter, t = make()
    s = emitter.agent("Q?", session_id="sess-1")
    assert s.uri == "urn:trustgraph:agent:sess-1" and len(t.sent) == 1
    assert s.iteration(thought="t1", action="Search", arguments={"input": "x"}, observation="o1") \
        == "urn:trustgraph:agent:sess-1/i1"
    assert len(t.sent) == 2
    assert s.iteration(thought="t2") == "urn:trustgraph:agent:sess-1/i2"
    assert s.conclude("A") == "urn:trustgraph:agent:sess-1/final"
    got = events(t)
    assert [e.seq for e in got] == [0, 1, 2, 3]
    assert [k for k, _ in t.sent] == [b"sess-1"] * 4
    assert [type(e.payload) for e in got] == [ev.AgentQuestion, ev.AgentIteration, ev.AgentIteration,
                                              ev.AgentConclusion]
    assert got[1].payload == ev.AgentIteration(1, "t1", "Search", '{"input": "x"}', "o1")
    assert got[3].payload == ev.AgentConclusion("A", 2)
    assert {(e.user, e.collection, e.mechanism.value) for e in got} == {("alice", "papers", "AGENT")}
    assert len({e.event_id for e in got}) == 4
    assert all(uuid.UUID(e.event_id).version == 4 for e in got)
    assert all(e.event_time.tzinfo == UTC and abs((datetime.now(UTC) - e.event_time).total_seconds()) < 60
               for e in got)


def test_default_session_id_is_a_uuid4_and_scope_can_be_overridden() -> None:
    emitter, t = make()
    s = emitter.agent("Q", user="bob", collection="c2")
    assert uuid.UUID(s.session_id).version == 4
    assert s.uri == f"urn:trustgraph:agent:{s.session_id}"
    e = events(t)[0]
    assert (e.user, e.collection, e.session_id) == ("bob", "c2", s.session_id)


def test_docrag_and_graphrag_sessions() -> None:
    emitter, t = make()
    d = emitter.docrag("doc?", session_id="d1")
    assert d.explore(5, ["c1", "c2"]) == "urn:trustgraph:docrag:d1/exploration"
    assert d.synthesize("answer") == "urn:trustgraph:docrag:d1/synthesis"
    g = emitter.graphrag("graph?", session_id="g1")
    assert g.uri == "urn:trustgraph:question:g1"
    assert g.explore(40) == "urn:trustgraph:prov:exploration:g1"
    assert g.focus([("http://x/s", "http://x/p", "o"), ("http://x/s", "http://x/q", "http://x/o", "why"),
                    ev.SelectedEdge("a:s", "a:p", "lit", "r")]) == "urn:trustgraph:prov:focus:g1"
    assert g.synthesize("g answer") == "urn:trustgraph:prov:synthesis:g1"
    got = events(t)
    assert [e.payload for e in got] == [
        ev.DocRagQuestion("doc?"), ev.DocRagExploration(5, ("c1", "c2")), ev.DocRagSynthesis("answer"),
        ev.GraphRagQuestion("graph?"), ev.GraphRagExploration(40),
        ev.GraphRagFocus((ev.SelectedEdge("http://x/s", "http://x/p", "o"),
                          ev.SelectedEdge("http://x/s", "http://x/q", "http://x/o", "why"),
                          ev.SelectedEdge("a:s", "a:p", "lit", "r"))),
        ev.GraphRagSynthesis("g answer"),
    ]
    assert [e.seq for e in got] == [0, 1, 2, 0, 1, 2, 3]


def test_iteration_links_its_subtrace_and_the_dag() -> None:
    emitter, t = make()
    a = emitter.agent("Q", session_id="a1")
    g = emitter.graphrag("sub", session_id="g1")
    a.iteration(action="GraphRag", subtrace=g)
    a.iteration(used=[1])
    a.iteration(subtrace=emitter.docrag("x", session_id=""))
    a.iteration(action="researcher", subtrace=emitter.agent("sub-question", session_id="b1"))
    its = [e.payload for e in events(t) if isinstance(e.payload, ev.AgentIteration)]
    assert its[0].subtrace == ev.SubTrace(ev.Mechanism.GRAPHRAG, "g1")
    assert its[1].used == (1,) and its[2].subtrace is None
    assert its[3].subtrace == ev.SubTrace(ev.Mechanism.AGENT, "b1")


def test_the_question_may_name_its_conversation_and_agent_empty_is_none() -> None:
    emitter, t = make()
    emitter.agent("Q", session_id="a1", conversation_id="thread-1", agent_name="researcher")
    emitter.agent("Q", session_id="a2", conversation_id="", agent_name="")
    emitter.agent("Q", session_id="a3")
    assert [e.payload for e in events(t)] == [
        ev.AgentQuestion("Q", conversation_id="thread-1", agent_name="researcher"),
        ev.AgentQuestion("Q"), ev.AgentQuestion("Q"),
    ]


def test_empty_session_id_records_nothing_and_needs_no_transport() -> None:
    emitter = Emitter(replace(SETTINGS, kafka_bootstrap="127.0.0.1:1"))
    for open_session in (emitter.agent, emitter.docrag, emitter.graphrag):
        s = open_session("Q", session_id="")
        assert isinstance(s, NullSession) and s.uri == "" and s.session_id == ""
        assert s.iteration(thought="t", arguments={"a": 1}) == "" and s.conclude("a") == ""
        assert s.explore(3, ["c"]) == "" and s.explore(3) == "" and s.focus([]) == "" and s.synthesize("x") == ""
    assert emitter._transport is None
    emitter.close()


def test_constructor_does_no_io() -> None:
    emitter = Emitter(replace(SETTINGS, kafka_bootstrap="127.0.0.1:1"))
    assert emitter._transport is None
    emitter.close()


def test_arguments_are_canonical_json_with_unicode_kept() -> None:
    assert arguments_json({"b": 1, "a": "é 🎸"}) == '{"a": "é 🎸", "b": 1}'
    assert arguments_json(None) == "{}"


@pytest.mark.parametrize("arguments", [{"x": object()}, {"x": float("nan")}, {"x": {1, 2}}, ["not", "a", "map"]])
def test_arguments_that_are_not_json_are_refused_at_the_call(arguments: object) -> None:
    emitter, t = make()
    s = emitter.agent("Q", session_id="a1")
    with pytest.raises(InvalidStep, match="arguments"):
        s.iteration(arguments=arguments)  # type: ignore[arg-type]
    assert len(t.sent) == 1
    assert s.iteration(arguments={"x": 1}) == "urn:trustgraph:agent:a1/i1", "a refused call consumes no number"
    assert events(t)[1].seq == 1


@pytest.mark.parametrize("call", [
    lambda e: e.agent("Q", session_id="bad id"),
    lambda e: e.agent("Q", session_id="x" * 200),
    lambda e: e.agent(42),
    lambda e: e.agent("Q", user=""),
    lambda e: e.agent("Q").iteration(used=[1]),
    lambda e: e.agent("Q").iteration(used="1"),
    lambda e: e.agent("Q").iteration(thought=3),
    lambda e: (lambda s: s.iteration(subtrace=s))(e.agent("Q")),
    lambda e: e.agent("Q").iteration(subtrace="a session"),
    lambda e: e.docrag("Q").explore(-1, []),
    lambda e: e.docrag("Q").explore(True, []),
    lambda e: e.docrag("Q").explore(2, "c1"),
    lambda e: e.docrag("Q").explore(2, [1]),
    lambda e: e.graphrag("Q").explore("3"),
    lambda e: e.graphrag("Q").focus([("s", "p")]),
    lambda e: e.graphrag("Q").focus(["spo"]),
    lambda e: e.graphrag("Q").focus([("not an iri", "http://x/p", "o")]),
    lambda e: e.graphrag("Q").synthesize(None),
    lambda e: e.agent("Q", user=7),
    lambda e: e.agent("Q", collection=["c"]),
    lambda e: e.agent("Q", conversation_id=42),
    lambda e: e.agent("Q", agent_name=["researcher"]),
    lambda e: e.graphrag("Q").focus([ev.SelectedEdge("http://x/s", "http://x/p", 3)]),  # type: ignore[arg-type]
])
def test_bad_input_is_refused_at_the_call_with_invalid_step(call) -> None:  # type: ignore[no-untyped-def]
    emitter, _ = make()
    with pytest.raises(InvalidStep):
        call(emitter)


def test_a_step_over_the_message_limit_is_recorded_as_a_marker_step() -> None:
    transport = MemoryTransport()
    emitter = Emitter(replace(SETTINGS, max_message_bytes=4096), transport=transport)
    s = emitter.agent("Q", session_id="a1")
    assert s.iteration(thought="t", action="search", observation="x" * 4000, used=()) == "urn:trustgraph:agent:a1/i1"
    marker = events(transport)[-1].payload
    assert isinstance(marker, ev.AgentIteration) and marker.iteration == 1 and marker.action == "search"
    assert re.fullmatch(r"\[provstream: step too large to record: \d{4,5} bytes encoded, over the limit of 3584 "
                        r"bytes \(PROVSTREAM_MAX_MESSAGE_BYTES\); its texts were dropped\]", marker.thought)
    assert marker.observation == "" and marker.arguments == "{}" and emitter.too_large == 1
    fits = 3584 - len(transport.sent[0][1]) - 200
    assert s.iteration(observation="y" * fits) == "urn:trustgraph:agent:a1/i2"
    assert len(transport.sent[-1][1]) + len(b"a1") <= 3584
    s.conclude("z" * 5000)
    assert events(transport)[-1].payload.answer.startswith(TOO_LARGE)  # type: ignore[union-attr]


def test_every_kind_of_step_has_a_marker_of_its_own_type() -> None:
    edge = ev.SelectedEdge("http://x/s", "http://x/p", "o" * 9000)
    for payload in (ev.AgentQuestion("q" * 9000), ev.DocRagQuestion("q"), ev.GraphRagQuestion("q"),
                    ev.DocRagExploration(3, ("c" * 9000,)), ev.GraphRagFocus((edge,)), ev.DocRagSynthesis("s"),
                    ev.GraphRagSynthesis("s"), ev.AgentConclusion("a", 2)):
        marker = too_large(payload, 12345, 3584)
        assert type(marker) is type(payload) and "12345 bytes" in repr(marker)


def test_not_even_the_marker_fits_a_tiny_limit() -> None:
    emitter = Emitter(replace(SETTINGS, max_message_bytes=700), transport=MemoryTransport())
    s = emitter.agent("Q", session_id="a1")
    with pytest.raises(StepTooLarge, match="iteration 1 of session 'a1' is .* bytes encoded and even its"):
        s.iteration(observation="x" * 4000)


def test_unicode_and_large_texts_arrive_intact() -> None:
    t = MemoryTransport()
    emitter = Emitter(replace(SETTINGS, max_message_bytes=8_000_000), transport=t)
    text = "Ünïcödé — 日本語 — 🎸\u0000\n" * 20_000
    s = emitter.agent(text, session_id="u1")
    s.iteration(thought=text, observation=text, arguments={"q": text})
    got = events(t)
    assert got[0].payload == ev.AgentQuestion(text)
    assert got[1].payload.thought == text and json.loads(got[1].payload.arguments) == {"q": text}  # type: ignore


class RawTransport(MemoryTransport):
    """Keeps the values exactly as the emitter handed them over."""

    def __init__(self) -> None:
        super().__init__()
        self.raw: list[Value] = []

    def send(self, key: bytes, value: Value) -> None:
        self.raw.append(value)
        super().send(key, value)


def test_small_steps_are_encoded_by_the_transport_not_at_the_call() -> None:
    t = RawTransport()
    emitter = Emitter(SETTINGS, transport=t)
    s = emitter.agent("Q", session_id="a1")
    s.iteration(thought="t", action="Search", arguments={"q": "x"}, observation="o")
    assert all(callable(v) for v in t.raw), "the caller hands over a function, the transport encodes"
    assert [decode_event(v).seq for _, v in t.sent] == [0, 1]
    assert t.sent[1][1] == encode_event(decode_event(t.sent[1][1]))


texts = st.text(st.characters(codec="utf-8"), max_size=60)


@st.composite
def any_event(draw: st.DrawFn) -> ev.Event:
    payload = draw(st.one_of(
        st.builds(ev.AgentQuestion, texts),
        st.builds(ev.AgentIteration, iteration=st.integers(1, 2**40), thought=texts, action=texts,
                  arguments=texts, observation=texts, used=st.lists(st.integers(1, 2**40)).map(tuple),
                  subtrace=st.one_of(st.none(), st.builds(ev.SubTrace, st.just(Mechanism.DOCRAG), texts))),
        st.builds(ev.AgentConclusion, answer=texts, iterations=st.integers(0, 2**40)),
        st.builds(ev.DocRagExploration, chunk_count=st.integers(0, 2**62), chunks=st.lists(texts).map(tuple)),
        st.builds(ev.GraphRagFocus, edges=st.lists(st.builds(ev.SelectedEdge, texts, texts, texts, texts)).map(tuple)),
        st.builds(ev.GraphRagSynthesis, texts),
        st.builds(ev.GraphRagQuestion, texts),
        st.builds(ev.GraphRagExploration, st.integers(0, 2**62)),
        st.builds(ev.DocRagQuestion, texts),
        st.builds(ev.DocRagSynthesis, texts),
    ))
    return ev.Event(event_id=draw(texts), session_id=draw(texts), mechanism=ev.MECHANISM_OF[type(payload)],
                    seq=draw(st.integers(0, 2**62)), event_time=datetime(2025, 1, 1, tzinfo=UTC),
                    payload=payload, user=draw(texts), collection=draw(texts))


@hsettings(max_examples=300, deadline=None)
@given(any_event())
def test_the_size_bound_is_never_below_the_encoded_size(event: ev.Event) -> None:
    assert size_bound(event) >= len(encode_event(event))


class FailingTransport(MemoryTransport):
    def __init__(self) -> None:
        super().__init__()
        self.fail: Exception | None = None

    def send(self, key: bytes, value: Value) -> None:
        if self.fail is not None:
            failure, self.fail = self.fail, None
            raise failure
        super().send(key, value)

    def flush(self, timeout: float | None = None) -> None:
        if self.fail is not None:
            raise self.fail


def test_transport_errors_surface_at_the_call_and_consume_no_number() -> None:
    transport = FailingTransport()
    emitter = Emitter(SETTINGS, transport=transport)
    s = emitter.agent("Q", session_id="a1")
    transport.fail = DeliveryFailed("1 step(s) not delivered")
    with pytest.raises(DeliveryFailed):
        s.iteration(thought="t")
    transport.fail = EmitTimeout("buffer full")
    with pytest.raises(EmitTimeout):
        s.iteration(thought="t")
    s.iteration(thought="t")
    assert [e.seq for e in events(transport)] == [0, 1]
    assert events(transport)[1].payload.iteration == 1  # type: ignore[union-attr]
    transport.fail = DeliveryFailed("late failure")
    with pytest.raises(DeliveryFailed):
        emitter.flush()


def test_close_is_idempotent_and_a_closed_emitter_refuses_steps() -> None:
    emitter, t = make()
    with emitter:
        emitter.agent("Q")
    assert t.closed
    emitter.close()
    with pytest.raises(EmitError, match="closed"):
        emitter.agent("Q")


def test_threads_sharing_a_session_get_distinct_contiguous_numbers_in_send_order() -> None:
    emitter, t = make()
    s = emitter.agent("Q", session_id="a1")
    threads = [threading.Thread(target=lambda: [s.iteration(thought="x") for _ in range(50)]) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    got = events(t)
    assert [e.seq for e in got] == list(range(201))
    assert [e.payload.iteration for e in got[1:]] == list(range(1, 201))  # type: ignore[union-attr]


def test_every_emitted_event_folds_into_a_concluded_session() -> None:
    emitter, t = make()
    g = emitter.graphrag("g", session_id="g1")
    g.explore(3)
    g.focus([("http://x/s", "http://x/p", "o", "r")])
    g.synthesize("gs")
    d = emitter.docrag("d", session_id="d1")
    d.explore(2, ["c"])
    d.synthesize("ds")
    a = emitter.agent("a", session_id="a1")
    a.iteration(thought="t", action="GraphRag", arguments={"q": "g"}, observation="o", subtrace=g)
    a.iteration(thought="t2", used=[1])
    a.conclude("done")
    states: dict[str, FoldState | None] = defaultdict(lambda: None)
    for e in events(t):
        states[e.session_id], out = fold(states[e.session_id], e)
    assert out.status.state is SessionState.CONCLUDED


# -- Kafka transport policy, no broker needed ---------------------------------

def unreachable(block_ms: int = 300, buffer: int = 3) -> Settings:
    return replace(SETTINGS, kafka_bootstrap="127.0.0.1:1", emit_block_ms=block_ms, emit_buffer=buffer)


def test_kafka_transport_constructor_does_nothing() -> None:
    t = KafkaTransport(unreachable())
    assert t._thread is None
    t.close()


def test_unreachable_kafka_fills_the_buffer_then_times_out_with_a_clear_error() -> None:
    t = KafkaTransport(unreachable())
    try:
        for _ in range(3):
            t.send(b"k", b"v")  # buffered, returns at once
        start = time.monotonic()
        with pytest.raises(EmitTimeout, match=r"emit buffer full \(3 steps\) for 0.3s: Kafka at 127.0.0.1:1"):
            t.send(b"k", b"v")
        assert 0.25 < time.monotonic() - start < 5
        with pytest.raises(EmitTimeout, match="3 step\\(s\\) still not acknowledged"):
            t.flush(timeout=0.2)
        with pytest.raises(EmitError, match="cannot reach Kafka at 127.0.0.1:1"):
            t.wait_connected(2)
    finally:
        with pytest.raises(DeliveryFailed):
            t.close(timeout=0.1)
    assert t._thread is not None and not t._thread.is_alive()
    with pytest.raises(EmitError, match="closed"):
        t.send(b"k", b"v")


class FakeBatch:
    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes]] = []

    def append(self, *, timestamp: object, key: bytes, value: bytes, headers: object) -> object:
        self.records.append((key, value))
        return object()

    def close(self) -> None: ...


class FakeProducer:
    """Stands in for aiokafka's producer: one future per record batch, which the test settles by hand."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes, int]] = []
        self.batches: list[tuple[asyncio.Future[None], list[bytes]]] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self.client = SimpleNamespace(_wait_on_metadata=self._metadata,
                                      cluster=SimpleNamespace(partitions_for_topic=lambda topic: {0, 1, 2, 3}))

    async def _metadata(self, topic: str) -> None: ...

    def _partitioner(self, key: bytes, all_partitions: list[int], available: list[int]) -> int:
        from aiokafka.partitioner import DefaultPartitioner

        return DefaultPartitioner()(key, all_partitions, available)  # type: ignore[no-any-return]

    def create_batch(self) -> FakeBatch:
        return FakeBatch()

    async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int) -> asyncio.Future[None]:
        self.loop = asyncio.get_running_loop()
        self.sent += [(topic, key, value, partition) for key, value in batch.records]
        self.batches.append((self.loop.create_future(), [key for key, _ in batch.records]))
        return self.batches[-1][0]

    def settle(self, index: int, exc: BaseException | None = None) -> None:
        """Kafka answers for batch ``index`` (from the test's thread)."""
        future = self.batches[index][0]
        assert self.loop is not None
        self.loop.call_soon_threadsafe(future.set_result if exc is None else future.set_exception,
                                       None if exc is None else exc)

    def settle_all(self) -> None:
        for i in range(len(self.batches)):
            self.settle(i)

    async def flush(self) -> None: ...

    async def stop(self) -> None: ...


class FakeKafkaTransport(KafkaTransport):
    def __init__(self, settings: Settings, producer: object) -> None:
        super().__init__(settings)
        self.producer = producer

    async def _connect(self) -> object:
        self._connected.set()
        self._attempted.set()
        return self.producer


def wait_for(condition, timeout: float = 5) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


def test_kafka_transport_keys_partitions_like_the_default_partitioner_and_keeps_fifo() -> None:
    from kafka.partitioner.default import murmur2

    producer = FakeProducer()
    t = FakeKafkaTransport(unreachable(buffer=100), producer)
    keys = [f"session-{i % 7}".encode() for i in range(40)]
    for i, key in enumerate(keys):
        t.send(key, b"%d" % i)
    wait_for(lambda: len(producer.sent) == 40)
    for partition in range(4):  # FIFO per partition (the order Kafka keeps)
        mine = [int(v) for _, _, v, p in producer.sent if p == partition]
        assert mine == sorted(mine)
    assert sorted(int(v) for _, _, v, _ in producer.sent) == list(range(40))
    assert all(p == (murmur2(k) & 0x7FFFFFFF) % 4 for _, k, _, p in producer.sent)
    assert len(producer.batches) < 40, "steps queued together share a record batch"
    producer.settle_all()
    t.flush(timeout=5)
    t.close()


def test_delivery_failures_surface_from_the_next_send_and_from_flush() -> None:
    producer = FakeProducer()
    t = FakeKafkaTransport(unreachable(buffer=100), producer)
    t.send(b"s1", b"a")
    wait_for(lambda: len(producer.batches) == 1)
    t.send(b"s2", b"b")
    wait_for(lambda: len(producer.batches) == 2)
    producer.settle(0, RuntimeError("NotEnoughReplicas"))
    producer.settle(1)
    wait_for(lambda: bool(t._failures))
    with pytest.raises(DeliveryFailed, match=r"1 step\(s\) not delivered .*sessions: s1.*NotEnoughReplicas"):
        t.send(b"s3", b"c")
    t.send(b"s3", b"c")  # reported once; the transport goes on
    wait_for(lambda: len(producer.batches) == 3)
    producer.settle(2, RuntimeError("timed out"))
    with pytest.raises(DeliveryFailed, match="timed out"):
        t.flush(timeout=5)
    t.close()


def test_the_sender_encodes_function_values_and_reports_one_that_fails() -> None:
    producer = FakeProducer()
    t = FakeKafkaTransport(unreachable(buffer=100), producer)
    sender: list[str] = []

    def value() -> bytes:
        sender.append(threading.current_thread().name)
        return b"encoded"

    def broken() -> bytes:
        raise ValueError("cannot encode")

    t.send(b"s1", value)
    t.send(b"s2", broken)
    wait_for(lambda: len(producer.sent) == 1 and bool(t._failures))
    assert producer.sent[0][2] == b"encoded" and sender == ["provstream-emitter"]
    producer.settle_all()
    with pytest.raises(DeliveryFailed, match="sessions: s2.*ValueError: cannot encode"):
        t.flush(timeout=5)
    t.close()


def test_close_gives_up_on_a_batch_kafka_never_takes_and_stops_the_sender() -> None:
    class Stuck(FakeProducer):
        async def send_batch(self, batch: FakeBatch, topic: str, *, partition: int) -> asyncio.Future[None]:
            await asyncio.sleep(3600)  # the partition's previous batch never drains (Kafka away)
            raise AssertionError("unreachable")

    t = FakeKafkaTransport(unreachable(buffer=100), Stuck())
    t.send(b"s1", b"a")
    with pytest.raises(DeliveryFailed, match=r"1 step\(s\) not delivered"):
        t.close(timeout=0.2)
    assert t._thread is not None
    t._thread.join(5)
    assert not t._thread.is_alive()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the crash is the point
def test_a_crashed_sender_refuses_new_steps_and_reports_the_buffered_ones() -> None:
    class Broken(FakeProducer):
        def create_batch(self) -> FakeBatch:
            raise RuntimeError("a bug in the sender")

    t = FakeKafkaTransport(unreachable(buffer=1000), Broken())
    for _ in range(300):
        try:
            t.send(b"k", b"v")
        except EmitError as exc:
            assert "the Kafka sender stopped" in str(exc)
            break
        time.sleep(0.001)
    else:
        pytest.fail("the transport kept taking steps after its sender crashed")
    with pytest.raises(DeliveryFailed):
        t.close(timeout=0.5)
