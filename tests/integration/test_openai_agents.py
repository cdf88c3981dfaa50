"""OpenAI Agents SDK runs recorded in process by ProvenanceProcessor, on the real stack.

The real SDK's ``Runner`` drives the agents; the model is a scripted
``agents.models.interface.Model`` replaying the bundled ReAct trajectories,
traced the way the SDK's own models trace (a Chat Completions generation span
or a Responses response span); the tools are ``function_tool`` Python
functions. Each trace read back from Neo4j must be the graph the emitter
records when driven directly with the same steps.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("agents", reason="needs the provstream[openai-agents] extra")

from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_trace_processors  # noqa: E402
from agents.models.chatcmpl_converter import Converter  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.testing import assistant_message, function_call  # noqa: E402
from agents.tracing import SpanError, generation_span, response_span  # noqa: E402
from framework_support import (  # noqa: E402
    TRAJECTORIES,
    assert_same_trace,
    expected_triples,
    pipeline,  # noqa: F401 - the module's fixture
    record_steps,
    session_id,
    stored_trace,
)
from openai.types.responses import Response, ResponseReasoningItem  # noqa: E402
from openai.types.responses.response_reasoning_item import Summary  # noqa: E402

from provstream.connectors.emitter import Emitter  # noqa: E402
from provstream.connectors.openai_agents import ProvenanceProcessor  # noqa: E402
from provstream.core import vocab as v  # noqa: E402
from provstream.core.trajectories import AgentTrajectory  # noqa: E402
from provstream.core.triples import Iri, Triple  # noqa: E402
from provstream.settings import Settings  # noqa: E402

pytestmark = pytest.mark.integration


class ReplayModel(Model):
    """A scripted model: the given output items turn by turn, traced as the SDK's models trace.

    ``style`` ``generation``: a generation span in Chat Completions form (as OpenAIChatCompletionsModel
    and LitellmModel record it); ``response``: a response span holding the Responses ``Response``.
    """

    def __init__(self, turns: Sequence[list[Any]], *, style: str = "generation", pause_at: int | None = None,
                 paused: threading.Event | None = None, resume: threading.Event | None = None,
                 fail_at: int | None = None) -> None:
        self.turns, self.style, self.calls = list(turns), style, 0
        self.pause_at, self.paused, self.resume, self.fail_at = pause_at, paused, resume, fail_at

    async def get_response(self, system_instructions: str | None, input: Any, model_settings: Any, tools: Any,
                           output_schema: Any, handoffs: Any, tracing: Any, **kwargs: Any) -> ModelResponse:
        k, self.calls = self.calls, self.calls + 1
        if k == self.pause_at:
            assert self.paused is not None and self.resume is not None
            self.paused.set()
            assert await asyncio.to_thread(self.resume.wait, 120), "never resumed"
        items = self.turns[k]
        span_of = generation_span(model="scripted", disabled=tracing.is_disabled()) if self.style == "generation" \
            else response_span(disabled=tracing.is_disabled())
        with span_of as span:
            if k == self.fail_at:
                span.set_error(SpanError(message="model unavailable", data=None))
                raise RuntimeError("model unavailable")
            if tracing.include_data():
                if self.style == "generation":
                    span.span_data.input = Converter.items_to_messages(input)
                    span.span_data.output = [chat_message(items)]
                else:
                    span.span_data.response = Response.model_construct(id=f"resp-{k}", output=items)
                    span.span_data.input = input
        return ModelResponse(output=items, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the tests run Runner.run")


def chat_message(items: list[Any]) -> dict[str, Any]:
    """The Chat Completions assistant message a chat model would have returned for these items."""
    text = "".join(p.text for i in items if i.type == "message" for p in i.content)
    reasoning = "\n".join(s.text for i in items if i.type == "reasoning" for s in i.summary)
    calls = [{"id": i.call_id, "type": "function", "function": {"name": i.name, "arguments": i.arguments}}
             for i in items if i.type == "function_call"]
    return {"role": "assistant", "content": text or None, "tool_calls": calls or None,
            **({"reasoning_content": reasoning} if reasoning else {})}


def reasoning(text: str) -> ResponseReasoningItem:
    return ResponseReasoningItem(id="reasoning", summary=[Summary(text=text, type="summary_text")], type="reasoning")


def turns(t: AgentTrajectory) -> list[list[Any]]:
    """One turn per acting step (thought + tool call), then the last thought (reasoning) and the answer."""
    *acting, last = t.steps
    assert not last.action
    out: list[list[Any]] = [[assistant_message(s.thought), function_call(s.action, dict(s.arguments), call_id=f"c{k}")]
                            for k, s in enumerate(acting)]
    return [*out, [reasoning(last.thought), assistant_message(t.answer)]]


def react_tools(t: AgentTrajectory) -> list[Any]:
    pages = {(s.action, s.arguments["input"]): s.observation for s in t.steps if s.action}

    @function_tool(name_override="Search")
    def search(input: str) -> str:
        """Search Wikipedia for an entity and return the first paragraph of its page."""
        return pages[("Search", input)]

    @function_tool(name_override="Lookup")
    def lookup(input: str) -> str:
        """Return the next sentence containing the keyword on the current page."""
        return pages[("Lookup", input)]

    return [search, lookup]


def react_agent(t: AgentTrajectory, model: Model | None = None, style: str = "generation") -> Agent[Any]:
    return Agent(name="react", instructions="Answer with Search and Lookup.", tools=react_tools(t),
                 model=model or ReplayModel(turns(t), style=style))


@pytest.fixture
def recording(pipeline: Settings) -> Iterator[tuple[Settings, ProvenanceProcessor]]:  # noqa: F811
    """The processor as the only trace processor (no export to OpenAI), on an open emitter."""
    with Emitter(pipeline) as emitter:
        processor = ProvenanceProcessor(emitter)
        set_trace_processors([processor])
        try:
            yield pipeline, processor
        finally:
            set_trace_processors([])
    assert processor.failures == 0


def replayed(settings: Settings, runs: list[tuple[str, AgentTrajectory]]) -> set:
    """What the emitter records for these runs of the agent ``react`` (its name is on each Question)."""
    def record(emitter: Emitter) -> None:
        for uri, t in runs:
            record_steps(emitter.agent(t.question, session_id=session_id(uri), agent_name="react"), t)
    return expected_triples(settings, record)


def test_runner_replaying_the_react_trajectories_comes_out_of_neo4j_as_the_emitter_records_it(recording) -> None:
    settings, processor = recording
    runs = []

    async def main() -> None:
        for k, t in enumerate(TRAJECTORIES):
            result = await Runner.run(react_agent(t, style=("generation", "response")[k % 2]), t.question)
            assert result.final_output == t.answer
            runs.append((processor.last_session, t))

    asyncio.run(main())
    assert len({uri for uri, _ in runs}) == len(TRAJECTORIES)
    assert_same_trace(settings, [uri for uri, _ in runs], replayed(settings, runs))


def handoff_agents(t: AgentTrajectory, *, fail: bool = False) -> tuple[Agent[Any], Agent[Any]]:
    """``triage`` searches once, then hands off to ``specialist``, which looks up and answers (or fails)."""
    s = t.steps
    specialist = Agent(name="specialist", tools=react_tools(t), model=ReplayModel([
        [assistant_message(s[1].thought), function_call("Lookup", dict(s[1].arguments), call_id="c2")],
        [reasoning(s[2].thought), assistant_message(t.answer)]], fail_at=1 if fail else None))
    triage = Agent(name="triage", tools=react_tools(t), handoffs=[specialist], model=ReplayModel([
        [assistant_message(s[0].thought), function_call("Search", dict(s[0].arguments), call_id="c1")],
        [assistant_message("The specialist looks it up."), function_call("transfer_to_specialist", {}, call_id="h")],
    ], style="response"))
    return triage, specialist


def handoff_sessions(processor: ProvenanceProcessor) -> tuple[str, str]:
    """The URIs of the trace's session and of the session its handoff opened."""
    uri = processor.last_session
    [sub] = [u for u in processor.sessions.values() if u != uri]
    return uri, sub


