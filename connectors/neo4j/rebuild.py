"""Pure inverse of :mod:`.rows`: a stored node and its outgoing relationships → triples.

Types come from the ``types`` list (not from labels), literal datatypes from
the predicate, ``selectedChunk`` gives one triple per element, the ``edge*``
properties give the quoted ``tg:edge`` triple, ``extraLiterals`` give back
literals outside the vocabulary, and relationships give IRI objects (``LINK``
through its ``predicate`` property).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from provstream.connectors.neo4j import model as m
from provstream.core import vocab as v
from provstream.core.triples import Iri, Literal, QuotedTriple, Triple

_REL_PREDICATES = {name: iri for iri, name in m.REL_TYPES.items()}


def node_triples(props: Mapping[str, Any], rels: Iterable[Mapping[str, Any]] = ()) -> list[Triple]:
    """All triples whose subject is this node.

    ``props`` are the node's properties; each of ``rels`` is
    ``{"type": relationship type, "predicate": LINK predicate or None, "o": object IRI}``.
    """
    s = Iri(props["iri"])
    return [Triple(s, Iri(p), o) for p, o in _objects(props, rels)]


def _objects(props: Mapping[str, Any], rels: Iterable[Mapping[str, Any]]) -> Iterator[tuple[str, Any]]:
    for t in props.get("types") or ():
        yield v.RDF_TYPE, Iri(t)
    yield from _literals(props)
    for chunk in props.get("selectedChunk") or ():
        yield v.TG_SELECTED_CHUNK, Literal(chunk)
    if props.get("edgeSubject") is not None:
        yield v.TG_EDGE, quoted_edge(props)
    for text in props.get("extraLiterals") or ():
        p, value, datatype, language = json.loads(text)
        yield p, Literal(value, datatype, language)
    for rel in rels:
        p = rel.get("predicate") if rel["type"] == m.LINK else _REL_PREDICATES.get(rel["type"])
        if p is not None:
            yield p, Iri(rel["o"])


def _literals(props: Mapping[str, Any]) -> Iterator[tuple[str, Literal]]:
    for p, name in m.STRING_PROPS.items():
        if props.get(name) is not None:
            yield p, Literal(props[name])
    for p, name in m.INTEGER_PROPS.items():
        if props.get(name) is not None:
            yield p, Literal(str(int(props[name])), v.XSD_INTEGER)
    for p, name in m.DATETIME_PROPS.items():
        if props.get(name) is not None:
            yield p, Literal(v.xsd_datetime(native_datetime(props[name])), v.XSD_DATETIME)


def quoted_edge(props: Mapping[str, Any]) -> QuotedTriple:
    o: Iri | Literal
    if props.get("edgeObjectKind") == "IRI":
        o = Iri(props["edgeObject"])
    else:
        o = Literal(props["edgeObject"], props.get("edgeObjectDatatype"), props.get("edgeObjectLanguage"))
    return QuotedTriple(Iri(props["edgeSubject"]), Iri(props["edgePredicate"]), o)


def native_datetime(value: Any) -> datetime:
    """A Python datetime from a driver temporal value (``neo4j.time.DateTime``) or a datetime."""
    to_native = getattr(value, "to_native", None)
    return to_native() if to_native is not None else value  # type: ignore[no-any-return]
