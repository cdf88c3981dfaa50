"""OpenTelemetry GenAI traces end to end on the real stack: the real OTel SDK and its OTLP exporters (gRPC and
HTTP) -> ``provstream otlp`` -> spans topic -> worker (translation + fold) -> sink -> Neo4j. Each trace must come
out of Neo4j as the trace the emitter records for the same steps (compared as graphs), also when a trace's
spans are exported in reverse order across several requests, and when the same spans are written straight onto
the spans topic (as the Collector's kafka exporter would). Malformed bodies are refused with the reason and
nothing is written.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from otlp_support import (
    Clock,
    Collected,
    Run,
    emit_run,
    expected_events,
    fold_triples,
    multi_tool,
    provstream_process,
    run_of,
    sdk_tracer,
    with_retrieval,
    with_subagent,
)
from rdflib.compare import isomorphic
from sink_support import env_for, sink_process
from worker_support import end_offsets, read_topic

from provstream.codec.otlp import split_by_trace
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.connectors.replay import Reset, StartAt, replay
from provstream.core.trajectories import AgentTrajectory, load
from provstream.core.triples import Triple
from provstream.data import REACT_TRAJECTORIES
from provstream.read.rdf import to_graph
from provstream.settings import Settings
from provstream.topics import ensure_topics

pytestmark = pytest.mark.integration

RUNS = [run_of(r) for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory)]
DOCS = ({"id": "colorado-orogeny#1", "content": "The Colorado orogeny was an episode of mountain building"},
        {"id": "high-plains#3", "content": "The High Plains are a subregion of the Great Plains"})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def otlp(isolated: Settings, unique: str) -> Settings:
    s = replace(isolated, otlp_spans_topic=f"test.{unique}.otlp_spans", otlp_spans_dlq_topic=f"test.{unique}.otlp.dlq",
                otlp_grpc_port=_free_port(), otlp_http_port=_free_port(), otlp_settle_ms=1500)
    ensure_topics(s)
    return s


@contextmanager
def pipeline(settings: Settings, tmp: Path, receiver: bool = True) -> Iterator[None]:
    with ExitStack() as stack:
        stack.enter_context(provstream_process(["worker"], env_for(replace(settings, stack_dir=tmp)),
                                     "provstream worker ready"))
        stack.enter_context(sink_process(settings))
        if receiver:
            stack.enter_context(provstream_process(["otlp"], env_for(settings), "provstream otlp ready"))
        yield


def _scope(settings: Settings) -> set[Triple]:
    with Neo4jStore(settings) as store:
        return store.scope_triples(user=settings.user, collection=settings.collection)


def _wait_for(settings: Settings, want: set[Triple], timeout: float = 120) -> set[Triple]:
    deadline = time.monotonic() + timeout
    got: set[Triple] = set()
    while time.monotonic() < deadline:
        got = _scope(settings)
        if got == want:
            return got
        time.sleep(0.5)
    missing, extra = want - got, got - want
    raise AssertionError(f"Neo4j scope differs after {timeout}s: {len(missing)} missing, {len(extra)} extra: "
                         f"{sorted(map(str, missing))[:5]} / {sorted(map(str, extra))[:5]}")


def _scenarios() -> list[tuple[str, Run]]:
    return [("plain", RUNS[0]), ("multi-tool", multi_tool(RUNS[8], 0)),
            ("sub-agent", with_subagent(RUNS[1], 0, RUNS[9])), ("retrieval", with_retrieval(RUNS[11], 1, DOCS)),
            ("thought-only", RUNS[4])]


def test_sdk_exporters_grpc_and_http_give_the_emitters_traces(otlp: Settings, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    expected: list = []  # type: ignore[type-arg]
    with pipeline(otlp, tmp_path):
        for n, (_name, run) in enumerate(_scenarios()):
            grpc_exporter = GrpcExporter(endpoint=f"127.0.0.1:{otlp.otlp_grpc_port}", insecure=True, timeout=30)
            http_exporter = HttpExporter(endpoint=f"http://127.0.0.1:{otlp.otlp_http_port}/v1/traces", timeout=30)
            # span by span as each ends (natural order), alternately over gRPC and HTTP
            with sdk_tracer(grpc_exporter if n % 2 == 0 else http_exporter, otlp) as tracer:
                rec = emit_run(tracer, run, Clock())
            expected += expected_events(run, rec, otlp, monkeypatch)
            # the same steps again as a new trace, exported in reverse order, 3 spans per request
            collected = Collected()
            with sdk_tracer(collected, otlp) as tracer:
                rec = emit_run(tracer, run, Clock())
            spans = list(reversed(collected.spans))
            exporter = http_exporter if n % 2 == 0 else grpc_exporter
            for i in range(0, len(spans), 3):
                assert exporter.export(spans[i:i + 3]).name == "SUCCESS"
            expected += expected_events(run, rec, otlp, monkeypatch)
            grpc_exporter.shutdown()
            http_exporter.shutdown()
        want = fold_triples(expected)
        got = _wait_for(otlp, want)
        assert isomorphic(to_graph(got), to_graph(want))
    # the events the worker derived are ordinary events: a replay of the events topic rebuilds the same graph
    stats = replay(otlp, StartAt.beginning(), reset=Reset(user=otlp.user, collection=otlp.collection))
    assert stats.skipped == 0 and _scope(otlp) == want
    # with PROVSTREAM_ENCRYPT=1 the receiver sealed the texts: no question is in clear on the spans topic
    spans_topic = b"".join(r.value for r in read_topic(otlp, otlp.otlp_spans_topic,  # type: ignore[attr-defined]
                                                       end_offsets(otlp, otlp.otlp_spans_topic)))
    questions = [run.question.encode() for _, run in _scenarios()]
    found = [q in spans_topic for q in questions]
    assert not any(found) if otlp.encrypt else any(found)


def test_spans_written_straight_to_the_topic_give_the_same_graph(otlp: Settings, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    collected = Collected()
    expected: list = []  # type: ignore[type-arg]
    with sdk_tracer(collected, otlp) as tracer:
        for _name, run in _scenarios():
            expected += expected_events(run, emit_run(tracer, run, Clock()), otlp, monkeypatch)
    producer = KafkaProducer(bootstrap_servers=otlp.kafka_bootstrap, acks="all")
    try:  # as the Collector's kafka exporter (otlp_proto, partition_traces_by_id) writes them, in 2 batches
        half = len(collected.spans) // 2
        for batch in (collected.spans[:half], collected.spans[half:]):
            for key, value in split_by_trace(encode_spans(batch)):
                producer.send(otlp.otlp_spans_topic, key=key, value=value)
        producer.send(otlp.otlp_spans_topic, key=b"junk", value=b"\xff\xff not protobuf")
        producer.flush()
    finally:
        producer.close()
    with pipeline(otlp, tmp_path, receiver=False):
        want = fold_triples(expected)
        got = _wait_for(otlp, want)
        assert isomorphic(to_graph(got), to_graph(want))
        deadline = time.monotonic() + 30
        while end_offsets(otlp, otlp.otlp_spans_dlq_topic) < 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert end_offsets(otlp, otlp.otlp_spans_dlq_topic) == 1


def test_malformed_requests_are_refused_and_nothing_is_written(otlp: Settings) -> None:
    bad_json = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "eee19b7ec3c1b174", "name": "ok"},
        {"traceId": "00", "spanId": "eee19b7ec3c1b175", "name": "bad"}]}]}]}).encode()
    with provstream_process(["otlp"], env_for(otlp), "provstream otlp ready"):
        url = f"http://127.0.0.1:{otlp.otlp_http_port}/v1/traces"
        for body, ctype, reason in ((b"\xff\xff\xff", "application/x-protobuf", b"not an OTLP"),
                                    (bad_json, "application/json", b"trace id must be 16 bytes"),
                                    (b"{", "application/json", b"not JSON")):
            request = urllib.request.Request(url, data=body, headers={"Content-Type": ctype}, method="POST")
            with pytest.raises(urllib.error.HTTPError) as caught:
                urllib.request.urlopen(request, timeout=10)
            assert caught.value.code == 400 and reason in caught.value.read()
        with grpc.insecure_channel(f"127.0.0.1:{otlp.otlp_grpc_port}") as channel:
            export = channel.unary_unary("/opentelemetry.proto.collector.trace.v1.TraceService/Export")
            with pytest.raises(grpc.RpcError) as rpc:
                export(b"\xff\xff\xff", timeout=10)
            assert rpc.value.code() is grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]
            assert "not an OTLP ExportTraceServiceRequest" in rpc.value.details()  # type: ignore[attr-defined]
        request = urllib.request.Request(url, data=b"{}", headers={"Content-Type": "text/plain"}, method="POST")
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=10)
        assert caught.value.code == 415
        assert end_offsets(otlp, otlp.otlp_spans_topic) == 0
        good = bad_json.replace(b'"traceId": "00"', b'"traceId": "5b8efff798038103d269b633813fc60d"')
        request = urllib.request.Request(url, data=good, headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=10) as answer:  # OTLP/JSON: 2 traces -> 2 records
            assert answer.status == 200 and json.loads(answer.read()) == {}
        assert end_offsets(otlp, otlp.otlp_spans_topic) == 2


def test_the_documented_sdk_example_lands_in_neo4j(otlp: Settings, tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    example = doc.split("### Sending spans with the OpenTelemetry SDK", 1)[1].split("```python\n", 1)[1]
    example = example.split("```", 1)[0]
    assert example.count("\n") <= 20
    example = example.replace('"127.0.0.1:4317"', f'"127.0.0.1:{otlp.otlp_grpc_port}"')
    example = example.replace('"provstream.collection": "default"', f'"provstream.collection": "{otlp.collection}"')
    with pipeline(otlp, tmp_path):
        subprocess.run([sys.executable, "-c", example], check=True, timeout=60)
        deadline = time.monotonic() + 60
        values: set[str] = set()
        while time.monotonic() < deadline:
            values = {getattr(t.o, "value", "") for t in _scope(otlp)}
            if "42" in values and "What is 6*7?" in values:
                break
            time.sleep(0.5)
    assert {"What is 6*7?", "calculator", '{"expression": "6*7"}', "42"} <= values


def _committed(settings: Settings, topic: str) -> int:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    try:
        offsets = admin.list_group_offsets(settings.worker_app_id).get(settings.worker_app_id, {})
    finally:
        admin.close()
    return sum(o.offset for tp, o in offsets.items() if tp.topic == topic and o.offset > 0)


def test_trace_state_survives_a_worker_restart(otlp: Settings, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The children reach one worker, the agent span its successor: the state comes back from the changelog."""
    settings = replace(otlp, otlp_settle_ms=120_000)  # nothing may settle early: only the changelog can complete it
    run = with_retrieval(RUNS[3], 0, DOCS)
    collected = Collected()
    with sdk_tracer(collected, settings) as tracer:
        rec = emit_run(tracer, run, Clock())
    want = fold_triples(expected_events(run, rec, settings, monkeypatch))
    *children, agent = collected.spans
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all")
    env = env_for(replace(settings, stack_dir=tmp_path))
    try:
        with sink_process(settings):
            with provstream_process(["worker"], env, "provstream worker ready"):
                for span in children:
                    [(key, value)] = split_by_trace(encode_spans([span]))
                    producer.send(settings.otlp_spans_topic, key=key, value=value)
                producer.flush()
                deadline = time.monotonic() + 60
                while _committed(settings, settings.otlp_spans_topic) < len(children):
                    assert time.monotonic() < deadline, "the first worker did not commit the children"
                    time.sleep(0.5)
            assert _scope(settings) == set()
            with provstream_process(["worker"], env, "provstream worker ready"):
                [(key, value)] = split_by_trace(encode_spans([agent]))
                producer.send(settings.otlp_spans_topic, key=key, value=value)
                producer.flush()
                got = _wait_for(settings, want, timeout=90)
    finally:
        producer.close()
    assert isomorphic(to_graph(got), to_graph(want))
