"""Document RAG over the bundled corpus: search -> Exploration -> extractive Synthesis.

:func:`answer` is pure; :func:`run_docrag` records it step by step through an
emitter session (``explore`` as soon as retrieval is done, then ``synthesize``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from provstream.agent.search import SearchIndex, Sentence

SELECTED = 3
SENTENCES = 2
NOTHING = "No passage of the bundled corpus matches the question."


class DocRagRecorder(Protocol):
    """What :func:`run_docrag` needs from an emitter's DocRAG session."""

    def explore(self, chunk_count: int, chunks: list[str]) -> str: ...

    def synthesize(self, content: str) -> str: ...


@dataclass(frozen=True, slots=True)
class DocRagAnswer:
    """``candidates``: chunks that matched at all; ``selected``: the ids kept; ``content``: the answer text."""

    candidates: int
    selected: tuple[str, ...]
    sentences: tuple[Sentence, ...]

    @property
    def content(self) -> str:
        """One line per sentence, each citing its chunk: ``[milhouse#2] Milhouse was ...``."""
        if not self.sentences:
            return NOTHING
        return "\n".join(f"[{s.chunk_id}] {s.text}" for s in self.sentences)

    @property
    def best(self) -> Sentence | None:
        return self.sentences[0] if self.sentences else None


def answer(index: SearchIndex, question: str, selected: int = SELECTED, sentences: int = SENTENCES) -> DocRagAnswer:
    hits = index.search(question)
    top = [h.chunk for h in hits[:selected]]
    best = index.best_sentences(question, top, limit=sentences)
    return DocRagAnswer(len(hits), tuple(c.id for c in top), tuple(best))


def run_docrag(session: DocRagRecorder, index: SearchIndex, question: str) -> DocRagAnswer:
    """Answer ``question`` and record Exploration then Synthesis on ``session``."""
    result = answer(index, question)
    session.explore(result.candidates, list(result.selected))
    session.synthesize(result.content)
    return result
