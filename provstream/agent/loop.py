"""The ReAct loop: decide -> act -> observe, each step recorded as it happens.

Each tool call is one iteration (thought, action, arguments, observation, and
the sub-trace the tool recorded); a final thought is one more iteration
without an action; then the conclusion. A planner failure (the model endpoint,
an unparseable reply), a tool error or the step limit ends the session with a
conclusion that says why.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from provstream.agent.planner import Planner
from provstream.agent.react import Act, Finish, Turn
from provstream.agent.tools import Tool, ToolResult, call
from provstream.errors import AgentError, ToolError

Report = Callable[[str, str], None]


class AgentRecorder(Protocol):
    """What the loop needs from an emitter's agent session."""

    uri: str

    def iteration(self, thought: str = "", action: str = "", arguments: Mapping[str, Any] | None = None,
                  observation: str = "", used: Sequence[int] = (), subtrace: Any = None) -> str: ...

    def conclude(self, answer: str) -> str: ...


@dataclass(frozen=True)
class Outcome:
    """How a run ended: ``answered`` is False when it stopped on an error or the step limit."""

    answer: str
    answered: bool
    steps: int


def quiet(kind: str, text: str) -> None:
    """The default :data:`Report`: print nothing."""


def react(question: str, planner: Planner, tools: Mapping[str, Tool], session: AgentRecorder,
          max_steps: int, report: Report = quiet) -> Outcome:
    """Run until a final answer, an error or ``max_steps`` planner decisions."""
    history: list[Turn] = []
    for _ in range(max_steps):
        try:
            decision = planner.decide(question, history)
        except AgentError as exc:
            return _stop(session, f"Stopped: {exc}", len(history), report)
        if isinstance(decision, Finish):
            return _finish(session, decision, len(history), report)
        try:
            result = _act(session, tools, decision, report)
        except ToolError as exc:
            return _stop(session, f"Stopped: tool {decision.action!r} failed: {exc}", len(history) + 1, report)
        history.append(Turn(decision, result.observation))
    return _stop(session, f"Stopped: reached the step limit ({max_steps}) without a final answer.",
                 len(history), report)


def _act(session: AgentRecorder, tools: Mapping[str, Tool], act: Act, report: Report) -> ToolResult:
    """Call the tool and record the iteration (with the error as observation if it failed)."""
    report("thought", act.thought)
    report("action", f"{act.action} {json.dumps(dict(act.arguments), ensure_ascii=False)}")
    try:
        result = call(tools, act.action, act.arguments)
    except ToolError as exc:
        report("observation", f"Error: {exc}")
        session.iteration(thought=act.thought, action=act.action, arguments=act.arguments,
                          observation=f"Error: {exc}")
        raise
    report("observation", result.observation)
    session.iteration(thought=act.thought, action=act.action, arguments=act.arguments,
                      observation=result.observation, subtrace=result.subtrace)
    return result


def _finish(session: AgentRecorder, decision: Finish, steps: int, report: Report) -> Outcome:
    if decision.thought:
        report("thought", decision.thought)
        session.iteration(thought=decision.thought)
    report("answer", decision.answer)
    session.conclude(decision.answer)
    return Outcome(decision.answer, True, steps)


def _stop(session: AgentRecorder, reason: str, steps: int, report: Report) -> Outcome:
    report("stopped", reason)
    session.conclude(reason)
    return Outcome(reason, False, steps)
