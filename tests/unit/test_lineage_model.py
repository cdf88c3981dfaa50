"""Offset lineage helpers (pure): the headers the worker writes, the rows the sink stores, the PROV statements."""

from __future__ import annotations

from datetime import UTC, datetime

from provstream import testing as samples
from provstream.connectors.neo4j.rows import lineage_rows
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.read.lineage import LINEAGE_GRAPH, lineage_triples, record_iri
from provstream.topics import lineage_headers, source_of


def test_headers_round_trip_and_missing_headers_mean_unknown() -> None:
    assert source_of(lineage_headers("events", 3, 99)) == (3, 99)
    assert source_of(None) is None and source_of([("provstream.source.offset", b"x")]) is None


def test_one_row_per_node_a_message_describes() -> None:
    records = samples.load_trajectories()
    msgs = samples.fold_all(samples.graphrag_events("g", "q?", 3, [ev.SelectedEdge("http://a", "http://p", "o")],
                                                    "answer", start=datetime(2025, 1, 1, tzinfo=UTC)))
    msg = samples.fold_all(samples.agent_events(records[0], "s", start=datetime(2025, 1, 1, tzinfo=UTC)))[1]
    rows = lineage_rows(msg, (0, 7), (1, 5))
    assert rows == [{"iri": v.analysis_iri("s", 1), "eventPartition": 0, "eventOffset": 7, "triplesPartition": 1,
                     "triplesOffset": 5}]
    assert len(lineage_rows(msgs[2], None, None)) == 2  # the focus and its edge node


def test_lineage_statements_name_the_kafka_records() -> None:
    triples = lineage_triples({"urn:x": {"eventPartition": 0, "eventOffset": 4, "triplesPartition": None,
                                         "triplesOffset": None}}, events_topic="ev", triples_topic="tr")
    assert {(t.s.value, t.p.value, t.o.value) for t in triples if t.s.value == "urn:x"} == {
        ("urn:x", v.PROV_WAS_DERIVED_FROM, record_iri("ev", 0, 4))}
    assert LINEAGE_GRAPH != v.GRAPH
