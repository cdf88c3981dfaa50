"""The fixed mapping between RDF predicates and the Neo4j model (docs/neo4j-model.md).

Shared by the write side (:mod:`.rows`) and the read side
(:mod:`.rebuild`); nothing here does I/O. Every label, relationship type
and property name that reaches Cypher comes from these tables, never from data.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final

from provstream.core import vocab as v

# Labels: the allow-listed rdf:type IRIs and their local names.
LABELS: Final = {t: v.local_name(t) for t in sorted(v.TYPES)}

# Literal predicates stored as one property each.
STRING_PROPS: Final = {
    v.TG_QUERY: "query", v.TG_THOUGHT: "thought", v.TG_ACTION: "action", v.TG_ARGUMENTS: "arguments",
    v.TG_OBSERVATION: "observation", v.TG_ANSWER: "answer", v.TG_CONTENT: "content",
    v.TG_REASONING: "reasoning", v.TG_CONVERSATION_ID: "conversationId", v.TG_AGENT_NAME: "agentName",
}
INTEGER_PROPS: Final = {v.TG_CHUNK_COUNT: "chunkCount", v.TG_EDGE_COUNT: "edgeCount"}
DATETIME_PROPS: Final = {v.PROV_STARTED_AT: "startedAtTime"}
# Repeated literal predicates stored as a list property.
LIST_PROPS: Final = {v.TG_SELECTED_CHUNK: "selectedChunk"}

# IRI objects: relationship types from the allow-list; anything else is a LINK.
REL_TYPES: Final = {
    v.PROV_WAS_DERIVED_FROM: "wasDerivedFrom",
    v.PROV_WAS_GENERATED_BY: "wasGeneratedBy",
    v.TG_SELECTED_EDGE: "selectedEdge",
}
LINK: Final = "LINK"

# Properties that are scope, status or bookkeeping, not triples.
SCOPE_PROPS: Final = ("graph", "user", "collection", "session", "mechanism")
EDGE_PROPS: Final = (
    "edgeSubject", "edgePredicate", "edgeObject", "edgeObjectKind", "edgeObjectDatatype", "edgeObjectLanguage",
)


# A short ``caption`` on every node, for Neo4j Browser (deploy/neo4j/browser/provstream.grass shows it).
CAPTION_PROP: Final = "caption"
CAPTION_WIDTH: Final = 36


def caption(labels: list[str], props: dict[str, object], iri: str) -> str:
    """The short text Neo4j Browser shows on a node: the question, ``i3 · search``, the answer, ...

    :param labels: the node's labels (``LABELS`` values).
    :param props: its properties as written (``query``, ``action``, ``answer``, ...).
    :param iri: its IRI (an iteration's ``i<n>`` is the last segment).
    :returns: at most :data:`CAPTION_WIDTH` characters on one line.

    Example: ``caption(["Analysis"], {"action": "Search"}, "urn:trustgraph:agent:s/i3")`` is ``"i3 · Search"``.
    """
    def text(name: str) -> str:
        value = props.get(name)
        return value if isinstance(value, str) else ""

    if "Question" in labels:
        out = text("query") or "question"
    elif "Analysis" in labels:
        out = f"{iri.rsplit('/', 1)[-1]} · {text('action') or 'think'}"
    elif "Conclusion" in labels:
        out = "answer: " + text("answer")
    elif "Exploration" in labels:
        count = props.get("chunkCount", props.get("edgeCount"))
        unit = "chunks" if "chunkCount" in props else "edges"
        out = "exploration" if count is None else f"exploration · {count} {unit}"
    elif "Focus" in labels:
        out = "focus"
    elif "Synthesis" in labels:
        out = "synthesis: " + text("content")
    elif text("edgePredicate"):
        out = "edge · " + v.local_name(text("edgePredicate"))
    else:
        out = v.local_name(iri)
    flat = " ".join(out.split())
    return flat if len(flat) <= CAPTION_WIDTH else flat[: CAPTION_WIDTH - 1] + "…"


_CANONICAL_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
_CANONICAL_INTEGER = re.compile(r"^-?(0|[1-9][0-9]*)$")
_INT64 = 2**63


def parse_datetime(lexical: str) -> datetime | None:
    """The UTC datetime of a canonical ``xsd:dateTime`` lexical form, else ``None``.

    Only the canonical form (``YYYY-MM-DDTHH:MM:SS.ffffffZ``) becomes a Neo4j
    ``DATETIME``: it is the form export writes back, so the round trip is exact.
    """
    if not _CANONICAL_DATETIME.match(lexical):
        return None
    try:
        return datetime.fromisoformat(lexical).astimezone(UTC)
    except ValueError:
        return None


def parse_integer(lexical: str) -> int | None:
    """The value of a canonical ``xsd:integer`` that fits a Neo4j INTEGER, else ``None``."""
    if not _CANONICAL_INTEGER.match(lexical):
        return None
    value = int(lexical)
    return value if -_INT64 <= value < _INT64 else None
