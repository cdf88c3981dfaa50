"""The ReAct text protocol: the prompt sent to a chat model and the parser of its replies.

A reply is either::

    Thought: I should look this up.
    Action: search
    Action Input: {"query": "Milhouse named after"}

or::

    Thought: I know the answer now.
    Final Answer: Richard Nixon

Anything the model writes from a line starting ``Observation:`` on is ignored
(the tool, not the model, supplies observations). ``Action Input`` may be a
JSON object or plain text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Union

from provstream.errors import ReplyFormatError

_OBSERVATION: Final = re.compile(r"^[ \t]*Observation[ \t]*:", re.MULTILINE | re.IGNORECASE)
_FINAL: Final = re.compile(r"^[ \t]*Final Answer[ \t]*:[ \t]*(.*)", re.MULTILINE | re.IGNORECASE | re.DOTALL)
_ACTION: Final = re.compile(r"^[ \t]*Action[ \t]*:[ \t]*(.*?)[ \t]*$", re.MULTILINE | re.IGNORECASE)
_INPUT: Final = re.compile(r"^[ \t]*Action Input[ \t]*:[ \t]*(.*)", re.MULTILINE | re.IGNORECASE | re.DOTALL)
_THOUGHT: Final = re.compile(r"^\s*Thought\s*:\s*", re.IGNORECASE)
_FENCE: Final = re.compile(r"^```\w*\s*|\s*```$")


@dataclass(frozen=True, slots=True)
class Act:
    """Call ``action`` with ``arguments``."""

    thought: str
    action: str
    arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Finish:
    thought: str
    answer: str


Decision = Union[Act, Finish]


@dataclass(frozen=True, slots=True)
class Turn:
    """One past step as the planner sees it: what it decided and what the tool returned."""

    act: Act
    observation: str


def parse_reply(text: str, argument_names: Mapping[str, str] | None = None) -> Decision:
    """Parse one model reply; :class:`ReplyFormatError` if it has neither an action nor a final answer.

    ``argument_names`` maps a tool to the argument a plain-text input becomes
    (``search`` -> ``query``); unknown tools get ``input``.
    """
    reply = _OBSERVATION.split(text, maxsplit=1)[0].strip()
    action = _ACTION.search(reply)
    final = _FINAL.search(reply)
    if final and (not action or final.start() < action.start()):
        end = action.start() if action else len(reply)
        return Finish(_thought(reply[:final.start()]), reply[final.start(1):end].strip())
    if action and action.group(1):
        name = action.group(1).strip().strip("`*").strip()
        given = _INPUT.search(reply, action.end())
        raw = given.group(1).strip() if given else ""
        key = (argument_names or {}).get(name, "input")
        return Act(_thought(reply[:action.start()]), name, _arguments(raw, key))
    excerpt = " ".join(reply.split())[:120]
    raise ReplyFormatError(f"the model reply has no 'Action:' or 'Final Answer:' line: {excerpt!r}")


def _thought(text: str) -> str:
    return _THOUGHT.sub("", text.strip(), count=1).strip()


def _arguments(raw: str, key: str) -> dict[str, Any]:
    raw = _FENCE.sub("", raw.strip()).strip()
    if raw.startswith("{"):
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
    return {key: raw.strip().strip('"')}


# -- prompt -----------------------------------------------------------------

SYSTEM: Final = """You are a research assistant that answers questions by reasoning step by step and using tools.

You can use these tools:
{tools}

Use exactly this format:

Thought: what you think about the question and what to do next
Action: the tool to use, one of [{names}]
Action Input: the tool input as a JSON object, e.g. {example}
Observation: the tool result (written for you, never by you)
... (Thought / Action / Action Input / Observation can repeat)
Thought: I now know the final answer
Final Answer: the answer to the question

Write one Thought, then either one Action with its Action Input, or a Final Answer. Stop after Action Input."""


def system_prompt(tools: Sequence[tuple[str, str, str]]) -> str:
    """``tools``: (name, argument, description) triples."""
    lines = "\n".join(f"- {name}: {description} Input: {{\"{arg}\": ...}}" for name, arg, description in tools)
    example = json.dumps({tools[0][1]: "..."}) if tools else "{}"
    return SYSTEM.format(tools=lines, names=", ".join(t[0] for t in tools), example=example)


def scratchpad(question: str, history: Sequence[Turn]) -> str:
    """The user message: the question and every step so far, in ReAct form."""
    parts = [f"Question: {question}"]
    for turn in history:
        if turn.act.thought:
            parts.append(f"Thought: {turn.act.thought}")
        parts.append(f"Action: {turn.act.action}")
        parts.append(f"Action Input: {json.dumps(dict(turn.act.arguments), ensure_ascii=False)}")
        parts.append(f"Observation: {turn.observation}")
    return "\n".join(parts)
