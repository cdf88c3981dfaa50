"""Pure translation of a batch of :class:`StepTriples` into Cypher parameter rows.

One row per node (all of a batch's triples about one subject merged), one row
per object-only IRI, one status row per question (the one with most steps),
and relationship rows grouped by relationship type (:class:`Rows`, what the bulk
rebuild's :class:`.image.GraphImage` applies). :func:`write_rows` folds them, with
the offset lineage, into one row per IRI for the store's single constant
``UNWIND $batch.rows ... MERGE`` statement (:data:`.cypher.WRITE_BATCH`); values travel
only as parameters.

A triple the model cannot hold losslessly raises :class:`StoreError` (the sink
dead-letters that message): a quoted triple under a predicate other than
``tg:edge``, or two different quoted triples on one node.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from provstream.connectors.neo4j import model as m
from provstream.core import vocab as v
from provstream.core.triples import Iri, Literal, QuotedTriple, SessionState, SessionStatus, StepTriples, Triple
from provstream.errors import StoreError
from provstream.native import c_extensions_off

Row = dict[str, Any]


@dataclass(frozen=True)
class Rows:
    """Everything one write sends: nodes first, then relationships."""

    nodes: tuple[Row, ...] = ()
    objects: tuple[Row, ...] = ()
    statuses: tuple[Row, ...] = ()
    relationships: Mapping[str, tuple[Row, ...]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return len(self.nodes) + len(self.objects) + len(self.statuses) + sum(
            len(r) for r in self.relationships.values()
        )


class _Node:
    """Accumulates one subject's triples within a batch (internal, mutable; one per subject)."""

    __slots__ = ("iri", "scope", "types", "props", "chunks", "extra", "edge")

    def __init__(self, iri: str, scope: Row) -> None:
        self.iri = iri
        self.scope = scope
        self.types: dict[str, None] = {}
        self.props: Row = {}
        self.chunks: dict[str, None] = {}
        self.extra: dict[str, None] = {}
        self.edge: QuotedTriple | None = None

    def row(self) -> Row:
        types = list(self.types)
        props = {**self.scope, **self.props}
        if self.edge is not None:
            props.update(_edge_props(self.edge))
        labels = sorted({_LABELS[t] for t in types if t in _LABELS})
        row: Row = {"iri": self.iri, "labels": labels, "types": types, "props": props,
                    "chunks": list(self.chunks), "extra": list(self.extra)}
        # Datetimes travel as their canonical text and become DATETIME in Cypher: the driver's
        # own conversion of Python datetimes costs more than the rest of the row together.
        for name in _DATETIME_NAMES:
            row[name] = props.pop(name, None)
        if labels or props.get("edgePredicate"):
            props[m.CAPTION_PROP] = m.caption(labels, props, self.iri)
        return row


_LABELS = m.LABELS
_DATETIME_NAMES = tuple(m.DATETIME_PROPS.values())


def build_rows(batch: Sequence[StepTriples]) -> Rows:
    """The rows that write ``batch`` (any order of messages gives the same graph).

    :param batch: the triples messages of one write.
    :returns: one node row per subject, one row per object-only IRI, one status row
        per question (the message with most steps) and the relationship rows by type.
    :raises StoreError: a triple the model cannot hold (see the module's docstring).

    Example: ``build_rows(fold_all(events)).nodes`` has one row per subject of the session.
    """
    nodes: dict[str, _Node] = {}
    rels: dict[str, dict[tuple[str, str, str], Row]] = {}
    statuses: dict[str, StepTriples] = {}
    for msg in batch:
        scope: Row | None = None
        for t in msg.triples:
            s = t.s.value
            node = nodes.get(s)
            if node is None:
                if scope is None:
                    scope = scope_of(msg)
                node = nodes[s] = _Node(s, scope)
            p, o = t.p.value, t.o
            if isinstance(o, Iri):
                if p == _RDF_TYPE:
                    node.types[o.value] = None
                else:
                    _add_relationship(rels, s, p, o.value, msg.graph)
            elif isinstance(o, QuotedTriple):
                _set_edge(node, p, o)
            else:
                _add_literal(node, p, o)
        best = statuses.get(msg.question)
        if best is None or msg.status.steps >= best.status.steps:
            statuses[msg.question] = msg
    objects = sorted({r["o"] for group in rels.values() for r in group.values()} - nodes.keys())
    graph = batch[0].graph if batch else v.GRAPH
    return Rows(
        nodes=tuple([n.row() for n in nodes.values()]),
        objects=tuple([{"iri": iri, "graph": graph} for iri in objects]),
        statuses=tuple([status_row(msg) for msg in statuses.values()]),
        relationships={k: tuple(group.values()) for k, group in sorted(rels.items())},
    )


