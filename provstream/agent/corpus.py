"""The bundled corpus and knowledge graph (``provstream/agent/data``), as values.

``corpus.jsonl`` holds the Wikipedia paragraphs quoted in the ReAct
trajectories, chunked, one chunk per line; ``kg.json`` a tiny knowledge graph
derived from the same text; ``docrag_questions.jsonl`` the HotpotQA questions
the corpus can answer (chosen by ``build_corpus``). See ``data/README.md``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

CORPUS_FILE = "corpus.jsonl"
GRAPH_FILE = "kg.json"
QUESTIONS_FILE = "docrag_questions.jsonl"


@dataclass(frozen=True, slots=True)
class Chunk:
    """A few consecutive sentences of one article; ``id`` is ``<title-slug>#<n>``."""

    id: str
    title: str
    text: str
    source: str = ""


@dataclass(frozen=True, slots=True)
class Edge:
    """One knowledge-graph statement; ``object`` is an IRI or a plain literal."""

    subject: str
    predicate: str
    object: str
    source: str = ""


@dataclass(frozen=True, slots=True)
class KnowledgeGraph:
    edges: tuple[Edge, ...]
    labels: tuple[tuple[str, str], ...] = ()
    examples: tuple[str, ...] = ()

    def label(self, iri: str) -> str:
        """Human label of an IRI (or the literal itself)."""
        found = dict(self.labels).get(iri)
        if found is not None:
            return found
        return iri.rsplit("/", 1)[-1].replace("_", " ") if iri.startswith("http") else iri


@dataclass(frozen=True, slots=True)
class DemoQuestion:
    question: str
    answer: str
    type: str = ""


def _read(name: str) -> str:
    return resources.files("provstream.agent").joinpath("data", name).read_text(encoding="utf-8")


def _jsonl(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _read(name).splitlines() if line.strip()]


@cache
def load_chunks() -> tuple[Chunk, ...]:
    return tuple(Chunk(**row) for row in _jsonl(CORPUS_FILE))


@cache
def load_graph() -> KnowledgeGraph:
    data = json.loads(_read(GRAPH_FILE))
    return KnowledgeGraph(
        edges=tuple(Edge(**e) for e in data["edges"]),
        labels=tuple(sorted(data.get("labels", {}).items())),
        examples=tuple(data.get("examples", ())),
    )


@cache
def load_demo_questions() -> tuple[DemoQuestion, ...]:
    return tuple(DemoQuestion(**row) for row in _jsonl(QUESTIONS_FILE))
