"""LangChain / LangGraph agents recorded in process by ProvenanceCallbackHandler, on the real stack.

The real libraries (langchain, langgraph) drive the agents; the model is
langchain_core's FakeMessagesListChatModel replaying the bundled ReAct
trajectories as AIMessages with tool calls; the tools are Python functions
answering from the trajectory. Each trace read back from Neo4j must be the
graph the emitter records when driven directly with the same steps.
"""

from __future__ import annotations

import asyncio
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain", reason="needs the provstream[langchain] extra")

from framework_support import (  # noqa: E402
    TRAJECTORIES,
    assert_same_trace,
    expected_triples,
    pipeline,  # noqa: F401 - the module's fixture
    record_steps,
    session_id,
    stored_trace,
)
from langchain.agents import create_agent  # noqa: E402
from langchain_core.callbacks import CallbackManagerForRetrieverRun  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.tools import BaseTool, tool  # noqa: E402
from langgraph.graph import END, START, MessagesState, StateGraph  # noqa: E402
from langgraph.prebuilt import ToolNode, create_react_agent  # noqa: E402

from provstream.connectors.emitter import Emitter  # noqa: E402
from provstream.connectors.langchain import ProvenanceCallbackHandler  # noqa: E402
from provstream.core import vocab as v  # noqa: E402
from provstream.core.trajectories import (
    AgentTrajectory,  # noqa: E402
    Step,
    replay,
)
from provstream.core.triples import Iri, Triple  # noqa: E402
from provstream.settings import Settings  # noqa: E402

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


class ScriptedChatModel(FakeMessagesListChatModel):
    """The fake chat model replaying scripted AIMessages; can pause before, or fail at, a given turn."""

    pause_at: int | None = None
    paused: Any = None
    resume: Any = None
    fail_at: int | None = None

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> Any:
        if self.i == self.pause_at:
            self.paused.set()
            assert self.resume.wait(120), "never resumed"
        if self.i == self.fail_at:
            raise RuntimeError("model unavailable")
        return super()._generate(messages, stop, run_manager, **kwargs)


def script(t: AgentTrajectory, *, split_final: bool = False) -> list[BaseMessage]:
    """The model turns of a trajectory: one tool call per step, then the last thought and the answer.

    The last thought is a reasoning block of the final message, or (``split_final``) a message of
    its own that asks the hand-built graph to call the model again.
    """
    *acting, last = t.steps
    assert not last.action
    turns: list[BaseMessage] = [
        AIMessage(content=s.thought, tool_calls=[{"name": s.action, "args": dict(s.arguments), "id": f"call-{k}"}])
        for k, s in enumerate(acting)
    ]
    if split_final:
        turns += [AIMessage(content=last.thought, additional_kwargs={"think_again": True}), AIMessage(t.answer)]
    else:
        turns.append(AIMessage(content=[{"type": "reasoning", "reasoning": last.thought},
                                        {"type": "text", "text": t.answer}]))
    return turns


def react_tools(t: AgentTrajectory, delay: Callable[[str], float] = lambda _: 0.0) -> list[BaseTool]:
    """Search and Lookup over the pages the trajectory saw (a deterministic Wikipedia)."""
    pages = {(s.action, s.arguments["input"]): s.observation for s in t.steps if s.action}

    @tool("Search")
    def search(input: str) -> str:
        """Search Wikipedia for an entity and return the first paragraph of its page."""
        time.sleep(delay(input))
        return pages[("Search", input)]

    @tool("Lookup")
    def lookup(input: str) -> str:
        """Return the next sentence containing the keyword on the current page."""
        time.sleep(delay(input))
        return pages[("Lookup", input)]

    return [search, lookup]


def hand_built_graph(model: Any, tools: list[BaseTool]) -> Any:
    """A StateGraph with a model node and a ToolNode; the model may think aloud (no tool) and go on."""
    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        if getattr(last, "tool_calls", None):
            return "tools"
        return "model" if last.additional_kwargs.get("think_again") else END

    g = StateGraph(MessagesState)
    g.add_node("model", call_model)
    g.add_node("tools", ToolNode(tools))
    g.add_edge(START, "model")
    g.add_conditional_edges("model", route, ["tools", "model", END])
    g.add_edge("tools", "model")
    return g.compile()