def scope_of(msg: StepTriples) -> Row:
    return {"graph": msg.graph, "user": msg.user, "collection": msg.collection,
            "session": msg.session_id, "mechanism": msg.mechanism.value}


def status_row(msg: StepTriples) -> Row:
    s = msg.status
    return {"iri": msg.question, "scope": scope_of(msg), "status": s.state.word,
            "steps": s.steps, "expectedSteps": s.expected, "lateSteps": s.late, "missingSteps": list(s.missing)}


def _add_relationship(rels: dict[str, dict[tuple[str, str, str], Row]], s: str, p: str, o: str, graph: str) -> None:
    rel_type = m.REL_TYPES.get(p, m.LINK)
    row: Row = {"s": s, "o": o, "graph": graph}
    if rel_type == m.LINK:
        row["predicate"] = p
    rels.setdefault(rel_type, {})[(s, p, o)] = row


def _set_edge(node: _Node, p: str, q: QuotedTriple) -> None:
    if p != v.TG_EDGE:
        raise StoreError(f"cannot store a quoted triple under <{p}> on <{node.iri}>: only tg:edge holds one")
    if node.edge is not None and node.edge != q:
        raise StoreError(f"<{node.iri}> has two different tg:edge quoted triples; the model holds one")
    node.edge = q


def _add_literal(node: _Node, p: str, o: Literal) -> None:
    if o.language is None:
        datatype = o.datatype
        if datatype is None:
            name = _STRING_PROPS.get(p)
            if name is None and p in _LIST_PROPS:
                node.chunks[o.value] = None
                return
        elif datatype == _XSD_INTEGER:
            name = _INTEGER_PROPS.get(p)
        elif datatype == _XSD_DATETIME:
            name = _DATETIME_PROPS.get(p)
        else:
            name = None
        if name is not None:
            value = _typed_value(datatype, o.value)
            if value is not None and node.props.setdefault(name, value) == value:
                return
    node.extra[extra_literal(p, o)] = None


def _typed_value(datatype: str | None, lexical: str) -> Any:
    """The value a known literal predicate's literal is stored as, or ``None`` if not in the expected form.

    A plain string is itself; a canonical ``xsd:integer`` that fits is its ``int``; a
    canonical ``xsd:dateTime`` stays text (the statement makes it a DATETIME).
    """
    if datatype is None:
        return lexical
    if datatype == _XSD_INTEGER:
        return m.parse_integer(lexical)
    return lexical if m.parse_datetime(lexical) is not None else None


_RDF_TYPE = v.RDF_TYPE
_XSD_INTEGER, _XSD_DATETIME = v.XSD_INTEGER, v.XSD_DATETIME
_STRING_PROPS, _INTEGER_PROPS, _DATETIME_PROPS, _LIST_PROPS = (
    m.STRING_PROPS, m.INTEGER_PROPS, m.DATETIME_PROPS, m.LIST_PROPS)


def extra_literal(p: str, o: Literal) -> str:
    """The JSON text ``[predicate, value, datatype, language]`` kept in ``extraLiterals``."""
    return json.dumps([p, o.value, o.datatype, o.language], ensure_ascii=False, separators=(",", ":"))


def _edge_props(q: QuotedTriple | None) -> Row:
    if q is None:
        return {}
    props: Row = {"edgeSubject": q.s.value, "edgePredicate": q.p.value, "edgeObject": q.o.value,
                  "edgeObjectKind": "IRI" if isinstance(q.o, Iri) else "LITERAL"}
    if isinstance(q.o, Literal):
        props.update(_present(edgeObjectDatatype=q.o.datatype, edgeObjectLanguage=q.o.language))
    return props


