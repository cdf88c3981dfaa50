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

:meth:`GraphImage.write` runs in C when ``connectors/neo4j/_image_c.c`` is built
(:func:`_choose_write`); ``tests/unit/test_image_write_c.py`` checks that it leaves the
image the Python fold leaves, in the same order.

``tests/unit/test_bulk_image.py`` checks these rules without servers; ``tests/bulk``
(``make bulk-tests``) compares an imported graph with the streamed one, every
node's labels and typed properties and every relationship.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from provstream.connectors.neo4j import model as m
from provstream.connectors.neo4j.cypher import RELATIONSHIP_TYPES
from provstream.connectors.neo4j.rows import Row, Rows
from provstream.core import vocab as v
from provstream.native import c_extensions_off

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

        In C when the extension is built (:func:`_choose_write`), in Python otherwise; the same image either way.

        :param rows: what :func:`.rows.batch_rows` gives for the batch (its second item).

        Example: ``image.write(batch_rows(batch, lineage)[1])``.
        """
        _WRITE(self._nodes, self._rels, self._adjacent, rows if isinstance(rows, list) else list(rows))

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
        _merge_relationship(self._nodes, self._rels, self._adjacent, rel_type, s, row)

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


# -- GraphImage.write: the Python fold and the C one ------------------------------------

Nodes = dict[str, ImageNode]
Relationships = dict[RelKey, dict[str, Any]]
Adjacency = dict[str, set[RelKey]] | None
WriteRows = Callable[[Nodes, Relationships, Adjacency, list[Row]], None]


def _write_py(nodes: Nodes, rels: Relationships, adjacent: Adjacency, rows: list[Row]) -> None:
    """:meth:`GraphImage.write` on the image's node and relationship dicts and its adjacency (or ``None``)."""
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
                    _merge_relationship(nodes, rels, adjacent, rel_type, s, rel)


def _merge_relationship(nodes: Nodes, rels: Relationships, adjacent: Adjacency, rel_type: str, s: str,
                        row: Row) -> None:
    o = row["o"]
    if s not in nodes or o not in nodes:
        return  # MATCH finds nothing: the statement writes nothing
    predicate = row.get("predicate") if rel_type == m.LINK else None
    key = (s, rel_type, o, predicate)
    props = rels.get(key)
    if props is None:
        props = rels[key] = {} if predicate is None else {"predicate": predicate}
        if adjacent is not None:
            adjacent.setdefault(s, set()).add(key)
            adjacent.setdefault(o, set()).add(key)
    props["graph"] = row["graph"]


def _settings() -> dict[str, Any]:
    """What the C write is configured with: the classes and names this module defines."""
    return {"ImageNode": ImageNode, "Moment": Moment, "RESOURCE": RESOURCE, "LINK": m.LINK,
            "RELATIONSHIP_TYPES": tuple(RELATIONSHIP_TYPES), "STATUS_PROPS": STATUS_PROPS,
            "LINEAGE_PROPS": LINEAGE_PROPS, "APPENDED": _APPENDED}


def _sample_rows() -> list[list[Row]]:
    """Two batches of write rows that go through every branch of :func:`_write_py` (pure)."""
    g, when = v.GRAPH, "2025-03-01T09:00:00.000000Z"
    status = {"status": "open", "steps": 1, "expectedSteps": None, "lateSteps": 0, "missingSteps": []}
    return [
        [{"iri": "urn:q", "props": {"graph": g, "user": "u", "n": 1, "gone": None}, "labels": ["Question"],
          "types": ["t1", "t2"], "chunks": ["c1"], "startedAtTime": when, **status,
          "lineage": {"eventPartition": None, "eventOffset": None, "triplesPartition": 0, "triplesOffset": 1},
          "wasDerivedFrom": [{"o": "urn:x", "graph": g}],
          m.LINK: [{"o": "urn:x", "graph": g, "predicate": "urn:p"}, {"o": "urn:none", "graph": g}]},
         {"iri": "urn:x", "graph": g, "props": {}, "labels": []},
         {"iri": "urn:q", "props": {"n": None, "m": [2]}, "labels": ["Activity", "Question"],
          "types": ["t2", "t3", "t3"], "extra": ["e"], **status, "steps": 2, "expectedSteps": 2,
          "missingSteps": [1], "lineage": {"eventPartition": 0, "eventOffset": 5, "triplesPartition": 9,
                                           "triplesOffset": 9},
          m.LINK: [{"o": "urn:x", "graph": "urn:g2", "predicate": "urn:p"}, {"o": "urn:x", "graph": g}]}],
        [{"iri": "urn:q", "props": {}, "labels": [], **status, "expectedSteps": 3},
         {"iri": "urn:y", "props": {"a": [1]}, "labels": ["Entity"], "types": [], "chunks": ["c1", "c1"],
          "wasGeneratedBy": [{"o": "urn:q", "graph": g}], "selectedEdge": [{"o": "urn:y", "graph": g}],
          m.LINK: [{"o": "urn:x", "graph": g, "predicate": None}, {"o": "urn:q", "graph": g, "predicate": "urn:p"}]},
         {"iri": "urn:q", "props": {}, "labels": [], "chunks": ["c2", "c1"], "extra": []}],
    ]


