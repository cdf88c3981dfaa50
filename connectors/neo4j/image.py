"""Pure: the graph the sink's statements would leave in Neo4j, computed in memory.

The bulk rebuild (:mod:`provstream.connectors.bulk`) does not re-map triples
itself: each batch goes through the sink's own :func:`.rows.batch_rows` (the
rows :meth:`Neo4jStore.write` sends, one per IRI, lineage included), and
:meth:`GraphImage.write` applies them clause by clause as
:data:`.cypher.WRITE_BATCH` does. :meth:`GraphImage.apply` and
:meth:`GraphImage.set_lineage` take the same batch as the row groups of
:func:`.rows.build_rows` and :func:`.rows.lineage_rows`; group by group, that is:

* object-only IRIs: create ``(:Resource {iri, graph})`` if missing;
* nodes: ``SET n += row.props``; ``startedAtTime`` kept unless the
  row has one; ``types`` / ``selectedChunk`` / ``extraLiterals`` appended
  without duplicates (left absent while empty); the row's labels added;
* statuses: ``SET q += scope``; the status fields only when the row
  has at least as many steps as the node (``missingSteps`` may be ``[]``);
* relationships: one per (start, type, end[, predicate]), ``graph`` set;
* lineage: each of the four offsets kept from the first row that had it
  (nodes of the retrieval graph only);
* ``ERASE_BATCH`` + ``DELETE_ORPHANS_BATCH`` for a retraction record.

``tests/unit/test_neo4j_write_rows.py`` checks that WRITE_BATCH's row-per-IRI
form, and :meth:`GraphImage.write` of it, leave the graph these groups leave.

``tests/unit/test_bulk_image.py`` checks these rules without servers; ``tests/bulk``
(``make bulk-tests``) compares an imported graph with the streamed one, every
node's labels and typed properties and every relationship.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from provstream.connectors.neo4j import model as m
from provstream.connectors.neo4j.cypher import RELATIONSHIP_TYPES
from provstream.connectors.neo4j.rows import Row, Rows
from provstream.core import vocab as v

RESOURCE = "Resource"
LINEAGE_PROPS = ("eventPartition", "eventOffset", "triplesPartition", "triplesOffset")
STATUS_PROPS = ("status", "steps", "expectedSteps", "lateSteps", "missingSteps")
_APPENDED = (("types", "types"), ("chunks", "selectedChunk"), ("extra", "extraLiterals"))


@dataclass(frozen=True)
class Moment:
    """A canonical ``xsd:dateTime`` text that Neo4j holds as a ``DATETIME`` (``datetime(text)``).

    Example: ``Moment("2025-03-01T09:00:00.000000Z")``.
    """

    text: str


@dataclass
class ImageNode:
    """One node as the statements leave it (internal accumulator; read it, do not keep it)."""

    iri: str
    labels: set[str] = field(default_factory=lambda: {RESOURCE})
    props: dict[str, Any] = field(default_factory=dict)


def object_only(node: ImageNode) -> bool:
    """Whether ``node`` is only what a relationship row makes of a missing end: ``(:Resource {iri, graph})``.

    No session owns such a node; any other node holds its session's scope.
    """
    return len(node.props) <= 2 and node.labels == {RESOURCE} and node.props.keys() <= {"iri", "graph"}


RelKey = tuple[str, str, str, str | None]  # (start IRI, type, end IRI, LINK predicate)


@dataclass(frozen=True)
class ImageRelationship:
    """One relationship: ``(start)-[type {graph[, predicate]}]->(end)``."""

    start: str
    type: str
    end: str
    props: Mapping[str, Any]


class GraphImage:
    """The retrieval graph as the sink would write it, held in memory.

    Example::

        image = GraphImage()
        image.write(batch_rows(batch, lineage)[1])   # or, group by group:
        image.apply(build_rows(batch))
        image.set_lineage(lineage)
        len(image)  # nodes
    """

    def __init__(self) -> None:
        self._nodes: dict[str, ImageNode] = {}
        self._rels: dict[RelKey, dict[str, Any]] = {}
        # Each node's relationships, for erase(); built at its first call (a rebuild rarely meets a
        # retraction) and kept up to date from then on.
        self._adjacent: dict[str, set[RelKey]] | None = None

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def relationship_count(self) -> int:
        return len(self._rels)

    def nodes(self) -> Iterator[ImageNode]:
        """Every node, in creation order."""
        return iter(self._nodes.values())

    def relationships(self) -> Iterator[ImageRelationship]:
        """Every relationship, in creation order."""
        for (start, rel_type, end, _), props in self._rels.items():
            yield ImageRelationship(start, rel_type, end, dict(props))

    # -- the write statements ---------------------------------------------------

    def write(self, rows: Iterable[Row]) -> None:
        """Apply one :meth:`Neo4jStore.write` transaction as :data:`.cypher.WRITE_BATCH` runs it.

        Every row's node first (``MERGE``, ``ON CREATE`` / ``ON MATCH``, ``SET``, the status
        and lineage guards), then every row's relationships (their end nodes all exist by then).

        :param rows: what :func:`.rows.batch_rows` gives for the batch (its second item).

        Example: ``image.write(batch_rows(batch, lineage)[1])``.
        """
        nodes = self._nodes
        rows = rows if isinstance(rows, list) else list(rows)
        for row in rows:
            iri = row["iri"]
            node = nodes.get(iri)
            if node is None:  # ON CREATE SET n.graph = row.graph, n.types = row.types, ...
                props: dict[str, Any] = {"iri": iri}
                graph = row.get("graph")
                if graph is not None:
                    props["graph"] = graph
                for key, name in _APPENDED:
                    values = row.get(key)
                    if values is not None:
                        props[name] = list(values)
                node = nodes[iri] = ImageNode(iri, props=props)
            else:  # ON MATCH SET: each list gains the values it lacks
                props = node.props
                for key, name in _APPENDED:
                    values = row.get(key)
                    if values is not None:
                        old: list[Any] = props.get(name) or []
                        props[name] = old + [x for x in values if x not in old]
            _set_all(props, row["props"])
            started = row.get("startedAtTime")
            if started is not None:
                props["startedAtTime"] = Moment(started)
            labels = row["labels"]
            if labels:
                node.labels.update(labels)
            steps = row.get("steps")
            if steps is not None and (props.get("steps") is None or props["steps"] <= steps):
                _set_all(props, {name: row[name] for name in STATUS_PROPS}, keep_empty_lists=True)
            lineage = row.get("lineage")
            if lineage is not None:
                for name in LINEAGE_PROPS:
                    if props.get(name) is None and lineage[name] is not None:
                        props[name] = lineage[name]
        for row in rows:
            for rel_type in RELATIONSHIP_TYPES:
                found = row.get(rel_type)
                if found:
                    s = row["iri"]
                    for rel in found:
                        self._merge_relationship(rel_type, s, rel)

    def apply(self, rows: Rows) -> None:
        """Apply one :meth:`Neo4jStore.write` transaction's rows (objects, nodes, statuses, relationships).

        :param rows: what :func:`.rows.build_rows` made of a batch.
        """
        for row in rows.objects:
            if row["iri"] not in self._nodes:
                self._nodes[row["iri"]] = ImageNode(row["iri"], props={"iri": row["iri"], "graph": row["graph"]})
        for row in rows.nodes:
            self._merge_node(row)
        for row in rows.statuses:
            self._merge_status(row)
        for rel_type, rel_rows in rows.relationships.items():
            for row in rel_rows:
                self._merge_relationship(rel_type, row["s"], row)

    def set_lineage(self, rows: Iterable[Row]) -> None:
        """The lineage: the first known value of each offset is kept, on retrieval-graph nodes only."""
        for row in rows:
            node = self._nodes.get(row["iri"])
            if node is None or node.props.get("graph") != v.GRAPH:
                continue
            for name in LINEAGE_PROPS:
                if row[name] is not None and node.props.get(name) is None:
                    node.props[name] = row[name]

    def erase(self, user: str, collection: str, session: str) -> tuple[list[str], list[str]]:
        """A retraction record: delete the session's nodes, then the orphans.

        :param user: the session's user.
        :param collection: its collection.
        :param session: its id.
        :returns: the IRIs of the session's nodes and of the orphans deleted.
        """
        adjacent = self._adjacency()
        doomed = [iri for iri, n in self._nodes.items()
                  if n.props.get("graph") == v.GRAPH and n.props.get("user") == user
                  and n.props.get("collection") == collection and n.props.get("session") == session]
        for iri in doomed:
            self._detach_delete(iri)
        orphans = [iri for iri, n in self._nodes.items()
                   if n.props.get("graph") == v.GRAPH and n.props.get("user") is None
                   and not adjacent.get(iri)]
        for iri in orphans:
            del self._nodes[iri]
        return doomed, orphans

    # -- internals ----------------------------------------------------------------

    def _node(self, iri: str) -> ImageNode:
        node = self._nodes.get(iri)
        if node is None:
            node = self._nodes[iri] = ImageNode(iri, props={"iri": iri})
        return node

    def _merge_node(self, row: Row) -> None:
        node = self._node(row["iri"])
        _set_all(node.props, row["props"])
        for name in m.DATETIME_PROPS.values():
            if row.get(name) is not None:
                node.props[name] = Moment(row[name])
        for key, name in _APPENDED:
            old: list[Any] = node.props.get(name) or []
            new = [x for x in row[key] if x not in old]
            if new:
                node.props[name] = old + new
        node.labels.update(row["labels"])

    def _merge_status(self, row: Row) -> None:
        node = self._node(row["iri"])
        _set_all(node.props, row["scope"])
        steps = node.props.get("steps")
        if steps is None or steps <= row["steps"]:
            _set_all(node.props, {name: row[name] for name in STATUS_PROPS}, keep_empty_lists=True)

    def _merge_relationship(self, rel_type: str, s: str, row: Row) -> None:
        o = row["o"]
        if s not in self._nodes or o not in self._nodes:
            return  # MATCH finds nothing: the statement writes nothing
        predicate = row.get("predicate") if rel_type == m.LINK else None
        key = (s, rel_type, o, predicate)
        props = self._rels.get(key)
        if props is None:
            props = self._rels[key] = {} if predicate is None else {"predicate": predicate}
            if self._adjacent is not None:
                self._adjacent.setdefault(s, set()).add(key)
                self._adjacent.setdefault(o, set()).add(key)
        props["graph"] = row["graph"]

    def _adjacency(self) -> dict[str, set[RelKey]]:
        if self._adjacent is None:
            adjacent: dict[str, set[RelKey]] = {}
            for key in self._rels:
                adjacent.setdefault(key[0], set()).add(key)
                adjacent.setdefault(key[2], set()).add(key)
            self._adjacent = adjacent
        return self._adjacent

    def _detach_delete(self, iri: str) -> None:
        adjacent = self._adjacency()
        for key in adjacent.pop(iri, set()):
            del self._rels[key]
            other = key[2] if key[0] == iri else key[0]
            adjacent.get(other, set()).discard(key)
        del self._nodes[iri]


def _set_all(props: dict[str, Any], values: Mapping[str, Any], keep_empty_lists: bool = False) -> None:
    """``SET n += values`` (a ``null`` removes the property)."""
    for name, value in values.items():
        if value is None:
            props.pop(name, None)
        else:
            props[name] = list(value) if keep_empty_lists and isinstance(value, list) else value