def _present(**values: Any) -> Row:
    return {k: x for k, x in values.items() if x is not None}


def node_iris(msg: StepTriples) -> list[str]:
    """The IRIs of every node writing ``msg`` touches (pure): its Question, subjects and IRI objects, once each.

    Two messages that share one may not be written in parallel transactions
    without risking a deadlock (:func:`provstream.connectors.sink.split_lanes`,
    which looks each one up: a step's triples name its subject several times).
    Types are labels, not nodes, and a quoted triple is properties of its node.

    Example: for an agent step, the Question, the step's own nodes and the node
    it ``wasDerivedFrom`` (which may belong to another session: a sub-trace).
    """
    out = {msg.question: None}
    for t in msg.triples:
        out[t.s.value] = None
        if isinstance(t.o, Iri) and t.p.value != _RDF_TYPE:
            out[t.o.value] = None
    return list(out)


def triple_count(batch: Iterable[StepTriples]) -> int:
    return sum(len(msg.triples) for msg in batch)


def lineage_rows(msg: StepTriples, event: tuple[int, int] | None,
                 triples: tuple[int, int] | None) -> list[Row]:
    """Offset lineage rows for the nodes a message's triples describe (pure).

    :param msg: the triples message.
    :param event: (partition, offset) of the events record it was folded from, if known.
    :param triples: (partition, offset) of the triples record that carried it, if known.
    :returns: one row per subject IRI, for :meth:`Neo4jStore.write`'s ``lineage``.
    """
    ep, eo = event if event is not None else (None, None)
    tp, to = triples if triples is not None else (None, None)
    subjects = {t.s.value: None for t in msg.triples}
    return [{"iri": iri, "eventPartition": ep, "eventOffset": eo, "triplesPartition": tp, "triplesOffset": to}
            for iri in subjects]


Position = tuple[int, int] | None  # (partition, offset) of a Kafka record, if known
Origin = tuple[Position, Position]  # where a triples message came from: its events record, its triples record


def lineage_at(batch: Sequence[StepTriples], origins: Sequence[Origin]) -> list[Row]:
    """The :func:`lineage_rows` of every message of a batch, in batch order (pure).

    :param batch: the triples messages.
    :param origins: one ``(event, triples)`` per message, as :func:`lineage_rows` takes them.
    :returns: the lineage rows, message by message.
    :raises ValueError: not one origin per message.

    Example: ``lineage_at([msg], [(None, (0, 7))]) == lineage_rows(msg, None, (0, 7))``.
    """
    return [row for msg, (event, triples) in zip(batch, origins, strict=True)
            for row in lineage_rows(msg, event, triples)]


_ALLOWED_LABELS = frozenset(m.LABELS.values())
_STATUS_FIELDS = ("status", "steps", "expectedSteps", "lateSteps", "missingSteps")
_LINEAGE_FIELDS = ("eventPartition", "eventOffset", "triplesPartition", "triplesOffset")


