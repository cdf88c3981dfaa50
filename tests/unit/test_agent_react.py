"""The ReAct reply parser, the prompt, and the heuristic planner's decisions."""

from __future__ import annotations

import pytest

from provstream.agent.planner import LABEL, NOT_FOUND, HeuristicPlanner, arithmetic
from provstream.agent.react import Act, Finish, Turn, parse_reply, scratchpad, system_prompt
from provstream.agent.search import default_index
from provstream.errors import ReplyFormatError

ARGS = {"search": "query", "calculator": "expression"}


@pytest.mark.parametrize(("reply", "expected"), [
    ('Thought: look it up\nAction: search\nAction Input: {"query": "Milhouse"}',
     Act("look it up", "search", {"query": "Milhouse"})),
    ("Thought: multiply\nAction: calculator\nAction Input: 17 * 23",
     Act("multiply", "calculator", {"expression": "17 * 23"})),
    ('I will search.\nAction: `search`\nAction Input: ```json\n{"query": "a b"}\n```',
     Act("I will search.", "search", {"query": "a b"})),
    ('Action: lookup\nAction Input: "x"', Act("", "lookup", {"input": "x"})),
    ("Thought: I know it.\nFinal Answer: Richard Nixon", Finish("I know it.", "Richard Nixon")),
    ("Final Answer: two\nlines", Finish("", "two\nlines")),
    ("thought: lower case\nfinal answer: ok", Finish("lower case", "ok")),
])
def test_parse_reply(reply: str, expected: object) -> None:
    assert parse_reply(reply, ARGS) == expected


def test_text_after_an_invented_observation_is_ignored() -> None:
    reply = 'Thought: t\nAction: search\nAction Input: {"query": "q"}\nObservation: made up\nFinal Answer: no'
    assert parse_reply(reply, ARGS) == Act("t", "search", {"query": "q"})


def test_a_final_answer_before_an_action_wins_and_stops_there() -> None:
    assert parse_reply("Final Answer: 42\nAction: search", ARGS) == Finish("", "42")


@pytest.mark.parametrize("reply", ["", "I am not sure.", "Thought: hmm\nAction:\nAction Input: x"])
def test_malformed_replies_are_refused_with_an_excerpt(reply: str) -> None:
    with pytest.raises(ReplyFormatError, match="no 'Action:' or 'Final Answer:'"):
        parse_reply(reply, ARGS)


def test_prompt_lists_tools_and_scratchpad_replays_history() -> None:
    prompt = system_prompt([("search", "query", "searches."), ("calculator", "expression", "adds.")])
    assert "- search: searches. Input: {\"query\": ...}" in prompt and "[search, calculator]" in prompt
    pad = scratchpad("Q?", [Turn(Act("t", "search", {"query": "x"}), "obs")])
    assert pad == 'Question: Q?\nThought: t\nAction: search\nAction Input: {"query": "x"}\nObservation: obs'


def test_arithmetic_questions_only_when_the_whole_question_is_a_sum() -> None:
    assert arithmetic("What is 17 * 23?") == "17 * 23"
    assert arithmetic("calculate (2+3)^2") == "(2+3)^2"
    assert arithmetic("1,000 + 1") == "1000 + 1"
    for text in ("Who coached the Pacers in 1997-98?", "What is 42?", "What is the capital of France?"):
        assert arithmetic(text) is None, text


def test_heuristic_planner_searches_then_answers_extractively() -> None:
    planner = HeuristicPlanner(default_index())
    question = "Who was Milhouse named after?"
    first = planner.decide(question, [])
    assert first == Act(first.thought, "search", {"query": question})
    assert first.thought.startswith(LABEL)
    observation = "[milhouse#2] Milhouse was named after U.S. president Richard Nixon, whose middle name was Milhous."
    final = planner.decide(question, [Turn(first, observation)])
    assert isinstance(final, Finish) and final.thought.startswith(LABEL)
    assert final.answer == observation.split("] ", 1)[1]


def test_heuristic_planner_says_when_it_found_nothing_or_too_little() -> None:
    planner = HeuristicPlanner(default_index())
    act = Act("", "search", {"query": "q"})
    none = planner.decide("What is the capital of France?", [Turn(act, "No passage matches.")])
    weak = planner.decide("Who is the president of France?",
                          [Turn(act, "[milhouse#2] Milhouse was named after U.S. president Richard Nixon.")])
    for final in (none, weak):
        assert isinstance(final, Finish) and final.answer == NOT_FOUND and final.thought.startswith(LABEL)
    assert "covers only" in weak.thought


def test_heuristic_planner_uses_the_calculator_for_sums() -> None:
    planner = HeuristicPlanner(default_index())
    first = planner.decide("What is 6 * 7?", [])
    assert isinstance(first, Act) and (first.action, first.arguments) == ("calculator", {"expression": "6 * 7"})
    assert planner.decide("What is 6 * 7?", [Turn(first, "42")]) == Finish(f"{LABEL} The calculator gives 42.", "42")
