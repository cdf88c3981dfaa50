"""Build the bundled corpus from the ReAct trajectories (run once; output committed).

    python -m provstream.agent.build_corpus [--data provstream/data] [--out provstream/agent/data]

1. Every Search/Lookup observation that returned article text is a paragraph
   of the article last searched (``Could not find``/``No more results`` are
   skipped). Encoding damage in the source (UTF-8 read as Latin-1) is repaired,
   citation marks like ``[3]`` and the ``(Result 1 / 5)`` prefix removed.
2. Paragraphs are cut into chunks of at most :data:`SENTENCES_PER_CHUNK`
   sentences, numbered per article: ``<title-slug>#<n>``.
3. The HotpotQA dev questions the corpus can answer are chosen by retrieval:
   the gold answer must appear, as whole words, in the extractive answer (best
   sentences of the top hits) and not in the question itself; ranked by top
   score, ties by file order; yes/no questions are left out. (The corpus is
   tiny and HotpotQA is not about it, so some matches are lucky ones.) Written to ``docrag_questions.jsonl``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from provstream.agent.corpus import CORPUS_FILE, QUESTIONS_FILE, Chunk, DemoQuestion
from provstream.agent.search import SearchIndex
from provstream.agent.text import fold_accents, slug, split_sentences
from provstream.data import DATA_DIR

SENTENCES_PER_CHUNK = 2
QUESTIONS = 10
_REPO = Path(__file__).resolve().parents[2]
_MOJIBAKE = re.compile(r"\u00e2[\u0080-\u00bf]{2}")
_STRAY_C1 = re.compile(r"-?[\u0080-\u009f]{2}")
_CITATION = re.compile(r"\[\d+\]")
_RESULT_PREFIX = re.compile(r"^\(Result \d+ / \d+\)\s*")
_NOT_TEXT = ("Could not find", "No more results")


def repair(text: str) -> str:
    """Undo UTF-8-read-as-Latin-1 damage and drop citation marks."""
    text = _MOJIBAKE.sub(lambda m: m.group().encode("latin-1").decode("utf-8", "replace"), text)
    text = _STRAY_C1.sub("\u2013", text)
    text = _CITATION.sub("", text)
    return re.sub(r"\s+", " ", text).strip()


def paragraphs(trajectories: Iterable[dict[str, Any]]) -> Iterator[tuple[str, str]]:
    """(article title, paragraph) for every observation that is article text."""
    for trajectory in trajectories:
        title = ""
        for step in trajectory["steps"]:
            action, observation = step.get("action", ""), step.get("observation", "")
            if action not in ("Search", "Lookup") or observation.startswith(_NOT_TEXT):
                continue
            if action == "Search":
                title = step["arguments"]["input"]
            if title:
                yield title, repair(_RESULT_PREFIX.sub("", observation))


def chunk_articles(pairs: Iterable[tuple[str, str]]) -> list[Chunk]:
    """Cut each article's paragraphs into numbered chunks (duplicates dropped)."""
    seen: set[str] = set()
    counts: dict[str, int] = {}
    chunks: list[Chunk] = []
    for title, paragraph in pairs:
        if paragraph in seen:
            continue
        seen.add(paragraph)
        sentences = split_sentences(paragraph)
        for start in range(0, len(sentences), SENTENCES_PER_CHUNK):
            n = counts[title] = counts.get(title, 0) + 1
            text = " ".join(sentences[start:start + SENTENCES_PER_CHUNK])
            chunks.append(Chunk(f"{slug(title)}#{n}", title, text, wikipedia_url(title)))
    return chunks


def wikipedia_url(title: str) -> str:
    return "https://en.wikipedia.org/wiki/" + quote(title.replace(" ", "_"), safe="(),'")


def _contains(text: str, phrase: str) -> bool:
    """Whole-word, case-sensitive, accent-insensitive containment."""
    pattern = r"(?<!\w)" + re.escape(fold_accents(phrase)) + r"(?!\w)"
    return re.search(pattern, fold_accents(text)) is not None


def answerable(index: SearchIndex, question: str, answer: str) -> float | None:
    """The top retrieval score if the extractive answer contains the gold answer, else ``None``.

    Yes/no answers and answers already written in the question are left out.
    """
    if answer.lower() in ("yes", "no") or len(answer) < 3 or fold_accents(answer).lower() in fold_accents(
            question).lower():
        return None
    hits = index.search(question, 3)
    sentences = index.best_sentences(question, [h.chunk for h in hits], limit=2)
    if hits and _contains(" ".join(s.text for s in sentences), answer):
        return hits[0].score
    return None


def select_questions(index: SearchIndex, rows: Iterable[dict[str, Any]], n: int = QUESTIONS) -> list[DemoQuestion]:
    scored = []
    for line, row in enumerate(rows):
        question = " ".join(row["question"].split())
        score = answerable(index, question, row["answer"])
        if score is not None:
            scored.append((-score, line, DemoQuestion(question, row["answer"], row.get("type", ""))))
    return [q for _, _, q in sorted(scored, key=lambda s: (s[0], s[1]))[:n]]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    lines = [json.dumps(dataclasses.asdict(row), ensure_ascii=False) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "data")
    args = parser.parse_args(argv)
    chunks = chunk_articles(paragraphs(_read_jsonl(args.data / "react" / "hotpot_fever.jsonl")))
    _write_jsonl(args.out / CORPUS_FILE, chunks)
    index = SearchIndex.build(chunks)
    questions = select_questions(index, _read_jsonl(args.data / "hotpotqa_dev_questions.jsonl"))
    _write_jsonl(args.out / QUESTIONS_FILE, questions)
    print(f"{len(chunks)} chunks, {len(questions)} answerable questions -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
