"""Triples -> a ``prov`` package document (PROV-DM), for PROV-N and PROV-JSON export (pure).

Mapping (documented in docs/export.md):

- a node typed ``prov:Activity`` is an ``activity`` whose start time is its
  ``prov:startedAtTime``; every other subject (``prov:Entity``, and GraphRAG's
  untyped selected-edge nodes) is an ``entity``;
- other ``rdf:type`` values become ``prov:type`` attributes;
- ``prov:wasDerivedFrom`` / ``prov:wasGeneratedBy`` / ``prov:used`` /
  ``prov:wasInformedBy`` become the PROV relations of the same name, exactly
  as stored (use :func:`provstream.read.strict.strict_triples` first for a
  document that passes the PROV constraints);
- any other predicate becomes an attribute: strings stay strings (language
  tags kept), typed literals keep their XSD datatype, IRIs become qualified
  names, and a quoted ``tg:edge`` triple becomes its N-Triples-star text
  ``<< <s> <p> <o> >>``.

IRIs are written as qualified names: ``trace:`` for ``urn:trustgraph:``,
``tg:`` for the TrustGraph namespace, and ``ns1:``, ``ns2:``, ... for any
other namespace, numbered in sorted order so the output is deterministic.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from prov.model import PROV_TYPE, ProvDocument, QualifiedName
from prov.model import Literal as ProvLiteral

from provstream.core import vocab as v
from provstream.core.triples import Iri, Literal, QuotedTriple, Triple
from provstream.read.strict import PROV_USED, PROV_WAS_INFORMED_BY

FIXED_PREFIXES = {"trace": "urn:trustgraph:", "tg": v.TG}
_RELATIONS = {v.PROV_WAS_DERIVED_FROM, v.PROV_WAS_GENERATED_BY, PROV_USED, PROV_WAS_INFORMED_BY}
_PROV_CLASSES = {v.PROV_ACTIVITY, v.PROV_ENTITY}
_SPLIT = re.compile(r"^(.*[#/:])([^#/:]+)$")


class _Names:
    """IRI -> qualified name, registering namespaces on the document as needed."""

    def __init__(self, doc: ProvDocument, iris: Iterable[str]) -> None:
        self._doc = doc
        self._ns = {prefix: doc.add_namespace(prefix, uri) for prefix, uri in FIXED_PREFIXES.items()}
        self._ns["prov"] = doc.add_namespace("prov", v.PROV)
        self._ns["xsd"] = doc.add_namespace("xsd", v.XSD)
        others = sorted({self._split(i)[0] for i in iris if self._fixed(i) is None})
        for n, uri in enumerate(others, start=1):
            self._ns[f"ns{n}"] = doc.add_namespace(f"ns{n}", uri)

    def _fixed(self, iri: str) -> str | None:
        for prefix, uri in (("tg", v.TG), ("prov", v.PROV), ("xsd", v.XSD), ("trace", "urn:trustgraph:")):
            if iri.startswith(uri) and len(iri) > len(uri):
                return prefix
        return None

    @staticmethod
    def _split(iri: str) -> tuple[str, str]:
        match = _SPLIT.match(iri)
        return (match.group(1), match.group(2)) if match else (iri, "")

    def __call__(self, iri: str) -> QualifiedName:
        prefix = self._fixed(iri)
        if prefix is not None:
            ns = self._ns[prefix]
            return ns[iri[len(ns.uri):]]
        uri, local = self._split(iri)
        ns = next(n for n in self._ns.values() if n.uri == uri)
        return ns[local]


def _iris(triples: Iterable[Triple]) -> set[str]:
    out: set[str] = set()
    for t in triples:
        out.add(t.s.value)
        if t.p.value != v.RDF_TYPE and t.p.value not in _RELATIONS:
            out.add(t.p.value)
        if isinstance(t.o, Iri):
            out.add(t.o.value)
    return out


def to_prov_document(triples: Iterable[Triple]) -> ProvDocument:
    """The triples as a PROV document (relations exactly as given)."""
    triples = sorted(set(triples), key=str)
    doc = ProvDocument()
    name = _Names(doc, _iris(triples))
    by_subject: dict[str, list[Triple]] = defaultdict(list)
    for t in triples:
        by_subject[t.s.value].append(t)
    for subject, own in by_subject.items():
        _element(doc, name, subject, own)
    for t in triples:
        if t.p.value in _RELATIONS and isinstance(t.o, Iri):
            _relation(doc, name(t.s.value), t.p.value, name(t.o.value))
    return doc


def _element(doc: ProvDocument, name: _Names, subject: str, own: list[Triple]) -> None:
    types = {t.o.value for t in own if t.p.value == v.RDF_TYPE and isinstance(t.o, Iri)}
    attrs: list[tuple[Any, Any]] = [(PROV_TYPE, name(x)) for x in sorted(types - _PROV_CLASSES)]
    start: datetime | None = None
    for t in own:
        if t.p.value == v.RDF_TYPE or t.p.value in _RELATIONS:
            continue
        if v.PROV_ACTIVITY in types and t.p.value == v.PROV_STARTED_AT and isinstance(t.o, Literal):
            start = datetime.fromisoformat(t.o.value)
            continue
        attrs.append((name(t.p.value), _value(name, t.o)))
    if v.PROV_ACTIVITY in types:
        doc.activity(name(subject), startTime=start, other_attributes=attrs)
    else:
        doc.entity(name(subject), attrs)


def _value(name: _Names, o: Iri | Literal | QuotedTriple) -> Any:
    if isinstance(o, Iri):
        return name(o.value)
    if isinstance(o, QuotedTriple):
        return str(o)
    if o.language:
        return ProvLiteral(o.value, langtag=o.language)
    if o.datatype and o.datatype != v.XSD_STRING:
        return ProvLiteral(o.value, name(o.datatype))
    return o.value


def _relation(doc: ProvDocument, s: QualifiedName, predicate: str, o: QualifiedName) -> None:
    if predicate == v.PROV_WAS_DERIVED_FROM:
        doc.wasDerivedFrom(s, o)
    elif predicate == v.PROV_WAS_GENERATED_BY:
        doc.wasGeneratedBy(s, o)
    elif predicate == PROV_USED:
        doc.used(s, o)
    else:
        doc.wasInformedBy(s, o)
