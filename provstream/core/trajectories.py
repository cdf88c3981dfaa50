"""Recorded agent/RAG runs in JSON Lines, and their replay through an emitter.

One JSON object per line (blank lines are skipped):

* a ReAct trajectory (``provstream/data/README.md``)::

    {"question": "...", "answer": "...", "source": "...",
     "steps": [{"thought": "...", "action": "Search", "arguments": {"input": "..."}, "observation": "..."}]}

  (``"mechanism": "agent"`` is optional; a step may also name ``used``: earlier step numbers);
* ``{"mechanism": "docrag", "question": "...", "chunks": ["id", ...], "answer": "..."}``
  (optional ``chunk_count``, default ``len(chunks)``);
* ``{"mechanism": "graphrag", "question": "...", "edge_count": N,
  "selected": [{"edge": [s, p, o], "reasoning": "..."}], "answer": "..."}``.

Bad input raises :class:`InvalidInput` naming the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Union

from provstream.core.events import SelectedEdge
from provstream.errors import InvalidInput


@dataclass(frozen=True)
class Step:
    """One think/act/observe cycle of a recorded agent run."""

    thought: str = ""
    action: str = ""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    observation: str = ""
    used: tuple[int, ...] = ()


@dataclass(frozen=True)
class AgentTrajectory:
    question: str
    answer: str
    steps: tuple[Step, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class DocRagRun:
    question: str
    answer: str
    chunks: tuple[str, ...] = ()
    chunk_count: int = 0


@dataclass(frozen=True)
class GraphRagRun:
    question: str
    answer: str
    edge_count: int = 0
    selected: tuple[SelectedEdge, ...] = ()


Record = Union[AgentTrajectory, DocRagRun, GraphRagRun]


class _Sessions(Protocol):
    """What :func:`replay` needs of an emitter (``provstream.connectors.emitter.Emitter``)."""

    def agent(self, question: str, *, user: str | None = ..., collection: str | None = ...,
              session_id: str | None = ...) -> Any: ...

    def docrag(self, question: str, *, user: str | None = ..., collection: str | None = ...,
               session_id: str | None = ...) -> Any: ...

    def graphrag(self, question: str, *, user: str | None = ..., collection: str | None = ...,
                 session_id: str | None = ...) -> Any: ...


# -- reading ------------------------------------------------------------------

def load(path: str | Path) -> Iterator[tuple[int, Record]]:
    """Yield ``(line number, record)`` for each non-blank line, lazily."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, start=1):
                if line.strip():
                    yield number, parse_line(line, f"{path}:{number}")
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def parse_line(line: str, where: str = "line") -> Record:
    """One JSON line -> its record; :class:`InvalidInput` prefixed with ``where``."""
    try:
        data = json.loads(line)
    except ValueError as exc:
        raise InvalidInput(f"{where}: not JSON: {exc}") from exc
    try:
        return parse_record(data)
    except _Bad as exc:
        raise InvalidInput(f"{where}: {exc}") from None


def parse_record(data: Any) -> Record:
    if not isinstance(data, dict):
        raise _Bad(f"expected a JSON object, got {type(data).__name__}")
    mechanism = data.get("mechanism", "agent")
    parser = _PARSERS.get(mechanism) if isinstance(mechanism, str) else None
    if parser is None:
        raise _Bad(f"unknown mechanism {mechanism!r} (use agent, docrag or graphrag)")
    return parser(data)


class _Bad(ValueError):
    pass


def _str(data: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = data.get(key, default)
    if value is None:
        raise _Bad(f"missing {key!r}")
    if not isinstance(value, str):
        raise _Bad(f"{key!r} must be a string, got {type(value).__name__}")
    return value


def _int(data: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = data.get(key, default)
    if value is None:
        raise _Bad(f"missing {key!r}")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Bad(f"{key!r} must be a non-negative integer, got {value!r}")
    return value


def _list(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data.get(key, [])
    if not isinstance(value, list):
        raise _Bad(f"{key!r} must be a list, got {type(value).__name__}")
    return value


def _agent(data: Mapping[str, Any]) -> AgentTrajectory:
    steps = tuple(_step(s, i) for i, s in enumerate(_list(data, "steps"), start=1))
    return AgentTrajectory(_str(data, "question"), _str(data, "answer"), steps, _str(data, "source", ""))


def _step(data: Any, number: int) -> Step:
    if not isinstance(data, dict):
        raise _Bad(f"step {number} must be an object")
    arguments = data.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise _Bad(f"step {number}: 'arguments' must be an object, got {type(arguments).__name__}")
    used = _list(data, "used")
    if any(isinstance(u, bool) or not isinstance(u, int) or not 1 <= u < number for u in used):
        raise _Bad(f"step {number}: 'used' must list earlier step numbers (1..{number - 1}), got {used!r}")
    try:
        return Step(_str(data, "thought", ""), _str(data, "action", ""), arguments,
                    _str(data, "observation", ""), tuple(used))
    except _Bad as exc:
        raise _Bad(f"step {number}: {exc}") from None


def _docrag(data: Mapping[str, Any]) -> DocRagRun:
    chunks = _list(data, "chunks")
    if not all(isinstance(c, str) for c in chunks):
        raise _Bad("'chunks' must be a list of chunk id strings")
    return DocRagRun(_str(data, "question"), _str(data, "answer"), tuple(chunks),
                     _int(data, "chunk_count", len(chunks)))


def _graphrag(data: Mapping[str, Any]) -> GraphRagRun:
    selected = tuple(_selected(s, i) for i, s in enumerate(_list(data, "selected"), start=1))
    return GraphRagRun(_str(data, "question"), _str(data, "answer"), _int(data, "edge_count"), selected)


def _selected(data: Any, number: int) -> SelectedEdge:
    edge = data.get("edge") if isinstance(data, dict) else None
    if not isinstance(edge, list) or len(edge) != 3 or not all(isinstance(t, str) for t in edge):
        raise _Bad(f"selected edge {number} must be {{\"edge\": [s, p, o], \"reasoning\": \"...\"}}")
    reasoning = data.get("reasoning", "")
    if not isinstance(reasoning, str):
        raise _Bad(f"selected edge {number}: 'reasoning' must be a string")
    return SelectedEdge(edge[0], edge[1], edge[2], reasoning)


_PARSERS: dict[str, Callable[[Mapping[str, Any]], Record]] = {
    "agent": _agent, "react": _agent, "docrag": _docrag, "graphrag": _graphrag,
}


# -- replay -------------------------------------------------------------------

def replay(emitter: _Sessions, record: Record, *, user: str | None = None, collection: str | None = None,
           session_id: str | None = None) -> str:
    """Emit one recorded run as a live session, step by step; return the session URI."""
    scope: dict[str, Any] = {"user": user, "collection": collection, "session_id": session_id}
    if isinstance(record, AgentTrajectory):
        session = emitter.agent(record.question, **scope)
        for step in record.steps:
            session.iteration(thought=step.thought, action=step.action, arguments=step.arguments,
                              observation=step.observation, used=step.used)
        session.conclude(record.answer)
    elif isinstance(record, DocRagRun):
        session = emitter.docrag(record.question, **scope)
        session.explore(record.chunk_count, record.chunks)
        session.synthesize(record.answer)
    else:
        session = emitter.graphrag(record.question, **scope)
        session.explore(record.edge_count)
        session.focus(record.selected)
        session.synthesize(record.answer)
    return str(session.uri)
