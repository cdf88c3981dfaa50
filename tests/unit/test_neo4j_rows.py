"""The Neo4j mapping without Neo4j: rows built from triples, and triples rebuilt from stored nodes.

``_apply`` stands in for the constant Cypher of ``connectors/neo4j/cypher.py`` (MERGE by
IRI, ``SET +=``, list unions, status never regressing) so the round trip
``triples -> rows -> stored nodes -> triples`` is checked without a server.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from provstream.connectors.neo4j import cypher, model
from provstream.connectors.neo4j.rebuild import node_triples
from provstream.connectors.neo4j.rows import Rows, build_rows
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.core.triples import Iri, Literal, QuotedTriple, SessionState, StepTriples, Triple
from provstream.errors import StoreError
from provstream.testing import fold_all

T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def _event(sid: str, mechanism: v.Mechanism, seq: int, payload: ev.Payload) -> ev.Event:
    return ev.Event(f"{sid}-{seq}", sid, mechanism, seq, T0 + timedelta(seconds=seq), payload)


def agent_events(sid: str = "a1") -> list[ev.Event]:
    m = v.Mechanism.AGENT
    return [
        _event(sid, m, 0, ev.AgentQuestion("Which city?")),
        _event(sid, m, 1, ev.AgentIteration(1, "think", "Search", '{"input": "x"}', "seen")),
        _event(sid, m, 2, ev.AgentIteration(2, "", "Lookup", '{"input": "y"}', "more",
                                            subtrace=ev.SubTrace(v.Mechanism.DOCRAG, "d1"))),
        _event(sid, m, 3, ev.AgentConclusion("Paris", 2)),
    ]


def docrag_events(sid: str = "d1") -> list[ev.Event]:
    m = v.Mechanism.DOCRAG
    return [
        _event(sid, m, 0, ev.DocRagQuestion("What?")),
        _event(sid, m, 1, ev.DocRagExploration(3, ("c#1", "c#2", "c#3"))),
        _event(sid, m, 2, ev.DocRagSynthesis("Because.")),
    ]


def graphrag_events(sid: str = "g1") -> list[ev.Event]:
    m = v.Mechanism.GRAPHRAG
    edges = (ev.SelectedEdge("http://example.org/a", "http://example.org/p", "http://example.org/b", "why"),
             ev.SelectedEdge("http://example.org/a", "http://example.org/name", "plain text", ""))
    return [
        _event(sid, m, 0, ev.GraphRagQuestion("Who?")),
        _event(sid, m, 1, ev.GraphRagExploration(12)),
        _event(sid, m, 2, ev.GraphRagFocus(edges)),
        _event(sid, m, 3, ev.GraphRagSynthesis("Them.")),
    ]


def folded(events: Iterable[ev.Event]) -> list[StepTriples]:
    return fold_all(events)


def all_triples(batch: Iterable[StepTriples]) -> set[Triple]:
    return {t for msg in batch for t in msg.triples}


# -- a stand-in for the Cypher, to check the round trip ------------------------

Store = tuple[dict[str, dict[str, Any]], set[tuple[str, str, str | None, str]]]


def _union(node: dict[str, Any], name: str, values: Sequence[str]) -> None:
    if values:
        old = node.get(name, [])
        node[name] = old + [x for x in values if x not in old]


def _apply(store: Store, rows: Rows) -> None:
    nodes, rels = store
    for o in rows.objects:
        nodes.setdefault(o["iri"], {"iri": o["iri"], "graph": o["graph"]})
    for n in rows.nodes:
        node = nodes.setdefault(n["iri"], {"iri": n["iri"]})
        node.update(n["props"])
        if n["startedAtTime"] is not None:
            node["startedAtTime"] = model.parse_datetime(n["startedAtTime"])  # Cypher's datetime()
        _union(node, "types", n["types"])
        _union(node, "selectedChunk", n["chunks"])
        _union(node, "extraLiterals", n["extra"])
        node.setdefault("labels", set()).update(n["labels"])
    for s in rows.statuses:
        node = nodes.setdefault(s["iri"], {"iri": s["iri"]})
        node.update(s["scope"])
        if node.get("steps") is None or node["steps"] <= s["steps"]:
            node.update({k: s[k] for k in ("status", "steps", "expectedSteps", "lateSteps", "missingSteps")})
    for rel_type, group in rows.relationships.items():
        for r in group:
            assert r["s"] in nodes and r["o"] in nodes, "nodes are written before relationships"
            rels.add((r["s"], rel_type, r.get("predicate"), r["o"]))


def _read(store: Store) -> set[Triple]:
    nodes, rels = store
    out: set[Triple] = set()
    for iri, props in nodes.items():
        mine = [{"type": t, "predicate": p, "o": o} for s, t, p, o in rels if s == iri]
        out.update(node_triples(props, mine))
    return out


def round_trip(*batches: Sequence[StepTriples]) -> tuple[set[Triple], Store]:
    store: Store = ({}, set())
    for batch in batches:
        _apply(store, build_rows(batch))
    return _read(store), store


def _msg(triples: Iterable[Triple], sid: str = "x1") -> StepTriples:
    (base,) = folded([_event(sid, v.Mechanism.AGENT, 0, ev.AgentQuestion("q"))])
    return StepTriples(base.event_id, sid, base.mechanism, 0, base.user, base.collection, base.question,
                       tuple(triples), base.status)


# -- tests ---------------------------------------------------------------------

def test_every_mechanism_round_trips_losslessly() -> None:
    batch = folded(agent_events() + docrag_events() + graphrag_events())
    rebuilt, _ = round_trip(batch)
    assert rebuilt == all_triples(batch)


def test_one_message_per_batch_gives_the_same_graph_as_one_batch() -> None:
    batch = folded(agent_events() + graphrag_events())
    one, store_one = round_trip(batch)
    many, store_many = round_trip(*([m] for m in reversed(batch)))
    assert one == many
    assert store_one == store_many


def test_redelivery_changes_nothing() -> None:
    batch = folded(docrag_events() + agent_events())
    _, once = round_trip(batch)
    _, twice = round_trip(batch, batch[1:], batch)
    assert once == twice


def test_nodes_get_allow_listed_labels_types_scope_and_typed_properties() -> None:
    rows = build_rows(folded(agent_events("s9")))
    nodes = {n["iri"]: n for n in rows.nodes}
    question = nodes[v.question_iri(v.Mechanism.AGENT, "s9")]
    assert question["labels"] == ["Activity", "AgentQuestion", "Question"]
    assert set(question["types"]) == {v.PROV_ACTIVITY, v.TG_QUESTION, v.TG_AGENT_QUESTION}
    props = question["props"]
    assert question["startedAtTime"] == "2025-03-01T12:00:00.123456Z" and "startedAtTime" not in props
    assert {k: props[k] for k in model.SCOPE_PROPS} == {
        "graph": v.GRAPH, "user": "trustgraph", "collection": "default", "session": "s9", "mechanism": "AGENT"}
    second = nodes[v.analysis_iri("s9", 2)]["props"]
    assert (second["action"], second["arguments"], "thought" in second) == ("Lookup", '{"input": "y"}', False)


def test_the_conversation_and_agent_name_are_question_properties_and_round_trip() -> None:
    events = [_event("s8", v.Mechanism.AGENT, 0, ev.AgentQuestion("Which city?", conversation_id="thread-3",
                                                                  agent_name="researcher"))]
    batch = folded(events)
    (question,) = build_rows(batch).nodes
    assert (question["props"]["conversationId"], question["props"]["agentName"]) == ("thread-3", "researcher")
    assert question["extra"] == []
    rebuilt, _ = round_trip(batch)
    assert rebuilt == all_triples(batch)


def test_iri_objects_become_allow_listed_relationships_and_object_only_nodes() -> None:
    rows = build_rows(folded(agent_events("s9")))
    derived = {(r["s"], r["o"]) for r in rows.relationships["wasDerivedFrom"]}
    assert (v.analysis_iri("s9", 2), v.synthesis_iri(v.Mechanism.DOCRAG, "d1")) in derived
    assert (v.conclusion_iri("s9"), v.analysis_iri("s9", 2)) in derived
    assert [o["iri"] for o in rows.objects] == [v.synthesis_iri(v.Mechanism.DOCRAG, "d1")]


def test_counts_chunks_and_quoted_edges() -> None:
    rows = build_rows(folded(docrag_events("d2") + graphrag_events("g2")))
    nodes = {n["iri"]: n for n in rows.nodes}
    exploration = nodes[v.exploration_iri(v.Mechanism.DOCRAG, "d2")]
    assert exploration["props"]["chunkCount"] == 3 and exploration["chunks"] == ["c#1", "c#2", "c#3"]
    assert nodes[v.exploration_iri(v.Mechanism.GRAPHRAG, "g2")]["props"]["edgeCount"] == 12
    edge1, edge2 = nodes[v.edge_iri("g2", 1)]["props"], nodes[v.edge_iri("g2", 2)]["props"]
    assert (edge1["edgeObjectKind"], edge1["reasoning"]) == ("IRI", "why")
    assert (edge2["edgeObject"], edge2["edgeObjectKind"]) == ("plain text", "LITERAL")
    assert "edgeObjectDatatype" not in edge2
    assert {r["o"] for r in rows.relationships["selectedEdge"]} == {v.edge_iri("g2", 1), v.edge_iri("g2", 2)}


def test_unknown_predicates_and_odd_literals_are_kept_losslessly() -> None:
    s = Iri("urn:x:1")
    odd = [
        Triple(s, Iri(v.RDF_TYPE), Iri("http://example.org/Unlisted")),
        Triple(s, Iri("http://example.org/note"), Literal("n", language="en")),
        Triple(s, Iri("http://example.org/seeAlso"), Iri("urn:x:2")),
        Triple(s, Iri(v.TG_QUERY), Literal("q", language="fr")),
        Triple(s, Iri(v.TG_QUERY), Literal("plain")),
        Triple(s, Iri(v.TG_QUERY), Literal("second value")),
        Triple(s, Iri(v.PROV_STARTED_AT), Literal("2025-01-01T00:00:00Z", v.XSD_DATETIME)),
        Triple(s, Iri(v.TG_EDGE_COUNT), Literal("007", v.XSD_INTEGER)),
        Triple(s, Iri(v.TG_CHUNK_COUNT), Literal(str(2**70), v.XSD_INTEGER)),
        Triple(s, Iri(v.TG_SELECTED_CHUNK), Literal("c", v.XSD_STRING)),
        Triple(s, Iri(v.PROV_WAS_DERIVED_FROM), Literal("not an IRI")),
        Triple(s, Iri(v.TG_EDGE), QuotedTriple(Iri("urn:a"), Iri("urn:p"), Literal("5", v.XSD_INTEGER))),
    ]
    rebuilt, (nodes, _) = round_trip([_msg(odd)])
    assert rebuilt == set(odd)
    assert nodes["urn:x:1"]["labels"] == set()
    assert nodes["urn:x:1"]["query"] == "plain"
    assert len(nodes["urn:x:1"]["extraLiterals"]) == 8


def test_links_keep_the_full_predicate() -> None:
    rows = build_rows([_msg([Triple(Iri("urn:x:1"), Iri("http://example.org/seeAlso"), Iri("urn:x:2"))])])
    assert rows.relationships["LINK"] == ({"s": "urn:x:1", "o": "urn:x:2", "graph": v.GRAPH,
                                          "predicate": "http://example.org/seeAlso"},)


def test_a_quoted_triple_the_model_cannot_hold_is_refused() -> None:
    q = QuotedTriple(Iri("urn:a"), Iri("urn:p"), Iri("urn:b"))
    with pytest.raises(StoreError, match="only tg:edge"):
        build_rows([_msg([Triple(Iri("urn:x:1"), Iri("urn:other"), q)])])
    other = QuotedTriple(Iri("urn:a"), Iri("urn:p"), Iri("urn:c"))
    with pytest.raises(StoreError, match="two different"):
        build_rows([_msg([Triple(Iri("urn:x:1"), Iri(v.TG_EDGE), q), Triple(Iri("urn:x:1"), Iri(v.TG_EDGE), other)])])


def test_status_is_the_one_with_most_steps_and_never_regresses() -> None:
    batch = folded(agent_events("s5"))
    rows = build_rows(list(reversed(batch)))
    (status,) = rows.statuses
    assert (status["status"], status["steps"], status["expectedSteps"], status["missingSteps"]) == (
        "complete", 4, 4, [])
    _, (nodes, _) = round_trip(batch, batch[:2])
    question = nodes[v.question_iri(v.Mechanism.AGENT, "s5")]
    assert (question["status"], question["steps"]) == ("complete", 4)


def test_incomplete_sessions_name_their_missing_steps() -> None:
    events = agent_events("s6")
    batch = folded([events[0], events[2], events[3]])
    assert batch[-1].status.state is SessionState.INCOMPLETE
    (status,) = build_rows(batch).statuses
    assert (status["status"], status["missingSteps"]) == ("incomplete", [1])


def test_cypher_uses_only_allow_listed_labels_and_relationship_types() -> None:
    rows = build_rows(folded(agent_events() + docrag_events() + graphrag_events()))
    assert {label for n in rows.nodes for label in n["labels"]} <= set(model.LABELS.values())
    assert set(cypher.RELATIONSHIP_TYPES) == {*model.REL_TYPES.values(), model.LINK}
    for rel_type in cypher.RELATIONSHIP_TYPES:
        assert f"[r:{rel_type}" in cypher.WRITE_BATCH


def test_datetimes_round_trip_only_in_canonical_form() -> None:
    assert model.parse_datetime("2025-03-01T12:00:00.123456Z") == T0
    assert v.xsd_datetime(T0) == "2025-03-01T12:00:00.123456Z"
    assert model.parse_datetime("2025-03-01T12:00:00Z") is None
    assert model.parse_datetime("2025-02-30T12:00:00.000000Z") is None
