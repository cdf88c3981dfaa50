"""The agent's tools: ``search`` (DocRAG over the bundled corpus, recorded as a
sub-trace) and ``calculator``. A tool takes the arguments the planner chose and
returns its observation, or raises :class:`ToolError` saying why it could not.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from provstream.agent.calculator import calculate
from provstream.agent.docrag import DocRagRecorder, run_docrag
from provstream.agent.search import SearchIndex
from provstream.errors import ToolError


@dataclass(frozen=True)
class ToolResult:
    """The observation, and the DocRAG/GraphRAG session the call was recorded as (if any)."""

    observation: str
    subtrace: Any = None


class Tool(Protocol):
    name: str
    argument: str
    description: str

    def run(self, arguments: Mapping[str, Any]) -> ToolResult: ...


def single_argument(tool: Tool, arguments: Mapping[str, Any]) -> str:
    """The tool's one text argument: by its name, else the only value given."""
    value = arguments.get(tool.argument)
    if value is None and len(arguments) == 1:
        value = next(iter(arguments.values()))
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"needs a non-empty text argument {tool.argument!r}, got {dict(arguments)!r}")
    return value.strip()


class SearchTool:
    """Document search; every call is a DocRAG session opened by ``open_session(query)``."""

    name = "search"
    argument = "query"
    description = "searches a small corpus of Wikipedia paragraphs and returns the most relevant sentences."

    def __init__(self, index: SearchIndex, open_session: Callable[[str], DocRagRecorder]) -> None:
        self.index = index
        self.open_session = open_session

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        query = single_argument(self, arguments)
        session = self.open_session(query)
        return ToolResult(run_docrag(session, self.index, query).content, session)


class CalculatorTool:
    name = "calculator"
    argument = "expression"
    description = "evaluates an arithmetic expression (numbers, + - * / // % ** and parentheses)."

    def run(self, arguments: Mapping[str, Any]) -> ToolResult:
        return ToolResult(calculate(single_argument(self, arguments)))


def describe(tools: Sequence[Tool]) -> list[tuple[str, str, str]]:
    """(name, argument, description) of each tool, for the prompt."""
    return [(t.name, t.argument, t.description) for t in tools]


def call(tools: Mapping[str, Tool], name: str, arguments: Mapping[str, Any]) -> ToolResult:
    tool = tools.get(name.strip().lower())
    if tool is None:
        raise ToolError(f"no such tool (the tools are {', '.join(sorted(tools))})")
    return tool.run(arguments)