def _snapshot(nodes: Nodes, rels: Relationships, adjacent: Adjacency) -> tuple[Any, ...]:
    """An image's state with every order that matters: nodes, each one's class, labels and ordered
    properties, relationships with ordered properties, the adjacency."""
    return ([(iri, type(n), n.iri, n.labels, list(n.props.items())) for iri, n in nodes.items()],
            [(key, list(props.items())) for key, props in rels.items()], adjacent)


def _choose_write() -> WriteRows:
    """What :meth:`GraphImage.write` runs: the C write when built, else :func:`_write_py`.

    ``provstream.connectors.neo4j._image_c`` (``connectors/neo4j/_image_c.c``, built by
    ``pip install`` when a C compiler is there) leaves the image :func:`_write_py` leaves
    (the same nodes, relationships and adjacency, in the same order, each node's
    properties in the same order) for the rows :func:`.rows.batch_rows` gives; rows of
    any other form it refuses before changing anything, and :func:`_write_py` applies
    them. It is not used with ``PROVSTREAM_NO_C_EXTENSIONS=1``, when it was not built,
    when :class:`ImageNode` or :class:`Moment` have other fields than it makes, or when
    it does not leave the image of :func:`_sample_rows` exactly as :func:`_write_py` does.

    :returns: a function ``(nodes, rels, adjacent, rows) -> None``.

    Example::

        >>> chosen, python = GraphImage(), GraphImage()
        >>> for rows in _sample_rows():
        ...     _choose_write()(chosen._nodes, chosen._rels, chosen._adjacent, rows)
        ...     _write_py(python._nodes, python._rels, python._adjacent, rows)
        >>> _snapshot(chosen._nodes, chosen._rels, None) == _snapshot(python._nodes, python._rels, None)
        True
    """
    if c_extensions_off():
        return _write_py
    try:
        from provstream.connectors.neo4j import _image_c
    except ImportError:
        return _write_py
    if ([f.name for f in fields(ImageNode)] != ["iri", "labels", "props"] or [f.name for f in fields(Moment)] != [
            "text"] or hasattr(ImageNode, "__post_init__") or hasattr(Moment, "__post_init__")):
        return _write_py  # the C write makes them field by field, as their __init__ does
    try:
        _image_c.configure(_settings())
        images: list[tuple[Nodes, Relationships, Adjacency]] = [({}, {}, None), ({}, {}, None)]
        for step, rows in enumerate(_sample_rows()):
            if step:  # the adjacency kept up to date after a first erase()
                images = [(nodes, rels, {}) for nodes, rels, _ in images]
            _image_c.write(*images[0], rows)
            _write_py(*images[1], rows)
        exact = _snapshot(*images[0]) == _snapshot(*images[1])
    except Exception:  # noqa: BLE001 - a C write that cannot apply the sample is not used
        exact = False
    if not exact:
        return _write_py
    fast, unsupported = _image_c.write, _image_c.Unsupported

    def write_c(nodes: Nodes, rels: Relationships, adjacent: Adjacency, rows: list[Row]) -> None:
        try:
            fast(nodes, rels, adjacent, rows)
        except unsupported:  # refused before anything changed: the Python fold applies them or fails
            _write_py(nodes, rels, adjacent, rows)

    return write_c


_WRITE = _choose_write()