def write_rows(rows: Rows, lineage: Iterable[Mapping[str, Any]] = ()) -> list[Row]:
    """One row per IRI for :data:`.cypher.WRITE_BATCH`: the batch's rows and lineage, folded (pure).

    The statement applies a row's parts in the order the separate groups of
    :class:`Rows` would be applied (object, node, status, lineage), and every
    relationship after every node, so the graph is the one the groups describe.

    :param rows: what :func:`build_rows` made of a batch.
    :param lineage: :func:`lineage_rows` of its messages, in batch order: of each
        offset the first non-null value is kept (a node that already has one keeps
        it), and only on nodes of the retrieval graph (:data:`vocab.GRAPH`).
    :returns: rows with ``iri`` and ``props`` always (``{}`` if none) and ``labels``
        (``[]`` if none; only :data:`.model.LABELS` values, else :class:`StoreError`); ``graph`` for an IRI
        only ever an object; ``types``/``chunks``/``extra`` when non-empty;
        ``startedAtTime``; the status fields (``steps`` ...) for a question;
        ``lineage``; and a list under each relationship type that starts there
        (``{"o", "graph"[, "predicate"]}``).

    Example: ``write_rows(build_rows([msg]), lineage_rows(msg, None, (0, 7)))`` is a
    list with one row per subject and object IRI of ``msg``.
    """
    out: dict[str, Row] = {}
    for obj in rows.objects:
        out[obj["iri"]] = {"iri": obj["iri"], "graph": obj["graph"], "props": {}, "labels": []}
    for node in rows.nodes:
        if not _ALLOWED_LABELS.issuperset(node["labels"]):  # they reach SET n:$(...): never one from data
            raise StoreError(f"labels {node['labels']} of <{node['iri']}> are not all in the model's allow-list")
        # the node's own props, not a copy: only a status changes them, and it replaces the dict
        row = out[node["iri"]] = {"iri": node["iri"], "props": node["props"], "labels": node["labels"]}
        if node["types"]:
            row["types"] = node["types"]
        if node["chunks"]:
            row["chunks"] = node["chunks"]
        if node["extra"]:
            row["extra"] = node["extra"]
        for name in _DATETIME_NAMES:
            if node.get(name) is not None:
                row[name] = node[name]
    for status in rows.statuses:
        row = out.setdefault(status["iri"], {"iri": status["iri"], "props": {}, "labels": []})
        row["props"] = {**row["props"], **status["scope"]}
        row.update({name: status[name] for name in _STATUS_FIELDS})
    graph = v.GRAPH
    for line in lineage:
        found = out.get(line["iri"])
        if found is None or found["props"].get("graph", found.get("graph")) != graph:
            continue
        kept = found.get("lineage")
        if kept is None:
            found["lineage"] = {name: line[name] for name in _LINEAGE_FIELDS}
        elif None in kept.values():
            for name in _LINEAGE_FIELDS:
                if kept[name] is None:
                    kept[name] = line[name]
    for rel_type, group in rows.relationships.items():
        for rel in group:
            item = {"o": rel["o"], "graph": rel["graph"]}
            if "predicate" in rel:
                item["predicate"] = rel["predicate"]
            out[rel["s"]].setdefault(rel_type, []).append(item)
    return list(out.values())


# The procedure's batch (contract 2 of connectors/neo4j/procedure/WriteBatch.java): the rows by position.
PROCEDURE_POSITIONS: Final = ("iri", "graph", "props", "scope", "labels", "types", "chunks", "extra",
                              "startedAtTime", "status", "lineage", "relationships")
_SHARED_PROPS_ORDER = m.SCOPE_PROPS  # texts that most rows of a batch share: sent once
_SHARED_PROPS = frozenset(_SHARED_PROPS_ORDER)
_PROCEDURE_RELS = tuple(m.REL_TYPES.values()) + (m.LINK,)


