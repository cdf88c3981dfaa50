"""The store's one statement per batch (``cypher.WRITE_BATCH``) leaves the graph the row groups describe.

``_write_batch`` stands in for WRITE_BATCH, clause by clause, over the rows of
``rows.write_rows``; :class:`GraphImage` applies the same batches group by group
(objects, nodes, statuses, relationships, then the lineage), the order the rows
of ``build_rows`` describe. Both must give the same nodes, labels, properties
and relationships, batch after batch, including re-delivered and reordered ones.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from provstream.connectors.neo4j import cypher, model
from provstream.connectors.neo4j.image import GraphImage, Moment
from provstream.connectors.neo4j.rows import Row, batch_rows, build_rows, lineage_rows, write_rows
from provstream.connectors.neo4j.store import QuietRows
from provstream.connectors.neo4j.store import _write_batch as store_write_batch
from provstream.core import vocab as v
from provstream.core.triples import Iri, Literal, StepTriples, Triple
from provstream.errors import StoreError
from provstream.testing import fold_all, load_trajectories, scenario, trajectory_events

START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
_LISTS = (("types", "types"), ("selectedChunk", "chunks"), ("extraLiterals", "extra"))
_STATUS = ("status", "steps", "expectedSteps", "lateSteps", "missingSteps")

Nodes = dict[str, tuple[set[str], dict[str, Any]]]
Rels = dict[tuple[str, str, str, str | None], dict[str, Any]]


def _set_all(props: dict[str, Any], values: dict[str, Any]) -> None:
    for name, value in values.items():
        if value is None:
            props.pop(name, None)
        else:
            props[name] = value


def _write_batch(nodes: Nodes, rels: Rels, rows: list[Row]) -> None:
    """WRITE_BATCH in memory: MERGE with ON CREATE / ON MATCH, SET, the two FOREACH, then the CALLs."""
    for row in rows:
        iri = row["iri"]
        if iri not in nodes:
            labels, props = nodes[iri] = ({"Resource"}, {"iri": iri})
            _set_all(props, {"graph": row.get("graph"), **{p: row.get(k) for p, k in _LISTS}})
        else:
            labels, props = nodes[iri]
            for prop, key in _LISTS:
                if row.get(key) is not None:
                    old = props.get(prop) or []
                    props[prop] = old + [x for x in row[key] if x not in old]
        _set_all(props, row["props"])
        if row.get("startedAtTime") is not None:
            props["startedAtTime"] = Moment(row["startedAtTime"])
        labels.update(row["labels"])
        if row.get("steps") is not None and (props.get("steps") is None or props["steps"] <= row["steps"]):
            _set_all(props, {name: row[name] for name in _STATUS if name != "missingSteps"})
            props["missingSteps"] = list(row["missingSteps"])
        if row.get("lineage") is not None:
            for name, value in row["lineage"].items():
                if props.get(name) is None and value is not None:
                    props[name] = value
    for row in rows:
        for rel_type in cypher.RELATIONSHIP_TYPES:
            for rel in row.get(rel_type) or ():
                assert rel["o"] in nodes, "every end node exists before the relationships"
                key = (row["iri"], rel_type, rel["o"], rel.get("predicate"))
                props = rels.setdefault(key, {} if rel.get("predicate") is None else {"predicate": rel["predicate"]})
                props["graph"] = rel["graph"]


def _image_graph(image: GraphImage) -> tuple[Nodes, Rels]:
    nodes = {n.iri: (set(n.labels), dict(n.props)) for n in image.nodes()}
    rels = {(r.start, r.type, r.end, r.props.get("predicate")): dict(r.props) for r in image.relationships()}
    return nodes, rels


def _lineage(batch: list[StepTriples], first: int) -> list[Row]:
    return [row for i, msg in enumerate(batch) for row in lineage_rows(msg, (1, 100 + first + i), (0, first + i))]


def _messages() -> list[StepTriples]:
    records = load_trajectories()
    events = [e for i in range(3) for e in trajectory_events(records[i], f"s-{i}", START)]
    return fold_all([*events, *scenario(records, "scn", start=START)])


def _same_graph(batches: list[list[StepTriples]]) -> None:
    image, written, nodes, rels = GraphImage(), GraphImage(), {}, {}
    offset = 0
    for batch in batches:
        lineage = _lineage(batch, offset)
        offset += len(batch)
        image.apply(build_rows(batch))
        image.set_lineage(lineage)
        _write_batch(nodes, rels, write_rows(build_rows(batch), lineage))
        written.write(batch_rows(batch, lineage)[1])  # what the bulk rebuild folds: the sink's own rows
    assert (nodes, rels) == _image_graph(image) == _image_graph(written)
    assert [n.iri for n in written.nodes()] == [n.iri for n in image.nodes()]  # the CSV's row order


def test_one_statement_gives_the_graph_of_the_row_groups_in_one_batch_or_many() -> None:
    messages = _messages()
    _same_graph([messages])
    _same_graph([[m] for m in messages])
    _same_graph([messages[i:i + 7] for i in range(0, len(messages), 7)])


def test_redelivered_and_reordered_batches_change_nothing_more_than_the_groups_do() -> None:
    messages = _messages()
    half = len(messages) // 2
    _same_graph([messages[:half], messages[:half], list(reversed(messages)), messages[half:], messages])


def test_odd_nodes_objects_and_links_match_the_groups() -> None:
    s, o = Iri("urn:x:1"), Iri("urn:x:2")
    (base,) = fold_all(trajectory_events(load_trajectories()[0], "odd", START)[:1])
    triples = (Triple(s, Iri("http://example.org/seeAlso"), o), Triple(s, Iri(v.RDF_TYPE), Iri(v.PROV_ENTITY)),
               Triple(o, Iri(v.TG_SELECTED_CHUNK), Literal("c1")), Triple(o, Iri(v.PROV_WAS_DERIVED_FROM), s),
               Triple(s, Iri("http://example.org/note"), Literal("n", language="en")),
               Triple(Iri(base.question), Iri(v.PROV_WAS_GENERATED_BY), Iri("urn:x:only-an-object")))
    msg = StepTriples(base.event_id, base.session_id, base.mechanism, 0, base.user, base.collection, base.question,
                      triples, base.status)
    _same_graph([[msg], [base, msg], [msg]])


def test_lists_grow_by_what_they_lack_across_batches() -> None:
    (base,) = fold_all(trajectory_events(load_trajectories()[0], "grow", START)[:1])
    s = Iri("urn:x:grow")

    def msg(*triples: Triple) -> StepTriples:
        return StepTriples(base.event_id, base.session_id, base.mechanism, 0, base.user, base.collection,
                           base.question, triples, base.status)

    first = msg(Triple(s, Iri(v.RDF_TYPE), Iri(v.PROV_ENTITY)), Triple(s, Iri(v.TG_SELECTED_CHUNK), Literal("c1")),
                Triple(s, Iri("http://example.org/note"), Literal("n", language="en")))
    second = msg(Triple(s, Iri(v.RDF_TYPE), Iri(v.TG_QUESTION)), Triple(s, Iri(v.RDF_TYPE), Iri(v.PROV_ENTITY)),
                 Triple(s, Iri(v.TG_SELECTED_CHUNK), Literal("c2")), Triple(s, Iri(v.TG_SELECTED_CHUNK), Literal("c1")),
                 Triple(s, Iri("http://example.org/note"), Literal("m", language="en")))
    _same_graph([[first], [second], [first]])
    image = GraphImage()
    for batch in ([first], [second]):
        image.write(batch_rows(batch, [])[1])
    (node,) = [n for n in image.nodes() if n.iri == s.value]
    assert node.props["types"] == [v.PROV_ENTITY, v.TG_QUESTION] and node.props["selectedChunk"] == ["c1", "c2"]


def test_rows_are_one_per_iri_and_labels_come_only_from_the_model() -> None:
    messages = _messages()
    rows = write_rows(build_rows(messages), _lineage(messages, 0))
    iris = [row["iri"] for row in rows]
    assert len(iris) == len(set(iris))
    allowed = set(model.LABELS.values())
    assert all(set(row["labels"]) <= allowed for row in rows)
    assert {k for row in rows for k in row} - {"iri", "graph", "props", "labels", "types", "chunks", "extra",
                                               "startedAtTime", "lineage", *_STATUS,
                                               *cypher.RELATIONSHIP_TYPES} == set()


def test_the_statement_names_only_allow_listed_relationship_types() -> None:
    assert set(cypher.RELATIONSHIP_TYPES) == {*model.REL_TYPES.values(), model.LINK}
    assert set(re.findall(r"\[r:(\w+)", cypher.WRITE_BATCH)) == set(cypher.RELATIONSHIP_TYPES)
    for rel_type in cypher.RELATIONSHIP_TYPES:
        assert f"UNWIND row.{rel_type} AS rel" in cypher.WRITE_BATCH
    assert re.findall(r"n:\$\((.*?)\)", cypher.WRITE_BATCH) == ["row.labels"]


def test_a_label_outside_the_allow_list_never_reaches_the_statement() -> None:
    rows = build_rows(_messages()[:1])
    forged = replace(rows, nodes=({**rows.nodes[0], "labels": ["Question`) DETACH DELETE n //"]},))
    with pytest.raises(StoreError, match="allow-list"):
        write_rows(forged)


class _Tx:
    """A managed transaction that records the parameter it was given (and may fail)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.given: list[Any] = []

    def run(self, statement: str, **parameters: Any) -> Any:
        assert statement in (cypher.WRITE_BATCH_QUERY, cypher.WRITE_BATCH_PROCEDURE)
        assert list(parameters) == ["batch"]
        self.given.append(parameters["batch"])
        if self.fail:
            raise RuntimeError("connection lost")
        return self

    def consume(self) -> None:
        assert len(self.given[-1]["rows"]) == 2  # the rows are there while the statement runs


