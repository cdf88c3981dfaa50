"""One agent run, assembled: planner (LLM if configured, else heuristic), tools,
the recorded session and its DocRAG sub-traces. Used by ``tg-invoke-agent``
and by the demo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from provstream.agent.llm import ChatClient, LlmPlanner
from provstream.agent.loop import Outcome, Report, quiet, react
from provstream.agent.planner import HeuristicPlanner, Planner
from provstream.agent.search import SearchIndex, default_index
from provstream.agent.tools import CalculatorTool, SearchTool, Tool, describe
from provstream.core.request import AgentRequest
from provstream.settings import Settings


class Sessions(Protocol):
    """What a run needs of an emitter (``provstream.connectors.emitter.Emitter``)."""

    def agent(self, question: str, *, user: str | None = ..., collection: str | None = ...,
              session_id: str | None = ...) -> Any: ...

    def docrag(self, question: str, *, user: str | None = ..., collection: str | None = ...,
               session_id: str | None = ...) -> Any: ...


@dataclass(frozen=True)
class AgentRun:
    """The session URI (``""`` when not recorded), how it ended, and the sub-trace URIs it opened."""

    uri: str
    outcome: Outcome
    subtraces: tuple[str, ...]
    planner: str


def planner_for(settings: Settings, tools: list[Tool], index: SearchIndex) -> Planner:
    if settings.llm_url:
        client = ChatClient(settings.llm_url, settings.llm_model, settings.llm_api_key)
        return LlmPlanner(client, describe(tools))
    return HeuristicPlanner(index)


def invoke(emitter: Sessions, settings: Settings, request: AgentRequest, report: Report | None = None) -> AgentRun:
    """Run the ReAct loop for ``request``, recording every step through ``emitter`` as it happens."""
    scope = {"user": request.user, "collection": request.collection}
    opened: list[str] = []

    def open_docrag(query: str) -> Any:
        sub = emitter.docrag(query, **scope, session_id=None if request.records else "")
        if sub.uri:
            opened.append(sub.uri)
        return sub

    index = default_index()
    tools: list[Tool] = [SearchTool(index, open_docrag), CalculatorTool()]
    planner = planner_for(settings, tools, index)
    session = emitter.agent(request.question, **scope, session_id=request.session_id)
    outcome = react(request.question, planner, {t.name: t for t in tools}, session, request.max_steps,
                    report or quiet)
    return AgentRun(session.uri, outcome, tuple(opened), planner.label)
