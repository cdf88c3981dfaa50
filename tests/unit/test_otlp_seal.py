"""Sealing OTLP spans at the receiver (``PROVSTREAM_ENCRYPT=1``): spans from the real OpenTelemetry SDK.

The translation of sealed spans, its texts opened, must be the translation of the clear spans; no clear
personal text may be left in what goes to Kafka or into the worker's table; sealing is deterministic;
an erased key reads ``[erased]``.
"""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass, replace
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.trace import set_span_in_context
from otlp_support import (
    Call,
    Clock,
    Collected,
    Run,
    Turn,
    emit_run,
    multi_tool,
    run_of,
    sdk_tracer,
    with_retrieval,
    with_subagent,
)

from provstream.codec.otlp import key_scope, parse_protobuf, span_records, split_by_trace, value_of
from provstream.codec.otlp_seal import seal_messages, seal_request
from provstream.core import events as ev
from provstream.core.events import SEALED_PREFIX
from provstream.core.trajectories import AgentTrajectory, load
from provstream.crypto import ERASED, KeyRing, MemoryKeyStore, kid_of, open_text
from provstream.crypto import Scope as KeyScope
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings
from provstream.streams.spans import Scope, step

SETTINGS = Settings(user="otlp-user", collection="otlp-coll")
MASTER = AESGCM(bytes(range(32)))
RUNS = [run_of(r) for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory)]
DOCS = ({"id": "colorado-orogeny#1", "content": "The Colorado orogeny was an episode of mountain building"},
        {"content": "SECRET-DOC the High Plains are a subregion of the Great Plains"})  # no id: sha256 of the text
MARK = "SECRET-7Q"
MARKED = Run(f"{MARK} where is my parcel?", f"{MARK} at the depot", [
    Turn(f"{MARK} I look it up", [Call("Lookup", {"parcel": f"{MARK}-123"}, f"{MARK} parcel at the depot",
                                      documents=DOCS)]),
    Turn(f"{MARK} one more thought"),
    Turn(f"{MARK} a second call", [Call("Notify", {"to": f"{MARK}@example.org"}, f"{MARK} sent")]),
])
TEXT_FIELDS = ("query", "thought", "arguments", "observation", "answer", "content")


def scenarios() -> dict[str, Run]:
    return {"plain": RUNS[0], "multi-tool": multi_tool(RUNS[8], 0), "sub-agent": with_subagent(RUNS[1], 0, RUNS[9]),
            "retrieval": with_retrieval(RUNS[11], 1, DOCS), "marked": MARKED}


def _spans(run: Run) -> Collected:
    collected = Collected()
    with sdk_tracer(collected, SETTINGS) as tracer:
        emit_run(tracer, run, Clock())
    return collected


def _ring(store: MemoryKeyStore | None = None) -> KeyRing:
    return KeyRing(store if store is not None else MemoryKeyStore(), MASTER)


def _seal(payload: bytes, ring: KeyRing) -> bytes:
    request = parse_protobuf(payload)
    seal_request(request, lambda scope: ring.shared_sealer(*scope).seal, "d-user", "d-coll")
    return request.SerializeToString()


def _translate(payloads: list[bytes], settle: bool = False) -> tuple[list[ev.Event], list[Any]]:
    state, events, states, now = None, [], [], 1000.0
    for p in payloads:
        for _key, value in split_by_trace(parse_protobuf(p)):
            result = step(state, span_records(value), now, scope=Scope("d-user", "d-coll"), settle_s=3)
            state, now = result.state, now + 0.01
            events += result.events
            states.append(state)
    if settle:
        result = step(state, [], now + 3, scope=Scope("d-user", "d-coll"), settle_s=3)
        events += result.events
        states.append(result.state)
    return events, states


def _opened(e: ev.Event, ring: KeyRing) -> ev.Event:
    p = e.payload
    changes = {f.name: ring.open(getattr(p, f.name)) for f in fields(p) if f.name in TEXT_FIELDS}  # type: ignore
    return replace(e, payload=replace(p, **changes))  # type: ignore[type-var]