def record_handoff(emitter: Emitter, t: AgentTrajectory, uri: str, sub_uri: str, answer: str) -> None:
    """What the emitter records for :func:`handoff_agents` driven directly (``answer``: the run's final output)."""
    s = t.steps
    sub = emitter.agent(t.question, session_id=session_id(sub_uri), agent_name="specialist")
    sub.iteration(s[1].thought, s[1].action, s[1].arguments, s[1].observation)
    if not answer.startswith("Error:"):
        sub.iteration(s[2].thought)
    sub.conclude(answer)
    a = emitter.agent(t.question, session_id=session_id(uri), agent_name="triage")
    a.iteration(s[0].thought, s[0].action, s[0].arguments, s[0].observation)
    a.iteration("The specialist looks it up.", "handoff", {"from_agent": "triage", "to_agent": "specialist"},
                "triage handed the conversation over to specialist", subtrace=sub)
    a.conclude(answer)


def test_a_handoff_is_a_step_whose_subtrace_is_the_receiving_agents_session(recording) -> None:
    settings, processor = recording
    t = TRAJECTORIES[1]  # Search, Lookup, then the answer
    triage, specialist = handoff_agents(t)
    result = asyncio.run(Runner.run(triage, t.question))
    assert result.final_output == t.answer and result.last_agent is specialist
    uri, sub = handoff_sessions(processor)
    expected = expected_triples(settings, lambda e: record_handoff(e, t, uri, sub, t.answer))
    handoff = Triple(Iri(v.analysis_iri(session_id(uri), 2)), Iri(v.PROV_WAS_DERIVED_FROM),
                     Iri(v.conclusion_iri(session_id(sub))))
    assert handoff in expected
    assert_same_trace(settings, [uri, sub], expected)


