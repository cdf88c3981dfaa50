"""The pure span -> event translation and the OTLP codec, with spans from the real OpenTelemetry SDK.

Every case compares with the trace the emitter records for the same steps (as graphs of triples).
"""

from __future__ import annotations

import gzip
import json
import random

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from otlp_support import (
    Clock,
    Collected,
    Run,
    emit_run,
    expected_events,
    fold_triples,
    multi_tool,
    run_of,
    sdk_tracer,
    with_retrieval,
    with_subagent,
)
from rdflib.compare import isomorphic

from provstream.codec.otlp import OtlpError, decompress, parse_json, parse_protobuf, span_records, split_by_trace
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.core.trajectories import AgentTrajectory, load
from provstream.core.triples import Iri, Triple
from provstream.core.vocab import Mechanism
from provstream.data import REACT_TRAJECTORIES
from provstream.read.rdf import to_graph
from provstream.settings import Settings
from provstream.streams.spans import Scope, pending, session_id, step

SETTINGS = Settings(user="otlp-user", collection="otlp-coll")
RUNS = [run_of(r) for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory)]
DOCS = ({"id": "colorado-orogeny#1", "content": "The Colorado orogeny was an episode of mountain building"},
        {"id": "high-plains#3", "content": "The High Plains are a subregion of the Great Plains"})


def scenarios() -> dict[str, Run]:
    return {
        "plain": RUNS[0],                                       # 4 tool steps, then a thought-only step
        "multi-tool": multi_tool(RUNS[8], 0),                   # one chat output asks for two tools
        "sub-agent": with_subagent(RUNS[1], 0, RUNS[9]),        # an agent used as a tool
        "retrieval": with_retrieval(RUNS[11], 1, DOCS),         # a DocRAG sub-trace under a tool call
    }


def _spans(run: Run, content: bool = True) -> tuple[Collected, object]:
    collected = Collected()
    with sdk_tracer(collected, SETTINGS) as tracer:
        rec = emit_run(tracer, run, Clock(), content=content)
    return collected, rec


def _payload(spans) -> bytes:  # type: ignore[no-untyped-def]
    return encode_spans(spans).SerializeToString()


def _translate(payloads: list[bytes], settle_tick: bool = False) -> tuple[list, dict]:  # type: ignore[type-arg]
    state = None
    events = []
    now = 1000.0
    for p in payloads:
        for _key, value in split_by_trace(parse_protobuf(p)):
            result = step(state, span_records(value), now, scope=Scope("d-user", "d-coll"), settle_s=3)
            state, now = result.state, now + 0.01
            events += result.events
    if settle_tick:
        result = step(state, [], now + 3, scope=Scope("d-user", "d-coll"), settle_s=3)
        state = result.state
        events += result.events
    assert state is not None
    return events, state