def _texts(e: ev.Event) -> list[str]:
    p = e.payload
    assert is_dataclass(p)
    return [getattr(p, f.name) for f in fields(p) if f.name in TEXT_FIELDS and getattr(p, f.name)]


@pytest.mark.parametrize("name", sorted(scenarios()))
@pytest.mark.parametrize("order", ["natural", "span-by-span", "reverse"])
def test_sealed_spans_translate_to_the_clear_trace(name: str, order: str) -> None:
    spans = _spans(scenarios()[name]).spans
    if order == "reverse":
        spans = list(reversed(spans))
    batches = [spans] if order == "natural" else [spans[i:i + (1 if order == "span-by-span" else 3)]
                                                  for i in range(0, len(spans), 1 if order == "span-by-span" else 3)]
    clear = [encode_spans(b).SerializeToString() for b in batches]
    ring = _ring()
    want, _ = _translate(clear, settle=order == "reverse")
    got, states = _translate([_seal(p, ring) for p in clear], settle=order == "reverse")
    assert want and len(got) == len(want)
    assert [_opened(e, ring) for e in got] == want
    sealed = [t for e in got for t in _texts(e)]
    unsealed = {t for t in sealed if not t.startswith(SEALED_PREFIX)}
    assert sealed and unsealed <= {"{}"}  # every text is sealed ("{}": a step without a tool call, not a text)
    if name == "marked":
        assert MARK not in repr(got) and not any(MARK in json.dumps(s) for s in states)  # events, worker table


def test_no_clear_personal_text_reaches_the_spans_topic_and_structure_stays() -> None:
    payload = encode_spans(_spans(MARKED).spans).SerializeToString()
    assert payload.count(MARK.encode()) > 10
    sealed = _seal(payload, _ring())
    assert MARK.encode() not in sealed and b"SECRET-DOC" not in sealed
    before, after = parse_protobuf(payload), parse_protobuf(sealed)
    personal = {"gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result", "gen_ai.retrieval.query.text", "gen_ai.retrieval.documents"}
    for rs_b, rs_a in zip(before.resource_spans, after.resource_spans, strict=True):
        assert rs_b.resource == rs_a.resource
        for s_b, s_a in zip(rs_b.scope_spans[0].spans, rs_a.scope_spans[0].spans, strict=True):
            assert (s_b.name, s_b.span_id, s_b.parent_span_id, s_b.start_time_unix_nano, s_b.status) == \
                (s_a.name, s_a.span_id, s_a.parent_span_id, s_a.start_time_unix_nano, s_a.status)
            clear_b = {kv.key: kv.value for kv in s_b.attributes if kv.key not in personal}
            clear_a = {kv.key: kv.value for kv in s_a.attributes if kv.key not in personal}
            assert clear_a == clear_b  # operation, model, tool name, call id, agent name, conversation id
            assert {kv.key for kv in s_a.attributes} == {kv.key for kv in s_b.attributes}
    messages = [json.loads(kv.value.string_value) for s in after.resource_spans[0].scope_spans[0].spans
                for kv in s.attributes if kv.key == "gen_ai.input.messages"]
    assert {m["role"] for ms in messages for m in ms} == {"user", "assistant", "tool"}  # roles in clear
    docs = [json.loads(kv.value.string_value) for s in after.resource_spans[0].scope_spans[0].spans
            for kv in s.attributes if kv.key == "gen_ai.retrieval.documents"]
    assert docs[0][0]["id"] == "colorado-orogeny#1" and docs[0][1]["id"].startswith("sha256:")


