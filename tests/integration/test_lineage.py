"""Offset lineage on the real pipeline: every node names the events record that produced it and the triples
record that wrote it, and a consumer reading those offsets finds exactly them."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from kafka import KafkaConsumer, TopicPartition
from rdflib import Dataset, URIRef
from sink_support import produce_events, sink_process, wait_until
from worker_support import running_worker

from provstream import cli
from provstream import testing as samples
from provstream.cli.read import show_main
from provstream.codec import records as wire
from provstream.core import vocab as v
from provstream.core.fold import step_key
from provstream.read.export import parse_rdf
from provstream.read.lineage import LINEAGE_GRAPH, record_iri
from provstream.settings import Settings

pytestmark = pytest.mark.integration

START = datetime(2025, 3, 8, 9, 0, tzinfo=UTC)


def _read_at(settings: Settings, topic: str, partition: int, offset: int) -> bytes:
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        for _ in range(20):
            for batch in consumer.poll(timeout_ms=500, max_records=1).values():
                assert batch[0].offset == offset
                return bytes(batch[0].value)
        raise AssertionError(f"nothing at {topic} {partition}:{offset}")
    finally:
        consumer.close()


def test_lineage_offsets_match_what_a_consumer_reads_there(
        isolated: Settings, unique: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("PROVSTREAM_EVENTS_TOPIC", isolated.events_topic)
    monkeypatch.setenv("PROVSTREAM_TRIPLES_TOPIC", isolated.triples_topic)
    session = f"{unique}-lin"
    question = v.question_iri(v.Mechanism.AGENT, session)
    scope = ["-C", isolated.collection]
    events = samples.agent_events(samples.load_trajectories()[0], session, start=START, user=isolated.user,
                                  collection=isolated.collection)
    noise = samples.agent_events(samples.load_trajectories()[1], f"{unique}-noise", start=START, user=isolated.user,
                                 collection=isolated.collection)
    with running_worker(isolated), sink_process(isolated):
        produce_events(isolated, [*noise[:2], *events, *noise[2:]])

        def done() -> bool:
            if show_main([question, *scope, "--lineage", "--format", "json"]) != 0:
                capsys.readouterr()
                return False
            data = json.loads(capsys.readouterr().out)
            return data["status"] == "complete" and all(s["triples"] for s in data["lineage"])

        wait_until(done, 90, "the session complete with its lineage")
    assert show_main([question, *scope, "--lineage", "--format", "json"]) == 0
    lineage = json.loads(capsys.readouterr().out)["lineage"]
    assert [s["step"] for s in lineage] == ["question", *(f"i{n}" for n in range(1, len(events) - 1)), "conclusion"]
    by_key = {step_key(e.payload): e for e in events}
    for step in lineage:
        event = wire.decode_event(_read_at(isolated, isolated.events_topic, step["event"]["partition"],
                                           step["event"]["offset"]))
        key = {"question": "question", "conclusion": "final"}.get(step["step"], step["step"])
        assert event == by_key[key]
        msg = wire.decode_triples(_read_at(isolated, isolated.triples_topic, step["triples"]["partition"],
                                           step["triples"]["offset"]))
        assert msg.event_id == event.event_id and step["iri"] in {t.s.value for t in msg.triples}
    assert show_main([question, *scope, "--lineage"]) == 0
    text = capsys.readouterr().out
    first = lineage[0]
    assert f"question     event {first['event']['partition']}:{first['event']['offset']}" in text
    # export --with-lineage: the offsets as PROV in their own named graph, the retrieval graph unchanged
    assert cli.main(["export", question, *scope, "--format", "trig", "--with-lineage"]) == 0
    out = capsys.readouterr().out
    ds = Dataset()
    ds.parse(data=out, format="trig")
    lin = ds.graph(URIRef(LINEAGE_GRAPH))
    rec = URIRef(record_iri(isolated.events_topic, first["event"]["partition"], first["event"]["offset"]))
    assert (URIRef(question), URIRef(v.PROV_WAS_DERIVED_FROM), rec) in lin
    assert (rec, URIRef(v.RDF_TYPE), URIRef(v.PROV_ENTITY)) in lin
    assert cli.main(["export", question, *scope, "--format", "trig"]) == 0
    assert parse_rdf(out, "trig") == parse_rdf(capsys.readouterr().out, "trig")  # nothing of it in retrieval
    assert cli.main(["export", question, *scope, "--format", "turtle", "--with-lineage"]) == 1
    assert "named-graph format" in capsys.readouterr().err
