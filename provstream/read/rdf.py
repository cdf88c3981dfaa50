"""Conversion between provstream triples and rdflib graphs.

rdflib 7 has no RDF-star triple terms, so a quoted triple (GraphRAG's
``tg:edge``) is written as a standard RDF 1.1 statement node: a blank node
typed ``rdf:Statement`` with ``rdf:subject``/``rdf:predicate``/``rdf:object``.
:func:`from_graph` turns such nodes back into quoted triples, so a
graph round-trips losslessly and graphs compare with ``isomorphic``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from rdflib import BNode, Dataset, Graph, URIRef
from rdflib import Literal as RdfLiteral
from rdflib.namespace import RDF as RDFNS
from rdflib.term import Node

from provstream.core.triples import Iri, Literal, QuotedTriple, Term, Triple
from provstream.core.vocab import GRAPH, XSD_DATETIME, XSD_STRING, xsd_datetime


def _node(term: Iri | Literal) -> Node:
    if isinstance(term, Iri):
        return URIRef(term.value)
    datatype = URIRef(term.datatype) if term.datatype and term.datatype != XSD_STRING else None
    return RdfLiteral(term.value, datatype=datatype, lang=term.language)


def _statement(g: Graph, q: QuotedTriple) -> BNode:
    node = BNode()
    g.add((node, RDFNS.type, RDFNS.Statement))
    g.add((node, RDFNS.subject, URIRef(q.s.value)))
    g.add((node, RDFNS.predicate, URIRef(q.p.value)))
    g.add((node, RDFNS.object, _node(q.o)))
    return node


def add_triples(g: Graph, triples: Iterable[Triple]) -> Graph:
    for t in triples:
        o = _statement(g, t.o) if isinstance(t.o, QuotedTriple) else _node(t.o)
        g.add((URIRef(t.s.value), URIRef(t.p.value), o))
    return g


def to_graph(triples: Iterable[Triple]) -> Graph:
    """A plain graph of the triples (for isomorphism checks, Turtle, JSON-LD)."""
    return add_triples(Graph(), triples)


def to_dataset(triples: Iterable[Triple], graph: str = GRAPH) -> Dataset:
    """A dataset with the triples in the named graph (for TriG, N-Quads)."""
    ds = Dataset()
    add_triples(ds.graph(URIRef(graph)), triples)
    return ds


def _lexical(node: RdfLiteral) -> str:
    """The literal's text; an aware xsd:dateTime back in the canonical form (rdflib normalises it)."""
    value = node.value
    if str(node.datatype) == XSD_DATETIME and isinstance(value, datetime) and value.tzinfo is not None:
        return xsd_datetime(value)
    return str(node)


def _term(g: Graph, node: Node) -> Term:
    if isinstance(node, URIRef):
        return Iri(str(node))
    if isinstance(node, RdfLiteral):
        datatype = str(node.datatype) if node.datatype and str(node.datatype) != XSD_STRING else None
        return Literal(_lexical(node), datatype, node.language)
    if isinstance(node, BNode) and (node, RDFNS.type, RDFNS.Statement) in g:
        s, p, o = (g.value(node, pred) for pred in (RDFNS.subject, RDFNS.predicate, RDFNS.object))
        obj = _term(g, o)  # type: ignore[arg-type]
        if not isinstance(obj, (Iri, Literal)):
            raise ValueError("nested quoted triples are not supported")
        return QuotedTriple(Iri(str(s)), Iri(str(p)), obj)
    raise ValueError(f"unsupported RDF term {node!r}")


def from_graph(g: Graph) -> set[Triple]:
    """Inverse of :func:`to_graph` (statement nodes become quoted triples again)."""
    out: set[Triple] = set()
    for s, p, o in g:
        if isinstance(s, BNode):
            continue  # part of a statement node
        out.add(Triple(Iri(str(s)), Iri(str(p)), _term(g, o)))
    return out