def procedure_batch_py(rows: Sequence[Row]) -> dict[str, list[Any]]:
    """:func:`write_rows`'s rows as the ``provstream.writeBatch`` procedure takes them (pure).

    Each row becomes a list by position (:data:`PROCEDURE_POSITIONS`, trailing
    ``None`` left off), with each property key and label name, and each text
    of a scope property, a graph or a type, sent once per batch in a table and
    referred to by its index; a relationship's end node that is a row of the
    batch is referred to by that row's index. Together with the driver's
    packing and the server's unpacking, this costs both sides less than the
    rows as maps (BENCHMARKS.md).

    :param rows: what :func:`write_rows` gives.
    :returns: ``{"keys": [...], "labels": [...], "strings": [...], "rows": [[...], ...]}``.

    Example::

        >>> procedure_batch_py([{"iri": "urn:a", "props": {"user": "u", "n": 1}, "labels": ["Entity"],
        ...                      "wasDerivedFrom": [{"o": "urn:a", "graph": "g"}]}])
        {'keys': ['user', 'n'], 'labels': ['Entity'], 'strings': ['u', 'g'], \
'rows': [['urn:a', None, [1, 1], [0, 0], [0], None, None, None, None, None, None, [0, 0, 1, None]]]}
    """
    keys: dict[str, int] = {}
    labels: dict[str, int] = {}
    strings: dict[str, int] = {}
    index: dict[Any, int] = {}
    for i, row in enumerate(rows):
        index.setdefault(row["iri"], i)

    def text(value: Any) -> Any:
        if type(value) is not str:
            return value
        found = strings.get(value)
        if found is None:
            found = strings[value] = len(strings)
        return found

    out: list[list[Any]] = []
    for row in rows:  # the tables fill in the order of the positions, as the C function fills them
        graph = text(row.get("graph"))
        props: list[Any] = []
        scope: list[Any] = []
        for name, value in row["props"].items():
            key = keys.get(name)
            if key is None:
                key = keys[name] = len(keys)
            if name in _SHARED_PROPS and type(value) is str:
                scope += (key, text(value))
            else:
                props += (key, value)
        names: list[int] = []
        for name in row["labels"]:
            label = labels.get(name)
            if label is None:
                label = labels[name] = len(labels)
            names.append(label)
        types = row.get("types")
        type_texts = [text(x) for x in types] if types else None
        status = ([row["status"], row["steps"], row["expectedSteps"], row["lateSteps"], row["missingSteps"]]
                  if "steps" in row else None)
        line = row.get("lineage")
        lineage = ([line["eventPartition"], line["eventOffset"], line["triplesPartition"], line["triplesOffset"]]
                   if line is not None else None)
        rels: list[Any] = []
        for t, rel_type in enumerate(_PROCEDURE_RELS):
            for rel in row.get(rel_type, ()):
                rels += (t, index.get(rel["o"], rel["o"]), text(rel["graph"]), rel.get("predicate"))
        out_row = [row["iri"], graph, props or None, scope or None, names or None, type_texts,
                   row.get("chunks") or None, row.get("extra") or None, row.get("startedAtTime"), status, lineage,
                   rels or None]
        while out_row[-1] is None:
            out_row.pop()
        out.append(out_row)
    return {"keys": list(keys), "labels": list(labels), "strings": list(strings), "rows": out}


# -- the sink's rows in one pass --------------------------------------------------

BatchRows = Callable[[Sequence[StepTriples], Iterable[Mapping[str, Any]]], tuple[int, list[Row]]]
BatchRowsAt = Callable[[Sequence[StepTriples], Sequence[Origin]], tuple[int, list[Row]]]


def _batch_rows_py(batch: Sequence[StepTriples], lineage: Iterable[Mapping[str, Any]] = ()) -> tuple[int, list[Row]]:
    rows = build_rows(batch)
    return rows.count, write_rows(rows, lineage)


def _batch_rows_at_py(batch: Sequence[StepTriples], origins: Sequence[Origin]) -> tuple[int, list[Row]]:
    return _batch_rows_py(batch, lineage_at(batch, origins))


def _sample_batch() -> list[StepTriples]:
    """Two messages that go through every branch of the row building (pure)."""
    q = Iri("urn:trustgraph:question:s")
    e = Iri("urn:trustgraph:prov:exploration:s")
    status = SessionStatus(SessionState.OPEN, 2, None, 0, ())
    return [
        StepTriples("e0", "s", v.Mechanism.DOCRAG, 0, "u", "c", q.value, (
            Triple(q, Iri(v.RDF_TYPE), Iri(v.TG_QUESTION)), Triple(q, Iri(v.TG_QUERY), Literal("why?")),
            Triple(q, Iri(v.PROV_STARTED_AT), Literal("2025-03-01T12:00:00.000000Z", v.XSD_DATETIME)),
            Triple(q, Iri("urn:x:note"), Literal("n", None, "en"))), SessionStatus(SessionState.OPEN, 1)),
        StepTriples("e1", "s", v.Mechanism.DOCRAG, 1, "u", "c", q.value, (
            Triple(e, Iri(v.RDF_TYPE), Iri(v.TG_EXPLORATION)), Triple(e, Iri(v.PROV_WAS_GENERATED_BY), q),
            Triple(e, Iri(v.TG_CHUNK_COUNT), Literal("2", v.XSD_INTEGER)),
            Triple(e, Iri(v.TG_SELECTED_CHUNK), Literal("c#1")), Triple(e, Iri("urn:x:see"), Iri("urn:x:other")),
            Triple(e, Iri(v.TG_EDGE), QuotedTriple(Iri("urn:x:a"), Iri("urn:x:p"), Literal("b", None, "en")))),
            status),
    ]


