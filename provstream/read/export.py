"""Serialise a trace's (or a scope's) triples to RDF and PROV formats, and parse RDF back (pure).

RDF formats go through :mod:`provstream.rdf`: Turtle is the plain graph,
TriG / N-Quads / JSON-LD put it in the named graph ``urn:graph:retrieval``.
PROV-N and PROV-JSON go through the ``prov`` package
(:mod:`provstream.read.provdoc`). ``strict`` first applies the
:mod:`provstream.read.strict` mapping and refuses to write a document that
still breaks a PROV constraint.
"""

from __future__ import annotations

from collections.abc import Iterable

from rdflib import Dataset, Graph, URIRef

from provstream.core.triples import Triple
from provstream.core.vocab import GRAPH
from provstream.errors import ProvstreamError
from provstream.read.lineage import LINEAGE_GRAPH
from provstream.read.lineage import NS as LINEAGE_NS
from provstream.read.provcheck import violations
from provstream.read.provdoc import to_prov_document
from provstream.read.rdf import add_triples, from_graph, to_dataset, to_graph
from provstream.read.strict import strict_triples

RDF_FORMATS = {"nquads": "nquads", "turtle": "turtle", "trig": "trig", "jsonld": "json-ld"}
PROV_FORMATS = ("provn", "provjson")
FORMATS = (*RDF_FORMATS, *PROV_FORMATS)
NAMED_GRAPH_FORMATS = frozenset({"nquads", "trig", "jsonld"})


class ExportError(ProvstreamError):
    """The triples cannot be written in the requested form."""


def export(triples: Iterable[Triple], fmt: str, *, strict: bool = False, lineage: Iterable[Triple] = ()) -> str:
    """The triples serialised as ``fmt`` (one of :data:`FORMATS`).

    :param lineage: offset-lineage statements (:func:`provstream.read.lineage.lineage_triples`), written in
        their own named graph ``urn:graph:provstream:lineage``; only the named-graph formats take them.
    """
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    extra = set(lineage)
    if extra and fmt not in NAMED_GRAPH_FORMATS:
        raise ExportError(f"--with-lineage needs a named-graph format ({', '.join(sorted(NAMED_GRAPH_FORMATS))}): "
                          "the lineage goes in its own graph")
    chosen = strict_triples(triples) if strict else set(triples)
    if strict:
        broken = violations(to_prov_document(chosen))
        if broken:
            raise ExportError("the strict PROV mapping still breaks PROV constraints: " + "; ".join(broken))
    if fmt in PROV_FORMATS:
        doc = to_prov_document(chosen)
        return str(doc.get_provn()) + "\n" if fmt == "provn" else str(doc.serialize(format="json", indent=2))
    return _rdf(chosen, fmt, extra)


def _rdf(triples: set[Triple], fmt: str, lineage: set[Triple] | None = None) -> str:
    if fmt in NAMED_GRAPH_FORMATS:
        graph: Graph = to_dataset(triples)
        if lineage:
            add_triples(graph.graph(URIRef(LINEAGE_GRAPH)), lineage)  # type: ignore[attr-defined]
            graph.bind("lineage", LINEAGE_NS)
    else:
        graph = to_graph(triples)
    _bind(graph)
    return str(graph.serialize(format=RDF_FORMATS[fmt]))


def _bind(graph: Graph) -> None:
    graph.bind("prov", "http://www.w3.org/ns/prov#")
    graph.bind("tg", "https://trustgraph.ai/ns/")


def parse_rdf(text: str, fmt: str) -> set[Triple]:
    """Inverse of :func:`export` for the RDF formats: the triples of the retrieval graph."""
    if fmt not in RDF_FORMATS:
        raise ExportError(f"{fmt!r} is not an RDF format")
    if fmt not in NAMED_GRAPH_FORMATS:
        return from_graph(Graph().parse(data=text, format=RDF_FORMATS[fmt]))
    ds = Dataset()
    ds.parse(data=text, format=RDF_FORMATS[fmt])
    return from_graph(ds.graph(URIRef(GRAPH)))
