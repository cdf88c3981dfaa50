"""Export formats: RDF round trips, PROV-N / PROV-JSON, the strict PROV mapping and its checks (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from prov.model import ProvDocument
from rdflib import Dataset, Graph, URIRef
from rdflib.compare import isomorphic

from provstream import testing as samples
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.core.triples import Iri, Triple
from provstream.data import REACT_TRAJECTORIES
from provstream.read.export import FORMATS, RDF_FORMATS, ExportError, export, parse_rdf
from provstream.read.provcheck import violations
from provstream.read.provdoc import to_prov_document
from provstream.read.rdf import to_graph
from provstream.read.strict import PROV_USED, PROV_WAS_INFORMED_BY, strict_triples

START = datetime(2025, 3, 1, 9, 30, 0, 123456, tzinfo=UTC)
EDGES = [ev.SelectedEdge("http://ex.org/HighPlains", "http://ex.org/elevation", "1,800-7,000 ft", "states it"),
         ev.SelectedEdge("http://ex.org/HighPlains", "http://ex.org/partOf", "http://ex.org/GreatPlains")]


@pytest.fixture(scope="module")
def scope_triples() -> set[Triple]:
    """All 12 trajectories (one a DAG, one calling a DocRAG sub-trace), a DocRAG and a GraphRAG session."""
    events: list[ev.Event] = []
    for n, t in enumerate(samples.load_trajectories(REACT_TRAJECTORIES)):
        extra = {"used": {3: (1, 2)}} if n == 0 else {}
        if n == 1:
            extra = {"subtraces": {2: ev.SubTrace(v.Mechanism.DOCRAG, "doc-1")}}
        events += samples.agent_events(t, f"t{n}", start=START, **extra)
    events += samples.docrag_events("doc-1", "Who was Milhouse named after?", ["c1", "c2"], "Nixon.", start=START)
    events += samples.graphrag_events("g-1", "How high?", 120, EDGES, "Up to 7,000 ft.", start=START)
    return samples.triples_of(samples.fold_all(events))


@pytest.mark.parametrize("fmt", sorted(RDF_FORMATS))
def test_rdf_formats_parse_back_to_the_same_graph(scope_triples: set[Triple], fmt: str) -> None:
    text = export(scope_triples, fmt)
    back = parse_rdf(text, fmt)
    assert back == scope_triples
    assert isomorphic(to_graph(back), to_graph(scope_triples))
    assert isomorphic(_parse(text, fmt), to_graph(scope_triples))


def _parse(text: str, fmt: str) -> Graph:
    if fmt == "turtle":
        return Graph().parse(data=text, format="turtle")
    ds = Dataset()
    ds.parse(data=text, format=RDF_FORMATS[fmt])
    return ds.graph(URIRef(v.GRAPH))


@pytest.mark.parametrize("fmt", ["trig", "nquads", "jsonld"])
def test_dataset_formats_use_the_named_graph(scope_triples: set[Triple], fmt: str) -> None:
    ds = Dataset()
    ds.parse(data=export(scope_triples, fmt), format=RDF_FORMATS[fmt])
    names = {str(g.identifier) for g in ds.graphs() if len(g)}
    assert names == {v.GRAPH}
    assert len(ds.graph(URIRef(v.GRAPH))) > len(scope_triples)  # + statement nodes of the quoted edges


def test_prov_json_round_trips_through_the_prov_package(scope_triples: set[Triple]) -> None:
    text = export(scope_triples, "provjson")
    doc = ProvDocument.deserialize(content=text, format="json")
    assert doc == to_prov_document(scope_triples)
    data = json.loads(text)
    assert "trace:agent:t0" in data["activity"]
    assert data["activity"]["trace:agent:t0"]["prov:startTime"].startswith("2025-03-01T09:30:00.123456")
    assert data["entity"]["trace:prov:exploration:g-1"]["tg:edgeCount"] == {"$": "120", "type": "xsd:integer"}


def test_provn_names_every_node(scope_triples: set[Triple]) -> None:
    text = export(scope_triples, "provn")
    assert text.startswith("document\n") and text.rstrip().endswith("endDocument")
    assert "activity(trace:agent\\:t0, 2025-03-01T09:30:00.123456+00:00" in text
    assert "wasDerivedFrom(trace:agent\\:t0/i1, trace:agent\\:t0, -, -, -)" in text  # faithful: as stored
    assert 'tg:edge="<< <http://ex.org/HighPlains> <http://ex.org/elevation> \\"1,800-7,000 ft\\" >>"' in text


def test_faithful_agent_export_breaks_prov_constraints_and_strict_does_not(scope_triples: set[Triple]) -> None:
    broken = violations(to_prov_document(scope_triples))
    assert "entity-activity-disjoint: trace:agent:t0 is both an entity and an activity" in broken
    assert not any("question:g-1" in b or "docrag:doc-1" in b for b in broken)  # RAG traces are valid as stored
    assert violations(to_prov_document(strict_triples(scope_triples))) == []
    for fmt in FORMATS:
        export(scope_triples, fmt, strict=True)  # refuses to write when a constraint still fails


def test_strict_mapping_replaces_only_derivations_touching_activities(scope_triples: set[Triple]) -> None:
    strict = strict_triples(scope_triples)
    changed = scope_triples - strict
    q0 = Iri(v.question_iri(v.Mechanism.AGENT, "t0"))
    assert all(t.p.value == v.PROV_WAS_DERIVED_FROM and t.o.value.startswith("urn:trustgraph:agent:")
               and v.parse_question_iri(t.o.value) for t in changed)
    assert len(changed) == 12  # the first Analysis of each agent session
    assert Triple(Iri(v.analysis_iri("t0", 1)), Iri(v.PROV_WAS_GENERATED_BY), q0) in strict
    text = export(scope_triples, "provn", strict=True)
    assert "wasGeneratedBy(trace:agent\\:t0/i1, trace:agent\\:t0, -)" in text
    assert parse_rdf(export(scope_triples, "turtle", strict=True), "turtle") == strict


def test_strict_mapping_covers_the_other_kind_combinations() -> None:
    a1, a2, e = "urn:x:a1", "urn:x:a2", "urn:x:e"
    typed = {Triple(Iri(a), Iri(v.RDF_TYPE), Iri(v.PROV_ACTIVITY)) for a in (a1, a2)}
    derived = {Triple(Iri(a1), Iri(v.PROV_WAS_DERIVED_FROM), Iri(e)),
               Triple(Iri(a1), Iri(v.PROV_WAS_DERIVED_FROM), Iri(a2))}
    strict = strict_triples(typed | derived)
    assert Triple(Iri(a1), Iri(PROV_USED), Iri(e)) in strict
    assert Triple(Iri(a1), Iri(PROV_WAS_INFORMED_BY), Iri(a2)) in strict
    assert violations(to_prov_document(strict)) == []
    # a question only referenced (its own step not exported) still counts as an activity
    orphan = {Triple(Iri(v.analysis_iri("s", 1)), Iri(v.PROV_WAS_DERIVED_FROM),
                     Iri(v.question_iri(v.Mechanism.AGENT, "s")))}
    assert {t.p.value for t in strict_triples(orphan)} == {v.PROV_WAS_GENERATED_BY}


def test_checker_finds_cycles_and_conflicting_start_times() -> None:
    doc = ProvDocument()
    doc.add_namespace("ex", "http://ex.org/")
    doc.wasDerivedFrom("ex:a", "ex:b")
    doc.wasDerivedFrom("ex:b", "ex:a")
    doc.activity("ex:q", startTime=datetime(2025, 1, 1, tzinfo=UTC))
    doc.activity("ex:q", startTime=datetime(2025, 1, 2, tzinfo=UTC))
    doc.wasGeneratedBy("ex:q", "ex:q")
    found = violations(doc)
    assert any(f.startswith("derivation-generation-generation-ordering: ex:a") for f in found)
    assert any(f.startswith("key-activity: ex:q") for f in found)
    assert "entity-activity-disjoint: ex:q is both an entity and an activity" in found


def test_unknown_format_is_refused(scope_triples: set[Triple]) -> None:
    with pytest.raises(ExportError):
        export(scope_triples, "rdfxml")
    with pytest.raises(ExportError):
        parse_rdf("", "provn")
