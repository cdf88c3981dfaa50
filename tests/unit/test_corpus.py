"""The bundled corpus, knowledge graph and demo questions: well-formed and reproducible."""

from __future__ import annotations

import re
from pathlib import Path

from provstream.agent import build_corpus as bc
from provstream.agent.corpus import load_chunks, load_demo_questions, load_graph
from provstream.agent.search import SearchIndex, default_index
from provstream.agent.text import slug, split_sentences, tokenize
from provstream.data import REACT_TRAJECTORIES

IRI = re.compile(r"^https?://\S+$")


def test_chunk_ids_are_unique_slugs_numbered_per_article() -> None:
    chunks = load_chunks()
    assert len(chunks) >= 25
    ids = [c.id for c in chunks]
    assert len(set(ids)) == len(ids)
    for c in chunks:
        assert re.fullmatch(r"[a-z0-9-]+#[1-9][0-9]*", c.id), c.id
        assert c.id.split("#")[0] == slug(c.title)
        assert c.text and c.source.startswith("https://en.wikipedia.org/wiki/")
        assert not re.search(r"[\u0080-\u009f]|\u00e2\u0080|\[\d+\]", c.text), c.text


def test_repair_undoes_latin1_damage_and_citations() -> None:
    assert bc.repair("February 3, 1898 \u00e2\u0080\u0093 August 17, 1924") == "February 3, 1898 \u2013 August 17, 1924"
    assert bc.repair("(1844-\u0080\u00931846)") == "(1844\u20131846)"
    assert bc.repair("2,130 m).[3] Next") == "2,130 m). Next"


def test_paragraphs_belong_to_the_last_searched_article_and_skip_misses() -> None:
    trajectory = {"steps": [
        {"action": "Search", "arguments": {"input": "Foo"}, "observation": "Could not find [Foo]. Similar: []"},
        {"action": "Search", "arguments": {"input": "Foo (band)"}, "observation": "Foo is a band. It plays."},
        {"action": "Lookup", "arguments": {"input": "x"}, "observation": "(Result 1 / 2) Foo split in 1999."},
        {"action": "Lookup", "arguments": {"input": "y"}, "observation": "No more results."},
        {"action": "", "arguments": {}, "observation": ""},
    ]}
    pairs = list(bc.paragraphs([trajectory]))
    assert pairs == [("Foo (band)", "Foo is a band. It plays."), ("Foo (band)", "Foo split in 1999.")]
    chunks = bc.chunk_articles(pairs + pairs)
    assert [c.id for c in chunks] == ["foo-band#1", "foo-band#2"]
    assert chunks[0].text == "Foo is a band. It plays."


def test_sentences_keep_abbreviations() -> None:
    assert split_sentences("Milhouse was named after U.S. president Richard Nixon. He was 1. Then") == [
        "Milhouse was named after U.S. president Richard Nixon.", "He was 1.", "Then"]
    assert tokenize("The Simpsons' creators, Jalapeño") == ["simpson", "creator", "jalapeno"]


def test_committed_corpus_is_what_the_build_script_produces(tmp_path: Path) -> None:
    chunks = bc.chunk_articles(bc.paragraphs(bc._read_jsonl(REACT_TRAJECTORIES)))
    assert tuple(chunks) == load_chunks()


def test_knowledge_graph_edges_are_iris_from_known_chunks() -> None:
    kg = load_graph()
    ids = {c.id for c in load_chunks()}
    assert len(kg.edges) >= 20 and kg.examples
    for e in kg.edges:
        assert IRI.match(e.subject) and IRI.match(e.predicate), e
        assert e.source in ids, e.source
    assert kg.label("http://example.org/kg/Richard_Nixon") == "Richard Nixon"
    assert kg.label("http://example.org/kg/namedAfter") == "was named after"


def test_demo_questions_are_answered_extractively_by_the_corpus() -> None:
    questions = load_demo_questions()
    assert 8 <= len(questions) <= 12
    index = default_index()
    for q in questions:
        assert bc.answerable(index, q.question, q.answer) is not None, q
    top = [index.search(q.question, 1)[0].score for q in questions]
    assert top == sorted(top, reverse=True)


def test_question_selection_is_deterministic_and_skips_yes_no() -> None:
    index = SearchIndex.build(load_chunks())
    rows = [
        {"question": "Who was Milhouse named after?", "answer": "yes"},
        {"question": "Which film did Seth Rogen and Evan Goldberg direct in 2014?", "answer": "The Interview"},
        {"question": "Which president was Milhouse named after?", "answer": "Richard Nixon"},
        {"question": "What is the capital of France?", "answer": "Paris"},
    ]
    first = bc.select_questions(index, rows, 5)
    assert first == bc.select_questions(index, rows, 5)
    assert {q.answer for q in first} == {"The Interview", "Richard Nixon"}
    scores = [index.search(q.question, 1)[0].score for q in first]
    assert scores == sorted(scores, reverse=True)
    assert bc.select_questions(index, rows, 1) == first[:1]