def test_sealing_is_deterministic_across_requests_and_receivers() -> None:
    payload = encode_spans(_spans(MARKED).spans).SerializeToString()
    store = MemoryKeyStore()
    first = _seal(payload, _ring(store))
    assert _seal(payload, _ring(store)) != b""  # the second ring found the first one's key in the store...
    again = MemoryKeyStore()
    again.log = list(store.log)
    assert _seal(payload, _ring(again)) == first  # ...and seals to the same bytes (a restart, another receiver)
    assert len(again.log) == len(store.log) == 1  # one data key for the trace, stored once
    one_ring = _ring()
    assert _seal(payload, one_ring) == _seal(payload, one_ring)  # an exporter's retry


def test_one_key_per_trace_and_scope_named_for_erase() -> None:
    collected = Collected()
    with sdk_tracer(collected, SETTINGS) as tracer:
        emit_run(tracer, RUNS[0], Clock())
        emit_run(tracer, RUNS[1], Clock())
    store = MemoryKeyStore()
    ring = _ring(store)
    request = encode_spans(collected.spans)
    seal_request(request, lambda scope: ring.shared_sealer(*scope).seal, "d-user", "d-coll")
    traces = {s.trace_id.hex() for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans}
    scopes = {json.loads(r or b"{}")["session"] for _, r in store.log}
    assert len(store.log) == 2 and scopes == {key_scope(t, "", "", "u", "c")[2] for t in traces}
    assert {json.loads(r or b"{}")["user"] for _, r in store.log} == {SETTINGS.user}


def test_erased_key_reads_erased() -> None:
    store = MemoryKeyStore()
    ring = _ring(store)
    sealed_payload = _seal(encode_spans(_spans(MARKED).spans).SerializeToString(), ring)
    events, _ = _translate([sealed_payload])
    [question] = [e for e in events if isinstance(e.payload, ev.AgentQuestion)]
    reader = _ring(store)
    assert MARK in _opened(question, reader).payload.query  # type: ignore[attr-defined]
    [(kid, _)] = store.log
    store.put(kid, None)  # provstream erase tombstones the trace's key
    later = _ring(store)
    assert {t for e in events for t in _texts(_opened(e, later))} == {ERASED, "{}"}  # "{}": a thought-only step
    assert reader.forget(SETTINGS.user, SETTINGS.collection) == [kid]  # a retraction: the sink forgets it too
    assert _opened(question, reader).payload.query == ERASED  # type: ignore[attr-defined]