BUILDERS: dict[str, Callable[[AgentTrajectory, ScriptedChatModel | None], Any]] = {
    "create_agent": lambda t, m: create_agent(m or ScriptedChatModel(responses=script(t)), react_tools(t)),
    "create_react_agent": lambda t, m: create_react_agent(m or ScriptedChatModel(responses=script(t)),
                                                          react_tools(t)),
    "StateGraph+ToolNode": lambda t, m: hand_built_graph(
        m or ScriptedChatModel(responses=script(t, split_final=True)), react_tools(t)),
}


def replayed(settings: Settings, runs: list[tuple[str, AgentTrajectory]]) -> set:
    """What the emitter records for these trajectories under these session URIs."""
    def record(emitter: Emitter) -> None:
        for uri, t in runs:
            replay(emitter, t, session_id=session_id(uri), user=settings.user, collection=settings.collection)
    return expected_triples(settings, record)


@pytest.mark.parametrize("builder", sorted(BUILDERS))
def test_agents_replaying_the_react_trajectories_come_out_of_neo4j_as_the_emitter_records_them(
        pipeline: Settings, builder: str) -> None:  # noqa: F811
    runs = []
    with Emitter(pipeline) as emitter:
        handler = ProvenanceCallbackHandler(emitter)
        for t in TRAJECTORIES:
            out = BUILDERS[builder](t, None).invoke({"messages": [("user", t.question)]},
                                                    config={"callbacks": [handler]})
            assert out["messages"][-1].text == t.answer
            runs.append((handler.last_session, t))
    assert handler.failures == 0 and len({uri for uri, _ in runs}) == len(TRAJECTORIES)
    assert_same_trace(pipeline, [uri for uri, _ in runs], replayed(pipeline, runs))


def test_parallel_tool_calls_fan_out_from_the_previous_step_and_the_next_turn_joins_them(
        pipeline: Settings) -> None:  # noqa: F811
    t = TRAJECTORIES[0]  # Search, Lookup, Search, Search, then the answer
    s = t.steps
    model = ScriptedChatModel(responses=[
        AIMessage(content=s[0].thought, tool_calls=[{"name": "Search", "args": dict(s[0].arguments), "id": "a"}]),
        AIMessage(content="Both at once.", tool_calls=[
            {"name": "Search", "args": dict(s[2].arguments), "id": "b"},
            {"name": "Search", "args": dict(s[3].arguments), "id": "c"}]),
        AIMessage(content=[{"type": "reasoning", "reasoning": s[4].thought}, {"type": "text", "text": t.answer}]),
    ])
    slow = s[3].arguments["input"]  # finishes second, so it is step 3
    agent = create_agent(model, react_tools(t, delay=lambda q: 0.5 if q == slow else 0.0))
    with Emitter(pipeline) as emitter:
        handler = ProvenanceCallbackHandler(emitter)
        agent.invoke({"messages": [("user", t.question)]}, config={"callbacks": [handler]})
    uri = handler.last_session
    steps = [s[0], Step("Both at once.", "Search", s[2].arguments, s[2].observation),
             Step("Both at once.", "Search", s[3].arguments, s[3].observation, used=(1,)),
             Step(s[4].thought, used=(2, 3))]
    expected = replayed(pipeline, [(uri, AgentTrajectory(t.question, t.answer, tuple(steps)))])
    assert_same_trace(pipeline, [uri], expected)


class KeywordRetriever(BaseRetriever):
    """A real LangChain retriever: documents sharing a word with the query, best first."""

    documents: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        words = set(query.lower().split())
        scored = [(len(words & set(d.page_content.lower().split())), d) for d in self.documents]
        return [d for n, d in sorted(scored, key=lambda x: -x[0]) if n][:2]


