"""The ReAct loop end to end on the emitter (MemoryTransport): the heuristic
planner, and the LLM path against a scripted local chat endpoint. The events
are decoded from the bytes the emitter produced."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from fake_llm import FakeLlm

from provstream.agent.run import invoke
from provstream.cli import agent as cli
from provstream.codec.records import decode_event
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.core import events as ev
from provstream.core.request import AgentRequest
from provstream.core.vocab import Mechanism
from provstream.settings import Settings

SEARCH = 'Thought: I should look up Milhouse.\nAction: search\nAction Input: {"query": "Milhouse named after"}'
CALC = "Thought: Nixon was the 37th president; 37 * 2 is easy.\nAction: calculator\nAction Input: 37 * 2"
FINAL = "Thought: I have both facts.\nFinal Answer: Richard Nixon (and 74)"


def run(settings: Settings, question: str, **kw: object) -> tuple[object, list[ev.Event]]:
    transport = MemoryTransport()
    request = AgentRequest(question, session_id=str(kw.pop("session_id", "s-1")), **kw)  # type: ignore[arg-type]
    with Emitter(settings, transport=transport) as emitter:
        result = invoke(emitter, settings, request)
    return result, [decode_event(value) for _, value in transport.sent]


def steps(events: list[ev.Event], session: str) -> list[ev.Payload]:
    return [e.payload for e in events if e.session_id == session]


@pytest.fixture
def settings() -> Settings:
    return Settings(user="alice", collection="papers")


def test_llm_path_search_calculator_answer(settings: Settings) -> None:
    with FakeLlm([SEARCH, CALC, FINAL]) as llm:
        result, events = run(replace(settings, llm_url=llm.url, llm_model="m1", llm_api_key="k3y"),
                             "Who was Milhouse named after, and what is 37 * 2?", user="alice", collection="papers")
    assert result.outcome.answered and result.outcome.answer == "Richard Nixon (and 74)"
    assert result.uri == "urn:trustgraph:agent:s-1" and result.planner == "LLM"
    kinds = [(e.mechanism, type(e.payload).__name__) for e in events]
    assert kinds == [
        (Mechanism.AGENT, "AgentQuestion"),
        (Mechanism.DOCRAG, "DocRagQuestion"), (Mechanism.DOCRAG, "DocRagExploration"),
        (Mechanism.DOCRAG, "DocRagSynthesis"),
        (Mechanism.AGENT, "AgentIteration"), (Mechanism.AGENT, "AgentIteration"),
        (Mechanism.AGENT, "AgentIteration"), (Mechanism.AGENT, "AgentConclusion"),
    ]
    assert {(e.user, e.collection) for e in events} == {("alice", "papers")}
    docrag = events[1].session_id
    i1, i2, i3, final = steps(events, "s-1")[1:]
    assert isinstance(i1, ev.AgentIteration) and i1.action == "search"
    assert i1.subtrace == ev.SubTrace(Mechanism.DOCRAG, docrag)
    assert json.loads(i1.arguments) == {"query": "Milhouse named after"}
    assert i1.observation.startswith("[milhouse#2] Milhouse was named after")
    assert i1.observation == steps(events, docrag)[2].content  # type: ignore[union-attr]
    assert steps(events, docrag)[1].chunks[0] == "milhouse#2"  # type: ignore[union-attr]
    assert isinstance(i2, ev.AgentIteration) and (i2.action, i2.observation, i2.subtrace) == ("calculator", "74", None)
    assert isinstance(i3, ev.AgentIteration) and (i3.thought, i3.action) == ("I have both facts.", "")
    assert final == ev.AgentConclusion("Richard Nixon (and 74)", 3)
    assert result.subtraces == (f"urn:trustgraph:docrag:{docrag}",)
    request = llm.requests[1]
    assert request["model"] == "m1" and request["temperature"] == 0 and request["stop"] == ["\nObservation:"]
    assert "Observation: [milhouse#2]" in request["messages"][1]["content"]
    assert llm.headers[0]["Authorization"] == "Bearer k3y"


def test_malformed_reply_ends_with_a_recorded_conclusion(settings: Settings) -> None:
    with FakeLlm([SEARCH, "I'd rather chat about the weather."]) as llm:
        result, events = run(replace(settings, llm_url=llm.url), "Who was Milhouse named after?")
    last = events[-1].payload
    assert isinstance(last, ev.AgentConclusion) and last.iterations == 1
    assert last.answer.startswith("Stopped: the model reply has no 'Action:' or 'Final Answer:' line")
    assert not result.outcome.answered and result.outcome.answer == last.answer


def test_http_error_ends_with_a_recorded_conclusion(settings: Settings) -> None:
    with FakeLlm([500]) as llm:
        result, events = run(replace(settings, llm_url=llm.url), "Who was Milhouse named after?")
    assert [type(e.payload).__name__ for e in events] == ["AgentQuestion", "AgentConclusion"]
    answer = events[-1].payload.answer  # type: ignore[union-attr]
    assert answer.startswith("Stopped: HTTP 500 from http://127.0.0.1:") and "scripted failure 500" in answer
    assert not result.outcome.answered
    assert "model" not in llm.requests[0], "no model configured: the server's default"


def test_unreachable_endpoint_ends_with_a_recorded_conclusion(settings: Settings) -> None:
    with FakeLlm([]) as llm:
        url = llm.url
    _, events = run(replace(settings, llm_url=url), "Q?")
    assert events[-1].payload.answer.startswith(f"Stopped: cannot reach {url}/chat/completions")  # type: ignore[union-attr]


def test_tool_error_is_recorded_as_observation_then_conclusion(settings: Settings) -> None:
    with FakeLlm(["Thought: divide\nAction: calculator\nAction Input: 1/0"]) as llm:
        _, events = run(replace(settings, llm_url=llm.url), "What is 1/0?")
    iteration, conclusion = events[-2].payload, events[-1].payload
    assert isinstance(iteration, ev.AgentIteration) and iteration.observation == "Error: division by zero"
    assert conclusion == ev.AgentConclusion("Stopped: tool 'calculator' failed: division by zero", 1)


def test_step_limit_ends_with_a_recorded_conclusion(settings: Settings) -> None:
    with FakeLlm([SEARCH, SEARCH, SEARCH]) as llm:
        result, events = run(replace(settings, llm_url=llm.url), "Q?", max_steps=2)
    assert events[-1].payload == ev.AgentConclusion(
        "Stopped: reached the step limit (2) without a final answer.", 2)
    assert len(llm.requests) == 2 and len(result.subtraces) == 2


def test_heuristic_planner_run_is_labelled_and_links_its_search(settings: Settings) -> None:
    result, events = run(settings, "Who was Milhouse named after?", session_id="h-1")
    agent = steps(events, "h-1")
    assert [type(p).__name__ for p in agent] == ["AgentQuestion", "AgentIteration", "AgentIteration", "AgentConclusion"]
    first = agent[1]
    assert isinstance(first, ev.AgentIteration) and first.thought.startswith("[heuristic planner]")
    assert first.subtrace is not None and first.subtrace.mechanism is Mechanism.DOCRAG
    assert result.planner == "heuristic planner"
    assert agent[3] == ev.AgentConclusion(
        "Milhouse was named after U.S. president Richard Nixon, whose middle name was Milhous.", 2)


def test_empty_session_id_records_nothing(settings: Settings) -> None:
    result, events = run(settings, "Who was Milhouse named after?", session_id="")
    assert events == [] and result.uri == "" and result.subtraces == () and result.outcome.answered


def test_cli_without_recording_prints_steps_and_says_so(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROVSTREAM_LLM_URL", raising=False)
    assert cli.main(["-q", "What is 6 * 7?", "--session-id", ""]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("[heuristic planner] no LLM endpoint configured")
    assert "Action: calculator {\"expression\": \"6 * 7\"}" in out and "Answer: 42" in out
    assert out[-1] == "session: (not recorded: empty --session-id)"


def test_cli_kafka_unreachable_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVSTREAM_KAFKA_BOOTSTRAP", "127.0.0.1:1")
    monkeypatch.setenv("PROVSTREAM_EMIT_BLOCK_MS", "1000")
    assert cli.main(["-q", "Who was Milhouse named after?"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tg-invoke-agent: cannot reach Kafka at 127.0.0.1:1")


def test_cli_rejects_a_bad_session_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["-q", "Q?", "--session-id", "bad id!"]) == 1
    assert "invalid session id" in capsys.readouterr().err