def test_openinference_spans_and_span_events_are_sealed() -> None:
    collected = Collected()
    clock = Clock()
    with sdk_tracer(collected, SETTINGS) as tracer:
        agent = tracer.start_span("agent", start_time=clock(), attributes={
            "openinference.span.kind": "AGENT", "input.value": f"{MARK} question", "agent.name": "oi"})
        ctx = set_span_in_context(agent)
        llm = tracer.start_span("llm", context=ctx, start_time=clock(), attributes={
            "openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.contents.0.message_content.type": "text",
            "llm.input_messages.0.message.contents.0.message_content.text": f"{MARK} part one",
            "llm.input_messages.0.message.contents.1.message_content.text": f"{MARK} part two",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": f"{MARK} thinking",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "c0",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "search",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": f'{{"q": "{MARK}"}}',
            "llm.prompts": [f"{MARK} raw prompt"], "llm.model_name": "m1"})
        llm.add_event("gen_ai.content.prompt", {"gen_ai.prompt": f"{MARK} event prompt"})
        llm.end(end_time=clock())
        tool = tracer.start_span("tool", context=ctx, start_time=clock(), attributes={
            "openinference.span.kind": "TOOL", "tool.name": "search", "tool_call.id": "c0",
            "input.value": f'{{"q": "{MARK}"}}', "output.value": f"{MARK} found"})
        retriever = tracer.start_span("retriever", context=set_span_in_context(tool), start_time=clock(), attributes={
            "openinference.span.kind": "RETRIEVER", "input.value": f"{MARK} query",
            "retrieval.documents.0.document.content": f"{MARK} doc text", "retrieval.documents.0.document.score": 0.5})
        retriever.end(end_time=clock())
        tool.end(end_time=clock())
        agent.set_attribute("output.value", f"{MARK} answer")
        agent.end(end_time=clock())
    clear = encode_spans(collected.spans).SerializeToString()
    ring = _ring()
    sealed = _seal(clear, ring)
    assert MARK.encode() not in sealed
    after = parse_protobuf(sealed).resource_spans[0].scope_spans[0].spans
    attrs = {kv.key: value_of(kv.value) for s in after for kv in s.attributes}
    assert attrs["llm.model_name"] == "m1" and attrs["tool.name"] == "search"
    assert attrs["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == "search"
    assert attrs["retrieval.documents.0.document.id"].startswith("sha256:")
    assert ring.open(attrs["llm.input_messages.0.message.content"]) == f"{MARK} part one\n{MARK} part two"
    [event] = [e for s in after for e in s.events]
    assert ring.open(event.attributes[0].value.string_value) == f"{MARK} event prompt"
    want, _ = _translate([clear], settle=True)  # the last chat asks for a tool: translated once settled
    got, states = _translate([sealed], settle=True)
    assert len(want) == 6 and [_opened(e, ring) for e in got] == want  # DocRAG x3, question, step, conclusion
    assert MARK not in repr(got) and not any(MARK in json.dumps(s) for s in states)


def test_the_sealed_format_is_the_emitters() -> None:
    ring = _ring()
    sealer = ring.shared_sealer("u", "c", "otlp-trace-ab")
    sealed = sealer.seal("hello")
    kid = kid_of(sealed)
    assert kid == sealer.kid and kid.startswith("otlp-trace-ab~")
    assert open_text(sealer.cipher, kid, sealed) == "hello" and ring.open(sealed) == "hello"
    assert sealer.seal("") == "" and sealer.seal("hello") == sealed and sealer.seal("hello!") != sealed


class _BatchStore(MemoryKeyStore):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def put_many(self, records: list[tuple[str, bytes]]) -> None:
        self.batches.append(len(records))
        for kid, record in records:
            self.put(kid, record)


def test_a_requests_new_trace_keys_are_stored_together_and_erased_ones_replaced() -> None:
    store = _BatchStore()
    ring = _ring(store)
    scopes = [KeyScope(SETTINGS.user, "c", f"otlp-trace-{n}") for n in range(3)]
    first = ring.shared_sealers(iter(scopes + scopes[:1]))  # any iterable
    assert store.batches == [3] and set(first) == set(scopes)
    assert ring.shared_sealers(scopes) == first and store.batches == [3]  # cached: no store access
    store.put(first[scopes[0]].kid, None)  # erased...
    other = _ring(store)  # ...a receiver starting now makes a new key for that trace, reuses the others
    again = other.shared_sealers(scopes)
    assert again[scopes[0]].kid != first[scopes[0]].kid and store.batches == [3, 1]
    assert [again[s].kid for s in scopes[1:]] == [first[s].kid for s in scopes[1:]]


def test_values_the_translation_skips_stay_skipped_once_sealed() -> None:
    """A message whose content is a list (not text): the translation reads its parts in clear, and still does."""
    messages = json.dumps([{"role": "user", "content": [{"type": "text", "text": f"{MARK} hi"}],
                            "parts": [{"type": "text", "content": f"{MARK} question"}]},
                           {"role": "assistant", "parts": [{"type": "text", "content": {"x": MARK}},
                                                           {"type": "text", "content": f"{MARK} answer"}]}])
    sealed = json.loads(seal_messages(messages, lambda t: f"<{len(t)}>"))
    assert MARK not in json.dumps(sealed)
    assert isinstance(sealed[0]["content"], list) and sealed[0]["parts"] == [{"type": "text", "content": "<18>"}]
    assert sealed[1]["parts"] == [{"type": "text", "content": ["<18>"]}, {"type": "text", "content": "<16>"}]