def test_a_retriever_inside_a_tool_is_a_document_rag_subtrace_of_the_step(pipeline: Settings) -> None:  # noqa: F811
    t = TRAJECTORIES[0]
    docs = [Document(id=f"page-{k}", page_content=s.observation) for k, s in enumerate(t.steps) if s.action]
    retriever = KeywordRetriever(documents=docs)

    @tool("Search")
    def search(input: str) -> str:
        """Search the pages."""
        return "\n".join(d.page_content for d in retriever.invoke(input))

    query = "High Plains elevation"
    found = retriever.invoke(query)
    answer = "\n".join(d.page_content for d in found)
    model = ScriptedChatModel(responses=[
        AIMessage(content="Search the elevation.", tool_calls=[{"name": "Search", "args": {"input": query},
                                                                 "id": "a"}]),
        AIMessage(content=t.answer)])
    with Emitter(pipeline) as emitter:
        handler = ProvenanceCallbackHandler(emitter)
        create_agent(model, [search]).invoke({"messages": [("user", t.question)]}, config={"callbacks": [handler]})
    uri = handler.last_session
    wait = stored_when(pipeline, uri, lambda triples: any(":docrag:" in str(x.o) for x in triples))
    docrag = next(x.o.value for x in wait if x.p.value == v.PROV_WAS_DERIVED_FROM and ":docrag:" in str(x.o))
    sub = session_id(docrag.removesuffix("/synthesis"))

    def record(emitter: Emitter) -> None:
        d = emitter.docrag(query, session_id=sub)
        d.explore(len(found), [doc.id for doc in found])  # type: ignore[misc]
        d.synthesize(answer)
        a = emitter.agent(t.question, session_id=session_id(uri))
        a.iteration(thought="Search the elevation.", action="Search", arguments={"input": query},
                    observation=answer, subtrace=d)
        a.conclude(t.answer)
    assert_same_trace(pipeline, [uri, v.question_iri(v.Mechanism.DOCRAG, sub)], expected_triples(pipeline, record))


def stored_when(settings: Settings, uri: str, check: Callable[[set], bool], timeout: float = 60) -> set:
    deadline = time.monotonic() + timeout
    while True:
        try:
            triples = stored_trace(settings, uri)
            if check(triples):
                return triples
        except Exception:  # noqa: BLE001 - not there yet
            pass
        assert time.monotonic() < deadline, f"{uri} never matched"
        time.sleep(0.3)


def test_an_agent_run_inside_a_tool_is_an_agent_subtrace_of_the_step(pipeline: Settings) -> None:  # noqa: F811
    outer, inner = TRAJECTORIES[1], TRAJECTORIES[2]
    inner_agent = create_agent(ScriptedChatModel(responses=script(inner)), react_tools(inner), name="researcher")

    @tool("Researcher")
    def researcher(input: str) -> str:
        """Ask the research agent."""
        return inner_agent.invoke({"messages": [("user", input)]})["messages"][-1].text

    model = ScriptedChatModel(responses=[
        AIMessage(content="Ask the researcher.", tool_calls=[{"name": "Researcher", "args": {"input": inner.question},
                                                               "id": "a"}]),
        AIMessage(content=outer.answer)])
    with Emitter(pipeline) as emitter:
        handler = ProvenanceCallbackHandler(emitter)
        create_agent(model, [researcher]).invoke({"messages": [("user", outer.question)]},
                                                 config={"callbacks": [handler]})
    assert handler.failures == 0
    uri = handler.last_session
    [(step, nested)] = handler.links
    assert step == v.analysis_iri(session_id(uri), 1) and nested != uri

    def record(emitter: Emitter) -> None:
        sub = record_steps(emitter.agent(inner.question, session_id=session_id(nested), agent_name="researcher"),
                           inner)
        a = emitter.agent(outer.question, session_id=session_id(uri))
        a.iteration(thought="Ask the researcher.", action="Researcher", arguments={"input": inner.question},
                    observation=inner.answer, subtrace=sub)
        a.conclude(outer.answer)
    expected = expected_triples(pipeline, record)
    assert Triple(Iri(step), Iri(v.PROV_WAS_DERIVED_FROM), Iri(v.conclusion_iri(session_id(nested)))) in expected
    assert_same_trace(pipeline, [uri, nested], expected)


