"""Search, DocRAG/GraphRAG answers and the calculator: pure and deterministic."""

from __future__ import annotations

import pytest

from provstream.agent import docrag, graphrag
from provstream.agent.calculator import calculate
from provstream.agent.corpus import Chunk, load_graph
from provstream.agent.search import SearchIndex, default_index
from provstream.agent.tools import CalculatorTool, SearchTool, call
from provstream.errors import ToolError


class Recorder:
    """Stands in for an emitter's DocRAG/GraphRAG session: keeps the calls in order."""

    uri = "urn:trustgraph:docrag:fake"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    def explore(self, *args: object) -> str:
        self.calls.append(("explore", args))
        return ""

    def focus(self, *args: object) -> str:
        self.calls.append(("focus", args))
        return ""

    def synthesize(self, *args: object) -> str:
        self.calls.append(("synthesize", args))
        return ""


def test_search_ranks_the_passage_that_answers_first() -> None:
    hits = default_index().search("Who was Milhouse named after?")
    assert [h.chunk.id for h in hits[:2]] == ["milhouse#2", "milhouse#1"]
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:], strict=False))
    assert default_index().search("What is the capital of France?") == []


def test_search_is_deterministic_and_ties_break_by_corpus_order() -> None:
    chunks = [Chunk("a#1", "A", "apple pie"), Chunk("b#1", "B", "apple pie"), Chunk("c#1", "C", "pear")]
    index = SearchIndex.build(chunks)
    assert [h.chunk.id for h in index.search("apple")] == ["a#1", "b#1"]
    assert index.search("apple") == SearchIndex.build(chunks).search("apple")


def test_docrag_selects_chunks_and_answers_with_cited_sentences() -> None:
    result = docrag.answer(default_index(), "Who was Milhouse named after?")
    assert result.candidates >= 2 and result.selected[0] == "milhouse#2"
    assert result.content.splitlines()[0] == (
        "[milhouse#2] Milhouse was named after U.S. president Richard Nixon, whose middle name was Milhous.")
    nothing = docrag.answer(default_index(), "What is the capital of France?")
    assert (nothing.candidates, nothing.selected, nothing.content) == (0, (), docrag.NOTHING)


def test_run_docrag_records_exploration_then_synthesis() -> None:
    rec = Recorder()
    question = "Which magazine was started first, Arthur's Magazine or First for Women?"
    result = docrag.run_docrag(rec, default_index(), question)
    assert [c[0] for c in rec.calls] == ["explore", "synthesize"]
    assert rec.calls[0][1] == (result.candidates, list(result.selected))
    assert rec.calls[1][1] == (result.content,)
    assert "arthurs-magazine#1" in result.selected


def test_graphrag_explores_focuses_with_reasoning_and_follows_one_hop() -> None:
    kg = load_graph()
    rec = Recorder()
    result = graphrag.run_graphrag(rec, kg, "Which county was the album Guitars for Wounded Warriors recorded in?")
    assert [c[0] for c in rec.calls] == ["explore", "focus", "synthesize"]
    assert rec.calls[0][1] == (len(result.explored),)
    edges = rec.calls[1][1][0]
    assert isinstance(edges, list)
    assert ("http://example.org/kg/New_Paltz", "http://example.org/kg/locatedIn",
            "http://example.org/kg/Ulster_County") == edges[-1][:3]
    assert all(e[3] for e in edges), "every focused edge has its reasoning"
    assert "New Paltz is located in Ulster County." in result.content
    empty = graphrag.answer(kg, "What is the capital of France?")
    assert (empty.explored, empty.focused, empty.content) == ((), (), graphrag.NOTHING)


def test_graphrag_answers_every_bundled_example() -> None:
    kg = load_graph()
    for question in kg.examples:
        result = graphrag.answer(kg, question)
        assert result.focused and result.content != graphrag.NOTHING, question
    assert "Richard Nixon" in graphrag.answer(kg, "Who was Milhouse named after?").content


@pytest.mark.parametrize(("expression", "value"), [
    ("17 * 23", "391"), ("2^10", "1024"), ("(1 + 2) / 4", "0.75"), ("7 // 2", "3"), ("-3 ** 2", "-9"),
    ("10 % 4", "2"), ("1.5 * 2", "3"), ("1/3", "0.333333333333"),
])
def test_calculator_evaluates_arithmetic(expression: str, value: str) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(("expression", "why"), [
    ("1/0", "division by zero"), ("__import__('os').system('true')", "only numbers"), ("a + 1", "only numbers"),
    ("2 ** 100000", "exponent"), ("9 ** 9 ** 9", "exponent"), ("10.0 ** 400", "too large|finite"),
    ("(-8) ** 0.5", "not a real number"), ("1 +", "not an arithmetic expression"), ("", "empty"),
    ("True + 1", "only numbers"), ("1" * 300, "longer than"),
])
def test_calculator_refuses_with_a_reason(expression: str, why: str) -> None:
    with pytest.raises(ToolError, match=why):
        calculate(expression)


def test_tools_take_their_argument_by_name_or_alone_and_unknown_tools_fail() -> None:
    rec = Recorder()
    tools = {"search": SearchTool(default_index(), lambda q: rec), "calculator": CalculatorTool()}
    assert call(tools, "calculator", {"expression": "6*7"}).observation == "42"
    assert call(tools, "Calculator", {"input": "6*7"}).observation == "42"
    found = call(tools, "search", {"query": "Milhouse named after"})
    assert found.subtrace is rec and found.observation.startswith("[milhouse#2]")
    with pytest.raises(ToolError, match="no such tool"):
        call(tools, "browser", {"url": "x"})
    with pytest.raises(ToolError, match="non-empty text argument 'query'"):
        call(tools, "search", {})