def _choose_batch_rows() -> tuple[BatchRows, BatchRowsAt]:
    """What :func:`batch_rows` and :func:`batch_rows_at` run: the C rows when built, else the Python ones.

    ``provstream.connectors.neo4j._rows_c`` (``connectors/neo4j/_rows_c.c``, built by
    ``pip install`` when a C compiler is there) returns what the Python functions
    return, in one pass, for the exact classes of :mod:`provstream.core.triples`;
    anything else it leaves to them. It is not used with
    ``PROVSTREAM_NO_C_EXTENSIONS=1``, when it was not built, or when it does not
    give the rows of a sample batch exactly as the Python functions do.

    Returns:
        the functions ``(batch, lineage) -> (count, rows)`` and ``(batch, origins) -> (count, rows)``.

    Example::

        >>> batch = _sample_batch()
        >>> _choose_batch_rows()[0](batch, []) == _batch_rows_py(batch, [])
        True
    """
    if c_extensions_off():
        return _batch_rows_py, _batch_rows_at_py
    try:
        from provstream.connectors.neo4j import _rows_c
    except ImportError:
        return _batch_rows_py, _batch_rows_at_py
    try:
        _rows_c.configure({
            "LABELS": dict(m.LABELS), "STRING_PROPS": dict(m.STRING_PROPS), "INTEGER_PROPS": dict(m.INTEGER_PROPS),
            "DATETIME_PROPS": dict(m.DATETIME_PROPS), "LIST_PROPS": dict(m.LIST_PROPS),
            "REL_TYPES": dict(m.REL_TYPES), "MECHANISM_VALUES": {x: x.value for x in v.Mechanism},
            "STATE_WORDS": {x: x.word for x in SessionState}, "LINK": m.LINK, "RDF_TYPE": v.RDF_TYPE,
            "TG_EDGE": v.TG_EDGE, "XSD_INTEGER": v.XSD_INTEGER, "XSD_DATETIME": v.XSD_DATETIME, "GRAPH": v.GRAPH,
            "CAPTION_PROP": m.CAPTION_PROP, "DATETIME_NAMES": _DATETIME_NAMES, "parse_integer": m.parse_integer,
            "parse_datetime": m.parse_datetime, "extra_literal": extra_literal, "caption": m.caption,
            "CAPTION_WIDTH": m.CAPTION_WIDTH, "SHARED_PROPS": tuple(_SHARED_PROPS_ORDER),
        })
        batch = _sample_batch()
        origins: list[Origin] = [((0, i), None) for i in range(len(batch))]
        lineage = lineage_at(batch, origins)
        expected = _batch_rows_py(batch, lineage)
        exact = _rows_c.write_rows(batch, lineage) == expected and _rows_c.write_rows_at(batch, origins) == expected
    except Exception:  # noqa: BLE001 - C rows that cannot build the sample are not used
        exact = False
    if not exact:
        return _batch_rows_py, _batch_rows_at_py
    fast, fast_at = _rows_c.write_rows, _rows_c.write_rows_at

    def rows_c(batch: Sequence[StepTriples], lineage: Iterable[Mapping[str, Any]] = ()) -> tuple[int, list[Row]]:
        lines = lineage if isinstance(lineage, list) else list(lineage)
        try:
            return fast(batch, lines)
        except Exception:  # noqa: BLE001 - what the C rows do not take, the Python ones build or refuse
            return _batch_rows_py(batch, lines)

    def rows_at_c(batch: Sequence[StepTriples], origins: Sequence[Origin]) -> tuple[int, list[Row]]:
        try:
            return fast_at(batch, origins)
        except Exception:  # noqa: BLE001 - as rows_c
            return _batch_rows_at_py(batch, origins)

    return rows_c, rows_at_c