def test_a_run_that_fails_ends_its_session_with_the_error(pipeline: Settings) -> None:  # noqa: F811
    t = TRAJECTORIES[0]
    model = ScriptedChatModel(responses=script(t), fail_at=1)
    with Emitter(pipeline) as emitter:
        handler = ProvenanceCallbackHandler(emitter)
        with pytest.raises(RuntimeError, match="model unavailable"):
            create_agent(model, react_tools(t)).invoke({"messages": [("user", t.question)]},
                                                      config={"callbacks": [handler]})
    uri = handler.last_session

    def record(emitter: Emitter) -> None:
        a = emitter.agent(t.question, session_id=session_id(uri))
        s = t.steps[0]
        a.iteration(thought=s.thought, action=s.action, arguments=s.arguments, observation=s.observation)
        a.conclude("Error: RuntimeError: model unavailable")
    assert handler.failures == 0
    assert_same_trace(pipeline, [uri], expected_triples(pipeline, record))


def _pump(stream: Any, lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))


def test_earlier_steps_are_queryable_and_followed_while_the_model_is_paused(pipeline: Settings) -> None:  # noqa: F811
    t = TRAJECTORIES[0]
    paused, resume = threading.Event(), threading.Event()
    model = ScriptedChatModel(responses=script(t), pause_at=2, paused=paused, resume=resume)
    env = {**os.environ, "PROVSTREAM_TRIPLES_TOPIC": pipeline.triples_topic, "COLUMNS": "200"}
    follow = subprocess.Popen([str(BIN / "provstream"), "follow", "-C", pipeline.collection], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_pump, args=(follow.stdout, lines), daemon=True).start()
    try:
        time.sleep(3)  # follow subscribes at the end of the topic
        with Emitter(pipeline) as emitter:
            handler = ProvenanceCallbackHandler(emitter)
            run = threading.Thread(target=lambda: create_agent(model, react_tools(t)).invoke(
                {"messages": [("user", t.question)]}, config={"callbacks": [handler]}))
            run.start()
            try:
                assert paused.wait(60)
                uri = handler.last_session
                i2 = v.analysis_iri(session_id(uri), 2)
                triples = stored_when(pipeline, uri, lambda ts: any(x.s.value == i2 for x in ts))
                assert not any(x.s.value == v.conclusion_iri(session_id(uri)) for x in triples)
                assert {x.s.value for x in triples if x.p.value == v.TG_THOUGHT} == {
                    v.analysis_iri(session_id(uri), 1), i2}
                seen: list[str] = []
                deadline = time.monotonic() + 60
                while sum(session_id(uri) in line for line in seen) < 3 and time.monotonic() < deadline:
                    try:
                        seen.append(lines.get(timeout=0.5))
                    except queue.Empty:
                        pass
                mine = [line for line in seen if session_id(uri) in line]
                assert len(mine) == 3 and "question" in mine[0], seen  # question, i1, i2 while still running
                assert run.is_alive()
            finally:
                resume.set()
                run.join(60)
    finally:
        follow.terminate()
        follow.wait(30)
    assert_same_trace(pipeline, [uri], replayed(pipeline, [(uri, t)]))


def test_concurrent_runs_on_threads_and_asyncio_share_one_handler(pipeline: Settings) -> None:  # noqa: F811
    chosen = TRAJECTORIES[:8]
    results: dict[int, str] = {}
    with Emitter(pipeline) as emitter:
        handler = ProvenanceCallbackHandler(emitter)

        def sync_run(k: int) -> None:
            t = chosen[k]
            BUILDERS["create_agent"](t, None).invoke({"messages": [("user", t.question)]},
                                                     config={"callbacks": [handler]})

        async def async_runs() -> None:
            await asyncio.gather(*(
                BUILDERS["create_react_agent"](chosen[k], None).ainvoke(
                    {"messages": [("user", chosen[k].question)]}, config={"callbacks": [handler]})
                for k in range(4, 8)))

        threads = [threading.Thread(target=sync_run, args=(k,)) for k in range(4)]
        for th in threads:
            th.start()
        asyncio.run(async_runs())
        for th in threads:
            th.join(60)
    assert handler.failures == 0 and len(handler.sessions) == 8
    by_question = {t.question: t for t in chosen}
    runs = []
    for uri in handler.sessions.values():
        question = next(x.o.value for x in stored_when(pipeline, uri, bool) if x.p.value == v.TG_QUERY)
        runs.append((uri, by_question[question]))
    del results
    assert_same_trace(pipeline, [u for u, _ in runs], replayed(pipeline, runs))