@pytest.mark.parametrize("batch", [
    {"rows": [{"iri": "urn:a"}, {"iri": "urn:b"}]},
    {"keys": ["user"], "labels": ["Entity"], "strings": ["u"], "rows": [["urn:a"], ["urn:b"]]},
], ids=["rows", "procedure_batch"])
def test_the_rows_handed_to_the_driver_are_released_after_the_transaction(batch: dict[str, list[Any]]) -> None:
    """The driver keeps its parameters in a reference cycle: the store empties its own copies."""
    kept = {name: list(values) for name, values in batch.items()}
    for tx in (_Tx(), _Tx(fail=True)):
        try:
            store_write_batch(tx, cypher.WRITE_BATCH_QUERY, batch)  # type: ignore[arg-type]
        except RuntimeError:
            assert tx.fail
        (given,) = tx.given
        assert list(given) == list(batch)
        assert all(isinstance(values, QuietRows) and values == [] for values in given.values())
        assert batch == kept  # a retry runs again on the caller's batch


def test_the_rows_travel_inside_a_map_so_one_plan_serves_every_batch_size() -> None:
    """Neo4j keys a cached plan on a list parameter's size (in powers of ten), never on a map's."""
    assert re.findall(r"\$[\w.]+", cypher.WRITE_BATCH) == ["$batch.rows"]
    assert "$batch)" in cypher.WRITE_BATCH_PROCEDURE and "$" not in cypher.WRITE_BATCH_PROCEDURE.replace("$batch", "")
    for statement in (cypher.WRITE_BATCH_QUERY, cypher.WRITE_BATCH_PROCEDURE):
        tx = _Tx()
        store_write_batch(tx, statement, {"rows": [{"iri": "urn:a"}, {"iri": "urn:b"}]})  # type: ignore[arg-type]
        assert len(tx.given) == 1
