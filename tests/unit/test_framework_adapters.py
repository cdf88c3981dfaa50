"""The framework adapters without a stack: the SDK at the top level, never raising into the agent,
and the turn logic (thought-only steps, parallel calls as a DAG, errors concluded)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
from typing import Any

import pytest

from provstream.codec import records as wire
from provstream.connectors._recording import RunRecorder, json_arguments
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport, Value
from provstream.core import events as ev
from provstream.errors import EmitTimeout
from provstream.settings import Settings

SETTINGS = Settings()


class BrokenTransport(MemoryTransport):
    """Every step fails as if Kafka stayed unreachable."""

    def send(self, key: bytes, value: Value) -> None:
        raise EmitTimeout("buffer full")


class FlakyTransport(MemoryTransport):
    """The second step fails (Kafka briefly unreachable), the others go through."""

    def send(self, key: bytes, value: Value) -> None:
        self.calls = getattr(self, "calls", 0) + 1
        if self.calls == 2:
            raise EmitTimeout("buffer full")
        super().send(key, value)


def payloads(transport: MemoryTransport) -> list[Any]:
    return [wire.decode_event(value).payload for _, value in transport.sent]


def test_the_sdk_is_at_the_top_level_and_loaded_lazily() -> None:
    code = ("import sys, provstream; assert 'provstream.connectors.emitter' not in sys.modules; "
            "from provstream import Emitter, AgentSession, NullSession, Settings; "
            "import provstream.connectors.emitter as e; assert Emitter is e.Emitter and AgentSession is e.AgentSession")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_turns_make_thought_only_steps_a_dag_and_a_conclusion() -> None:
    transport = MemoryTransport()
    run = RunRecorder(Emitter(SETTINGS, transport=transport).agent("Q?"))
    run.model_turn(text="look", tool_calls=1)
    run.tool_step("Search", {"q": "a"}, "A")
    run.model_turn(text="both", tool_calls=2)
    run.tool_step("Search", {"q": "b"}, "B")
    run.tool_step("Search", {"q": "c"}, "C")
    run.model_turn(text="hmm", tool_calls=0)
    run.model_started()  # another model call: "hmm" was not the answer
    run.model_turn(text="Paris", tool_calls=0, reasoning="so")
    run.finish()
    assert run.finish() == ""  # once only
    steps = payloads(transport)[1:]
    assert [(s.iteration, s.thought, s.action, s.used) for s in steps[:-1]] == [
        (1, "look", "Search", ()), (2, "both", "Search", ()), (3, "both", "Search", (1,)),
        (4, "hmm", "", (2, 3)), (5, "so", "", ())]
    assert steps[-1] == ev.AgentConclusion("Paris", 5)


def test_an_error_is_the_conclusion_after_any_held_back_text() -> None:
    transport = MemoryTransport()
    run = RunRecorder(Emitter(SETTINGS, transport=transport).agent("Q?"))
    run.model_turn(text="thinking", tool_calls=0)
    run.finish(error=RuntimeError("boom"))
    assert payloads(transport)[1:] == [
        ev.AgentIteration(1, "thinking", "", "{}", ""), ev.AgentConclusion("Error: RuntimeError: boom", 1)]


def test_tool_inputs_become_json_objects() -> None:
    assert json_arguments('{"a": 1}') == {"a": 1}
    assert json_arguments("plain") == {"input": "plain"}
    assert json_arguments("[1, 2]") == {"input": [1, 2]}
    assert json_arguments({"when": object}) == {"when": str(object)}
    assert json_arguments(None) == {}


def test_the_langchain_handler_never_raises_into_the_agent(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    from provstream.connectors.langchain import ProvenanceCallbackHandler

    class Model(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Model:  # type: ignore[override]
            return self

    @tool
    def search(q: str) -> str:
        """Search."""
        return "found " + q

    model = Model(responses=[AIMessage("", tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "1"}]),
                             AIMessage("done")])
    flaky = FlakyTransport()
    handler = ProvenanceCallbackHandler(Emitter(SETTINGS, transport=flaky))
    with caplog.at_level(logging.DEBUG, logger="provstream.connectors.langchain"):
        out = create_agent(model, [search]).invoke({"messages": [("user", "Q?")]}, config={"callbacks": [handler]})
        assert out["messages"][-1].text == "done"
        model.i = 0
        out = create_agent(model, [search]).invoke({"messages": [("user", "Q?")]}, config={"callbacks": [handler]})
    assert out["messages"][-1].text == "done"
    assert handler.failures == 1  # the first run's step; its conclusion and the second run are recorded
    assert [type(p).__name__ for p in payloads(flaky)] == [
        "AgentQuestion", "AgentConclusion", "AgentQuestion", "AgentIteration", "AgentConclusion"]
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1

    broken = ProvenanceCallbackHandler(Emitter(SETTINGS, transport=BrokenTransport()))
    model.i = 0
    out = create_agent(model, [search]).invoke({"messages": [("user", "Q?")]}, config={"callbacks": [broken]})
    assert out["messages"][-1].text == "done" and broken.failures == 1  # no question: nothing more is tried


def test_the_agents_processor_never_raises_into_the_run(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("agents")
    from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_trace_processors
    from agents.models.interface import Model
    from agents.testing import assistant_message, function_call
    from agents.tracing import generation_span

    from provstream.connectors.openai_agents import ProvenanceProcessor

    class Scripted(Model):
        def __init__(self) -> None:
            self.turns = [[function_call("search", {"q": "x"}, call_id="1")], [assistant_message("done")]]

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            with generation_span(model="scripted") as span:
                span.span_data.input = [{"role": "user", "content": "Q?"}]
            return ModelResponse(output=self.turns.pop(0), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    @function_tool
    def search(q: str) -> str:
        """Search."""
        return "found " + q

    processor = ProvenanceProcessor(Emitter(SETTINGS, transport=BrokenTransport()))
    set_trace_processors([processor])
    try:
        with caplog.at_level(logging.DEBUG, logger="provstream.connectors.openai_agents"):
            result = asyncio.run(Runner.run(Agent(name="a", tools=[search], model=Scripted()), "Q?"))
    finally:
        set_trace_processors([])
    assert result.final_output == "done"
    assert processor.failures >= 3
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


def test_the_demo_goes_on_without_the_langchain_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from provstream.agent import demo_frameworks

    monkeypatch.setattr(demo_frameworks, "available", lambda: False)
    lines: list[str] = []
    transport = MemoryTransport()
    assert demo_frameworks.langchain_run(Emitter(SETTINGS, transport=transport), SETTINGS, lambda: None,
                                         lines.append) == []
    assert transport.sent == [] and lines[0].startswith("[langchain] skipped: pip install 'provstream[langchain]'")
