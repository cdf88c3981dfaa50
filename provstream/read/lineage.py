"""Offset lineage on the read side: where each node of a trace came from in Kafka (pure).

Every node records the events-topic partition and offset of the event that
produced it and the triples-topic partition and offset of the record that
wrote it (the worker names the event in the triples record's
``provstream.source.*`` headers; the sink stores both). This module prints
them per step and states them in PROV, in the named graph
:data:`LINEAGE_GRAPH` (never in ``urn:graph:retrieval``): each node
``prov:wasDerivedFrom`` the Kafka record, a ``prov:Entity`` with its topic,
partition and offset.

Example::

    >>> record_iri("provstream.events", 0, 41)
    'urn:provstream:kafka:provstream.events:0:41'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from provstream.core import vocab as v
from provstream.core.triples import Iri, Literal, Triple
from provstream.read.model import AgentTrace, Trace

LINEAGE_GRAPH = "urn:graph:provstream:lineage"
NS = "https://provstream.dev/ns/lineage#"
TOPIC, PARTITION, OFFSET = NS + "topic", NS + "partition", NS + "offset"
KAFKA_RECORD = NS + "KafkaRecord"

Lineage = Mapping[str, Mapping[str, Any]]  # node IRI -> eventPartition, eventOffset, triplesPartition, triplesOffset


def record_iri(topic: str, partition: int, offset: int) -> str:
    """The IRI naming one Kafka record."""
    return f"urn:provstream:kafka:{topic}:{partition}:{offset}"


def _position(row: Mapping[str, Any], kind: str) -> str:
    p, o = row.get(f"{kind}Partition"), row.get(f"{kind}Offset")
    return "-" if p is None or o is None else f"{p}:{o}"


def steps_of(trace: Trace) -> list[tuple[str, str]]:
    """(step name, node IRI) of the trace's steps in reading order (question first, conclusion last)."""
    q = trace.question
    out = [("question", q.iri)]
    if isinstance(trace, AgentTrace):
        out += [(a.step, a.iri) for a in trace.analyses]
        if trace.conclusion is not None:
            out.append(("conclusion", trace.conclusion.iri))
        return out
    for name, node in (("exploration", trace.exploration), ("focus", trace.focus), ("synthesis", trace.synthesis)):
        if node is not None:
            out.append((name, node.iri))
    return out


def lineage_text(trace: Trace, lineage: Lineage, *, events_topic: str, triples_topic: str) -> str:
    """A ``Lineage`` section: one line per step with its events and triples partition:offset."""
    lines = ["", f"Lineage  (events topic {events_topic} · triples topic {triples_topic}, partition:offset)"]
    for name, iri in steps_of(trace):
        row = lineage.get(iri, {})
        lines.append(f"  {name:<12} event {_position(row, 'event'):<10} triples {_position(row, 'triples')}")
    return "\n".join(lines) + "\n"


def lineage_json(trace: Trace, lineage: Lineage, *, events_topic: str, triples_topic: str) -> list[dict[str, Any]]:
    """One entry per step: ``step``, ``iri``, ``event`` and ``triples`` (``{topic, partition, offset}`` or None)."""
    def where(row: Mapping[str, Any], kind: str, topic: str) -> dict[str, Any] | None:
        p, o = row.get(f"{kind}Partition"), row.get(f"{kind}Offset")
        return None if p is None or o is None else {"topic": topic, "partition": p, "offset": o}

    return [{"step": name, "iri": iri, "event": where(lineage.get(iri, {}), "event", events_topic),
             "triples": where(lineage.get(iri, {}), "triples", triples_topic)} for name, iri in steps_of(trace)]


def lineage_triples(lineage: Lineage, *, events_topic: str, triples_topic: str) -> set[Triple]:
    """The PROV statements of the lineage (for the named graph :data:`LINEAGE_GRAPH`)."""
    out: set[Triple] = set()
    for iri, row in lineage.items():
        for kind, topic in (("event", events_topic), ("triples", triples_topic)):
            p, o = row.get(f"{kind}Partition"), row.get(f"{kind}Offset")
            if p is None or o is None:
                continue
            rec = Iri(record_iri(topic, int(p), int(o)))
            out |= {Triple(Iri(iri), Iri(v.PROV_WAS_DERIVED_FROM), rec),
                    Triple(rec, Iri(v.RDF_TYPE), Iri(v.PROV_ENTITY)), Triple(rec, Iri(v.RDF_TYPE), Iri(KAFKA_RECORD)),
                    Triple(rec, Iri(TOPIC), Literal(topic)),
                    Triple(rec, Iri(PARTITION), Literal(str(p), v.XSD_INTEGER)),
                    Triple(rec, Iri(OFFSET), Literal(str(o), v.XSD_INTEGER))}
    return out


def with_lineage(rendered: str, fmt: str, trace: Trace, lineage: Lineage, *, events_topic: str,
                 triples_topic: str) -> str:
    """``rendered`` (the trace as ``text`` or ``json``) with its lineage added: a section, or a ``lineage`` key."""
    import json

    topics = {"events_topic": events_topic, "triples_topic": triples_topic}
    if fmt == "json":
        data = json.loads(rendered)
        data["lineage"] = lineage_json(trace, lineage, **topics)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return rendered + lineage_text(trace, lineage, **topics)
