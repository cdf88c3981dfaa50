"""Deterministic BM25 document search over the bundled corpus, in pure Python.

:meth:`SearchIndex.search` ranks chunks; :meth:`SearchIndex.best_sentences`
picks the sentences of given chunks that say most about a query (the
extractive answer). Ties always break by corpus order, so the same query gives
the same result on every machine.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from provstream.agent.corpus import Chunk, load_chunks
from provstream.agent.text import split_sentences, tokenize

K1 = 1.5
B = 0.75


@dataclass(frozen=True, slots=True)
class Hit:
    chunk: Chunk
    score: float


@dataclass(frozen=True, slots=True)
class Sentence:
    """A sentence of a chunk and how much of the query it covers (0..1, IDF-weighted)."""

    chunk_id: str
    text: str
    score: float
    coverage: float


@dataclass(frozen=True)
class SearchIndex:
    chunks: tuple[Chunk, ...]
    terms: tuple[Counter[str], ...]
    df: Counter[str]
    avg_len: float

    @classmethod
    def build(cls, chunks: Sequence[Chunk]) -> SearchIndex:
        terms = tuple(Counter(tokenize(f"{c.title} {c.text}")) for c in chunks)
        df: Counter[str] = Counter()
        for t in terms:
            df.update(t.keys())
        avg = sum(sum(t.values()) for t in terms) / max(len(terms), 1)
        return cls(tuple(chunks), terms, df, avg or 1.0)

    def idf(self, term: str) -> float:
        n, df = len(self.chunks), self.df.get(term, 0)
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def _bm25(self, query: Sequence[str], doc: Counter[str]) -> float:
        length = sum(doc.values())
        score = 0.0
        for term in query:
            tf = doc.get(term, 0)
            if tf:
                norm = tf + K1 * (1 - B + B * length / self.avg_len)
                score += self.idf(term) * tf * (K1 + 1) / norm
        return score

    def search(self, query: str, limit: int | None = None) -> list[Hit]:
        """Chunks that share at least one term with the query, best first."""
        terms = list(dict.fromkeys(tokenize(query)))
        scored = [(self._bm25(terms, doc), i) for i, doc in enumerate(self.terms)]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        return [Hit(self.chunks[i], round(score, 6)) for score, i in ranked[:limit]]

    def weight(self, query: str, text: str) -> tuple[float, float]:
        """(IDF weight of the query terms ``text`` contains, that weight's share of the query's total)."""
        terms = set(tokenize(query))
        total = sum(self.idf(t) for t in terms)
        weight = sum(self.idf(t) for t in terms & set(tokenize(text)))
        return round(weight, 6), round(weight / total, 6) if total else 0.0

    def best_sentences(self, query: str, chunks: Sequence[Chunk], limit: int = 2) -> list[Sentence]:
        """The sentences of ``chunks`` with the most query weight, best first (only those that match)."""
        found: list[tuple[float, int, Sentence]] = []
        for chunk in chunks:
            for text in split_sentences(chunk.text):
                weight, coverage = self.weight(query, text)
                if weight > 0:
                    found.append((-weight, len(found), Sentence(chunk.id, text, weight, coverage)))
        return [s for _, _, s in sorted(found, key=lambda f: (f[0], f[1]))[:limit]]


@cache
def default_index() -> SearchIndex:
    """The index over the bundled corpus, built once per process."""
    return SearchIndex.build(load_chunks())