@pytest.mark.parametrize("name", sorted(scenarios()))
def test_natural_order_gives_the_emitters_trace(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run = scenarios()[name]
    collected, rec = _spans(run)
    events, state = _translate([_payload(collected.spans)])
    want = fold_triples(expected_events(run, rec, SETTINGS, monkeypatch))  # type: ignore[arg-type]
    got = fold_triples(events)
    assert got == want
    assert isomorphic(to_graph(got), to_graph(want))
    assert not pending(state) or not state["counted"]


@pytest.mark.parametrize("name", sorted(scenarios()))
def test_one_span_per_message_translates_when_the_agent_span_arrives(name: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    run = scenarios()[name]
    collected, rec = _spans(run)
    payloads = [_payload([s]) for s in collected.spans]
    events, _ = _translate(payloads[:-1])
    if name != "sub-agent":
        assert events == []  # nothing before the agent span
    events, _ = _translate(payloads)
    assert fold_triples(events) == fold_triples(expected_events(run, rec, SETTINGS, monkeypatch))  # type: ignore


@pytest.mark.parametrize("name", sorted(scenarios()))
def test_reverse_order_waits_for_the_trace_to_settle(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    run = scenarios()[name]
    collected, rec = _spans(run)
    spans = list(reversed(collected.spans))
    payloads = [_payload(spans[i:i + 3]) for i in range(0, len(spans), 3)]
    events, state = _translate(payloads)
    assert [e for e in events if e.session_id.startswith("x")] == []
    events_settled, state = _translate(payloads, settle_tick=True)
    assert fold_triples(events_settled) == fold_triples(expected_events(run, rec, SETTINGS, monkeypatch))  # type: ignore
    assert not pending(state)


def test_an_agent_under_a_tool_call_is_the_steps_agent_subtrace(monkeypatch: pytest.MonkeyPatch) -> None:
    run = scenarios()["sub-agent"]
    collected, rec = _spans(run)
    events, _ = _translate([_payload(collected.spans)])
    sub = rec.subagents[(0, 0)]  # type: ignore[attr-defined]
    parent, child = session_id(rec.trace, rec.agent), session_id(sub.trace, sub.agent)  # type: ignore[attr-defined]
    [first] = [e.payload for e in events if e.session_id == parent and isinstance(e.payload, ev.AgentIteration)
               and e.payload.iteration == 1]
    assert first.subtrace == ev.SubTrace(Mechanism.AGENT, child)
    questions = {e.session_id: e.payload for e in events if isinstance(e.payload, ev.AgentQuestion)}
    assert (questions[parent].agent_name, questions[child].agent_name) == ("react", "react-sub")
    assert questions[parent].conversation_id == questions[child].conversation_id == "conv-1"
    assert Triple(Iri(v.analysis_iri(parent, 1)), Iri(v.PROV_WAS_DERIVED_FROM), Iri(v.conclusion_iri(child))) \
        in fold_triples(events)


def test_resent_and_shuffled_spans_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    run = scenarios()["retrieval"]
    collected, rec = _spans(run)
    once, _ = _translate([_payload(collected.spans)])
    again, state = _translate([_payload(collected.spans), _payload(collected.spans[:4]),
                               _payload(collected.spans)], settle_tick=True)
    assert again == once  # the same events (ids and all), nothing more
    want = fold_triples(expected_events(run, rec, SETTINGS, monkeypatch))  # type: ignore[arg-type]
    for seed in range(5):  # siblings in any order (several exporting threads), each span a message, agent last
        shuffled = list(collected.spans[:-1])
        random.Random(seed).shuffle(shuffled)
        events, _ = _translate([_payload([s]) for s in [*shuffled, collected.spans[-1]]])
        assert sorted(e.event_id for e in events) == sorted(e.event_id for e in once)
        assert fold_triples(events) == want
        shuffled.insert(0, collected.spans[-1])  # the agent span first: translated once the trace settles
        early, _ = _translate([_payload([s]) for s in shuffled])
        settled, _ = _translate([_payload([s]) for s in shuffled], settle_tick=True)
        assert early == [] and fold_triples(settled) == want


def test_content_capture_off_records_what_is_there(monkeypatch: pytest.MonkeyPatch) -> None:
    run = with_retrieval(RUNS[2], 0, DOCS)
    collected, rec = _spans(run, content=False)
    events, _ = _translate([_payload(collected.spans)])
    want = fold_triples(expected_events(run, rec, SETTINGS, monkeypatch, content=False))  # type: ignore[arg-type]
    assert fold_triples(events) == want


def test_scope_defaults_and_unmapped_spans() -> None:
    collected = Collected()
    with sdk_tracer(collected) as tracer:  # no provstream.* resource attributes
        rec = emit_run(tracer, RUNS[9], Clock())
        tracer.start_span("GET /health").end()
        tracer.start_span("chat orphan", attributes={"gen_ai.operation.name": "chat"}).end()
    events, _ = _translate([_payload(collected.spans)])
    assert {(e.user, e.collection) for e in events} == {("d-user", "d-coll")}
    state, unmapped = None, 0
    by_trace: dict[str, list] = {}  # type: ignore[type-arg]
    for r in span_records(_payload(collected.spans)):
        by_trace.setdefault(r["t"], []).append(r)
    for recs in by_trace.values():
        state = None
        for now in (0.0, 10.0):
            result = step(state, recs if now == 0 else [], now, settle_s=3)
            state, unmapped = result.state, unmapped + result.unmapped
    assert unmapped == 2 and rec.agent


def test_openinference_spans_map_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    run = RUNS[9]  # one tool step, then a thought-only step
    collected = Collected()
    clock = Clock()
    with sdk_tracer(collected, SETTINGS) as tracer:
        from opentelemetry.trace import set_span_in_context

        agent = tracer.start_span("agent", start_time=clock(), attributes={
            "openinference.span.kind": "AGENT", "input.value": run.question, "agent.name": "oi-agent",
            "session.id": "oi-session-3"})
        ctx = set_span_in_context(agent)
        for i, turn in enumerate(run.turns):
            attrs = {"openinference.span.kind": "LLM", "llm.output_messages.0.message.role": "assistant",
                     "llm.output_messages.0.message.content": turn.thought}
            for j, c in enumerate(turn.calls):
                p = f"llm.output_messages.0.message.tool_calls.{j}.tool_call."
                attrs |= {p + "id": f"c{i}{j}", p + "function.name": c.name,
                          p + "function.arguments": json.dumps(c.arguments)}
            tracer.start_span("llm", context=ctx, start_time=clock(), attributes=attrs).end(end_time=clock())
            for j, c in enumerate(turn.calls):
                tracer.start_span("tool", context=ctx, start_time=clock(), attributes={
                    "openinference.span.kind": "TOOL", "tool.name": c.name, "tool_call.id": f"c{i}{j}",
                    "input.value": json.dumps(c.arguments), "output.value": c.result}).end(end_time=clock())
        agent.set_attribute("output.value", run.answer)
        agent.end(end_time=clock())
        sc = agent.get_span_context()
    from otlp_support import Recorded

    rec = Recorded(f"{sc.trace_id:032x}", f"{sc.span_id:016x}", agent.start_time,  # type: ignore[attr-defined]
                   "oi-agent", "oi-session-3")
    events, _ = _translate([_payload(collected.spans)])
    assert fold_triples(events) == fold_triples(expected_events(run, rec, SETTINGS, monkeypatch))


# -- the codec --------------------------------------------------------------------

def test_split_by_trace_keys_by_hex_trace_id_and_keeps_every_span() -> None:
    collected = Collected()
    with sdk_tracer(collected, SETTINGS) as tracer:
        recs = [emit_run(tracer, r, Clock()) for r in RUNS[:3]]
    request = encode_spans(collected.spans)
    parts = split_by_trace(request)
    assert [k.decode() for k, _ in parts] == [r.trace for r in recs]
    total = 0
    for key, value in parts:
        part = ExportTraceServiceRequest.FromString(value)
        ids = {s.trace_id.hex() for rs in part.resource_spans for ss in rs.scope_spans for s in ss.spans}
        assert ids == {key.decode()}
        assert part.resource_spans[0].resource == request.resource_spans[0].resource
        total += sum(len(ss.spans) for rs in part.resource_spans for ss in rs.scope_spans)
    assert total == len(collected.spans)


def test_json_encoding_uses_hex_ids() -> None:
    body = json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": [{
        "traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "parentSpanId": "",
        "name": "invoke_agent x", "startTimeUnixNano": "1544712660000000000", "endTimeUnixNano": "1544712661000000000",
        "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}]}]}]}]}).encode()
    [r] = span_records(parse_json(body).SerializeToString())
    assert (r["t"], r["id"], r["p"], r["a"]) == ("5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174", "",
                                                 {"gen_ai.operation.name": "invoke_agent"})


@pytest.mark.parametrize("body, reason", [
    (b"\xff\xff\xff", "not an OTLP ExportTraceServiceRequest"),
    (ExportTraceServiceRequest(resource_spans=[{"scope_spans": [{"spans": [{"trace_id": b"\x01" * 15,
                                                                             "span_id": b"\x02" * 8}]}]}])
     .SerializeToString(), "trace id must be 16 bytes"),
    (ExportTraceServiceRequest(resource_spans=[{"scope_spans": [{"spans": [{"trace_id": b"\x01" * 16,
                                                                             "span_id": b""}]}]}])
     .SerializeToString(), "span id must be 8 bytes"),
])
def test_malformed_protobuf_is_refused_with_the_reason(body: bytes, reason: str) -> None:
    with pytest.raises(OtlpError, match=reason):
        parse_protobuf(body)


@pytest.mark.parametrize("body, reason", [
    (b"{not json", "not JSON"), (b"[1]", "must be a JSON object"),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "eee19b7ec3c1b174"}]}]}]}',
     "is not hex"),
    (b'{"resourceSpans": 3}', "not an OTLP/JSON"),
])
def test_malformed_json_is_refused_with_the_reason(body: bytes, reason: str) -> None:
    with pytest.raises(OtlpError, match=reason):
        parse_json(body)


def test_decompress() -> None:
    assert decompress(gzip.compress(b"abc"), "gzip") == b"abc"
    with pytest.raises(OtlpError, match="corrupt gzip"):
        decompress(b"not gzip", "gzip")
    with pytest.raises(OtlpError, match="unsupported Content-Encoding"):
        decompress(b"x", "br")
