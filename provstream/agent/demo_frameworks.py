"""The demo's framework-driven agent: a LangChain ``create_agent`` run recorded by
:class:`~provstream.connectors.langchain.ProvenanceCallbackHandler`.

Only when the ``provstream[langchain]`` extra is installed; without it the
demo prints how to get it and goes on. No LLM and no network: the chat model
is langchain_core's fake chat model replaying one of the bundled ReAct
trajectories (its thoughts and tool calls), the tools are Python functions
answering from the pages that trajectory saw. The agent loop, the tool calls
and the callbacks are LangChain's own.

Example::

    uris = langchain_run(emitter, settings, pause=lambda: None, out=print)   # [] without the extra
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, Final, cast

from provstream.core.trajectories import AgentTrajectory, load
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings

TRAJECTORY: Final = 2  # "Which documentary is about Finnish rock groups?"


def available() -> bool:
    """Whether the ``provstream[langchain]`` extra (langchain, langgraph) is installed."""
    return all(importlib.util.find_spec(m) is not None for m in ("langchain", "langgraph", "langchain_core"))


def langchain_run(emitter: Any, settings: Settings, pause: Callable[[], None],
                  out: Callable[[str], None]) -> list[str]:
    """Run one LangChain agent recorded step by step; return its session URI (``[]`` without the extra).

    Args:
        emitter: the demo's emitter (an :class:`~provstream.connectors.emitter.Emitter`).
        settings: user and collection of the session.
        pause: called before each tool returns (paces the live tail).
        out: where progress lines go.
    """
    if not available():
        out("[langchain] skipped: pip install 'provstream[langchain]' to record a LangChain agent too")
        return []
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.tools import tool

    from provstream.connectors.langchain import ProvenanceCallbackHandler

    t = [r for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory)][TRAJECTORY]
    pages = {(s.action, s.arguments.get("input")): s.observation for s in t.steps if s.action}

    class ScriptedModel(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:  # type: ignore[override]
            return self

    @tool("Search")
    def search(input: str) -> str:
        """Search Wikipedia for an entity and return the first paragraph of its page."""
        pause()
        return pages[("Search", input)]

    @tool("Lookup")
    def lookup(input: str) -> str:
        """Return the next sentence containing the keyword on the current page."""
        pause()
        return pages[("Lookup", input)]

    *acting, last = t.steps
    turns: list[BaseMessage] = [
        AIMessage(content=s.thought, tool_calls=[{"name": s.action, "args": dict(s.arguments), "id": f"c{k}"}])
        for k, s in enumerate(acting)]
    turns.append(AIMessage(content=[{"type": "reasoning", "reasoning": last.thought},
                                    {"type": "text", "text": t.answer}]))
    handler = ProvenanceCallbackHandler(cast(Any, emitter), user=settings.user, collection=settings.collection)
    out(f"[langchain] create_agent, scripted chat model replaying a ReAct trajectory: {t.question}")
    agent: Any = create_agent(ScriptedModel(responses=turns), [search, lookup])
    result = agent.invoke({"messages": [("user", t.question)]}, config={"callbacks": [handler]})
    out(f"[langchain] {handler.last_session}  {len(acting)} tool calls  answer: {result['messages'][-1].text}")
    return [handler.last_session]