def test_a_handoff_target_that_fails_concludes_both_sessions_with_the_error(recording) -> None:
    settings, processor = recording
    t = TRAJECTORIES[1]
    triage, _ = handoff_agents(t, fail=True)
    with pytest.raises(RuntimeError, match="model unavailable"):
        asyncio.run(Runner.run(triage, t.question))
    uri, sub = handoff_sessions(processor)
    expected = expected_triples(settings, lambda e: record_handoff(e, t, uri, sub, "Error: model unavailable"))
    assert_same_trace(settings, [uri, sub], expected)


def test_an_agent_used_as_a_tool_is_an_agent_subtrace_of_the_step(recording) -> None:
    settings, processor = recording
    outer, inner = TRAJECTORIES[3], TRAJECTORIES[4]
    researcher = react_agent(inner, style="response")
    boss = Agent(name="boss", tools=[researcher.as_tool(tool_name="researcher", tool_description="Researches.")],
                 model=ReplayModel([
                     [assistant_message("Ask the researcher."),
                      function_call("researcher", {"input": inner.question}, call_id="r")],
                     [assistant_message(outer.answer)]]))
    assert asyncio.run(Runner.run(boss, outer.question)).final_output == outer.answer
    uri = processor.last_session
    [(step, nested)] = processor.links
    assert step == v.analysis_iri(session_id(uri), 1) and nested != uri

    def record(emitter: Emitter) -> None:
        sub = record_steps(emitter.agent(inner.question, session_id=session_id(nested), agent_name="react"), inner)
        a = emitter.agent(outer.question, session_id=session_id(uri), agent_name="boss")
        a.iteration("Ask the researcher.", "researcher", {"input": inner.question}, inner.answer, subtrace=sub)
        a.conclude(outer.answer)
    assert_same_trace(settings, [uri, nested], expected_triples(settings, record))


def test_a_run_that_fails_ends_its_session_with_the_error(recording) -> None:
    settings, processor = recording
    t = TRAJECTORIES[0]
    with pytest.raises(RuntimeError, match="model unavailable"):
        asyncio.run(Runner.run(react_agent(t, ReplayModel(turns(t), fail_at=1)), t.question))
    uri = processor.last_session
    s = t.steps[0]

    def record(emitter: Emitter) -> None:
        a = emitter.agent(t.question, session_id=session_id(uri), agent_name="react")
        a.iteration(s.thought, s.action, s.arguments, s.observation)
        a.conclude("Error: model unavailable")
    assert_same_trace(settings, [uri], expected_triples(settings, record))


def test_earlier_steps_are_queryable_while_the_model_is_paused(recording) -> None:
    settings, processor = recording
    t = TRAJECTORIES[0]
    paused, resume = threading.Event(), threading.Event()
    model = ReplayModel(turns(t), pause_at=2, paused=paused, resume=resume)
    run = threading.Thread(target=lambda: asyncio.run(Runner.run(react_agent(t, model), t.question)))
    run.start()
    try:
        assert paused.wait(60)
        uri = processor.last_session
        sid = session_id(uri)
        deadline = time.monotonic() + 60
        while True:
            try:
                subjects = {x.s.value for x in stored_trace(settings, uri)}
            except Exception:  # noqa: BLE001 - not there yet
                subjects = set()
            if v.analysis_iri(sid, 2) in subjects:
                break
            assert time.monotonic() < deadline, "the first steps never reached Neo4j"
            time.sleep(0.3)
        assert v.conclusion_iri(sid) not in subjects and v.analysis_iri(sid, 3) not in subjects
        assert run.is_alive()
    finally:
        resume.set()
        run.join(60)
    assert_same_trace(settings, [uri], replayed(settings, [(uri, t)]))


def test_concurrent_runs_share_one_processor(recording) -> None:
    settings, processor = recording
    chosen = TRAJECTORIES[:6]

    async def main() -> None:
        await asyncio.gather(*(Runner.run(react_agent(t, style=("generation", "response")[k % 2]), t.question)
                               for k, t in enumerate(chosen)))

    asyncio.run(main())
    thread = threading.Thread(target=lambda: asyncio.run(Runner.run(react_agent(TRAJECTORIES[6]),
                                                                     TRAJECTORIES[6].question)))
    thread.start()
    thread.join(60)
    chosen = [*chosen, TRAJECTORIES[6]]
    assert len(processor.sessions) == len(chosen)
    by_question = {t.question: t for t in chosen}
    runs = []
    for uri in processor.sessions.values():
        deadline = time.monotonic() + 60
        while True:
            try:
                query = next(x.o.value for x in stored_trace(settings, uri) if x.p.value == v.TG_QUERY)
                break
            except Exception:  # noqa: BLE001 - not there yet
                assert time.monotonic() < deadline
                time.sleep(0.3)
        runs.append((uri, by_question[query]))
    assert_same_trace(settings, [u for u, _ in runs], replayed(settings, runs))
    json.dumps(processor.sessions)  # plain strings, loggable