_batch_rows, _batch_rows_at = _choose_batch_rows()


def batch_rows(batch: Sequence[StepTriples], lineage: Iterable[Mapping[str, Any]] = ()) -> tuple[int, list[Row]]:
    """The rows :meth:`Neo4jStore.write` sends for ``batch``: ``write_rows(build_rows(batch), lineage)``.

    In C when the extension is built (:func:`_choose_batch_rows`), in Python otherwise; the same rows either way.

    :param batch: the triples messages of one write.
    :param lineage: :func:`lineage_rows` of its messages, in batch order.
    :returns: ``(count, rows)``: the number of rows :func:`build_rows` makes (0: nothing to
        write) and the rows of :func:`write_rows`.
    :raises StoreError: a triple the model cannot hold.

    Example: ``batch_rows([msg], lineage_rows(msg, None, (0, 7)))[1]`` is a list with one row
    per subject and object IRI of ``msg``.
    """
    return _batch_rows(batch, lineage)


def batch_rows_at(batch: Sequence[StepTriples], origins: Sequence[Origin]) -> tuple[int, list[Row]]:
    """:func:`batch_rows` with each message's lineage read at its origin.

    That is ``batch_rows(batch, lineage_at(batch, origins))``; the C rows work the
    lineage out without making the rows of :func:`lineage_at`.

    :param batch: the triples messages of one write.
    :param origins: one ``(event, triples)`` per message: the (partition, offset) of the events
        record it was folded from and of the triples record that carried it, each ``None`` if unknown.
    :returns: ``(count, rows)``, as :func:`batch_rows`.
    :raises StoreError: a triple the model cannot hold.

    Example: ``batch_rows_at([msg], [(None, (0, 7))]) == batch_rows([msg], lineage_rows(msg, None, (0, 7)))``.
    """
    return _batch_rows_at(batch, origins)


ProcedureBatch = Callable[[Sequence[Row]], dict[str, list[Any]]]


def _choose_procedure_batch() -> ProcedureBatch:
    """What :func:`procedure_batch` runs: ``_rows_c.procedure_batch`` when built, else :func:`procedure_batch_py`.

    The C function is used only where the C rows are (:func:`_choose_batch_rows`
    configured it) and when it gives the batch of a sample exactly as the Python
    one does; rows it does not take (not the exact dicts and lists
    :func:`write_rows` makes) go to the Python one.

    Returns:
        the function ``rows -> batch``.

    Example::

        >>> rows = _batch_rows_py(_sample_batch())[1]
        >>> _choose_procedure_batch()(rows) == procedure_batch_py(rows)
        True
    """
    if _batch_rows is _batch_rows_py:
        return procedure_batch_py
    from provstream.connectors.neo4j import _rows_c
    origins: list[Origin] = [((0, i), (1, i)) for i in range(2)]
    sample = _batch_rows_at_py(_sample_batch(), origins)[1]
    try:
        exact = _rows_c.procedure_batch(sample) == procedure_batch_py(sample)
    except Exception:  # noqa: BLE001 - a C batch that cannot take the sample is not used
        exact = False
    if not exact:
        return procedure_batch_py
    fast = _rows_c.procedure_batch

    def procedure_batch_c(rows: Sequence[Row]) -> dict[str, list[Any]]:
        try:
            return fast(rows)
        except Exception:  # noqa: BLE001 - what the C batch does not take, the Python one builds
            return procedure_batch_py(rows)

    return procedure_batch_c


_procedure_batch = _choose_procedure_batch()


def procedure_batch(rows: Sequence[Row]) -> dict[str, list[Any]]:
    """:func:`procedure_batch_py` of ``rows``, in C when built: what :meth:`Neo4jStore.write` sends the procedure.

    :param rows: what :func:`write_rows` gives.
    :returns: the batch of contract 2 (:data:`PROCEDURE_POSITIONS`).

    Example: ``procedure_batch(batch_rows([msg])[1])["rows"][0][0]`` is the first row's IRI.
    """
    return _procedure_batch(rows)
