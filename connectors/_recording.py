"""What the framework adapters share: one agent run recorded turn by turn, and the never-raise guard.

The LangChain handler (:mod:`provstream.connectors.langchain`) and the OpenAI
Agents SDK processor (:mod:`provstream.connectors.openai_agents`) translate
their framework's callbacks into the calls of :class:`RunRecorder`, which
drives an :class:`~provstream.connectors.emitter.AgentSession`:

* a model turn that asks for tools gives the thought of the steps those tools
  make (one Analysis step per tool call, recorded when the tool returns);
* the steps of one turn all derive from the steps of the turn before (the DAG
  the fold supports through ``used``), so parallel tool calls fan out and the
  next turn joins them;
* a model turn with text and no tool call is held back: if another model turn
  follows it becomes a thought-only step, else it is the final answer;
* :meth:`RunRecorder.finish` records the Conclusion, with the error when the
  run failed, so no session is left dangling.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from functools import wraps
from typing import Any, TypeVar, cast

from provstream.connectors.emitter import AgentSession, DocRagSession, GraphRagSession, NullSession

_JSON_SAFE = json.JSONEncoder(ensure_ascii=False, sort_keys=True, default=str)
K = TypeVar("K")
V = TypeVar("V")
RECENT = 1024  # how many run -> session entries an adapter keeps for its caller


class Recent(OrderedDict[K, V]):
    """A dict that keeps only its ``limit`` most recent entries (a long-lived adapter must not grow for ever).

    >>> r = Recent(limit=2); r["a"] = 1; r["b"] = 2; r["c"] = 3; list(r)
    ['b', 'c']
    """

    def __init__(self, limit: int = RECENT) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        super().__setitem__(key, value)
        while len(self) > self.limit:
            self.popitem(last=False)


def json_arguments(value: Any) -> dict[str, Any]:
    """Tool input as a JSON object.

    A mapping is kept (values made JSON-safe), a JSON object text is parsed, anything else is
    ``{"input": value}``.

    >>> json_arguments('{"q": "Paris"}'), json_arguments("Paris")
    ({'q': 'Paris'}, {'input': 'Paris'})
    """
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return {"input": value}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    if isinstance(value, Mapping):
        return dict(json.loads(_JSON_SAFE.encode(dict(value))))
    if value is None:
        return {}
    return {"input": json.loads(_JSON_SAFE.encode(value))}


def error_text(exc: BaseException | str) -> str:
    """How an error is recorded: ``"Error: <Type>: <message>"``."""
    if isinstance(exc, BaseException):
        return f"Error: {type(exc).__name__}: {exc}"
    return f"Error: {exc}"


class Guard:
    """Counts adapter failures and logs the first one; an adapter never raises into the agent.

    Attributes:
        failures: how many callbacks failed (their step was not recorded).
        last_error: the most recent failure, or ``None``.
    """

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger
        self._lock = threading.Lock()
        self.failures = 0
        self.last_error: BaseException | None = None

    def failed(self, where: str, exc: BaseException) -> None:
        """Record one failure of callback ``where``; only the first is logged (with its traceback)."""
        with self._lock:
            self.failures += 1
            self.last_error = exc
            first = self.failures == 1
        if first:
            self._logger.warning("provstream: recording failed in %s (the agent goes on; later failures are "
                                 "counted, not logged): %s", where, exc, exc_info=exc)
        else:
            self._logger.debug("provstream: recording failed in %s: %s", where, exc)


class RunRecorder:
    """One agent run: a session of the emitter, fed model turns and tool steps as they happen.

    Args:
        session: the run's session (``emitter.agent(question)``); a :class:`NullSession` records nothing.

    Thread-safe: tool steps of one turn may arrive from several threads.

    Example::

        run = RunRecorder(emitter.agent("Who directed Alien?"))
        run.model_turn(text="Search the film", tool_calls=1)
        run.tool_step("Search", {"q": "Alien"}, "Ridley Scott directed it")
        run.model_turn(text="Ridley Scott", tool_calls=0)
        run.finish()                       # Conclusion "Ridley Scott"
    """

    def __init__(self, session: AgentSession | NullSession) -> None:
        self.session = session
        self.uri: str = session.uri
        self._lock = threading.RLock()
        self._thought = ""
        self._pending: str | None = None
        self._previous: list[int] = []  # steps of the last completed turn (the current turn derives from them)
        self._current: list[int] = []  # steps of the current turn
        self.finished = False
        self.answer: str | None = None  # the Conclusion's text, once finished

    def model_started(self) -> None:
        """A model call begins: a held-back text turn was not the final answer, so it becomes a thought-only step."""
        with self._lock:
            if self._pending is not None:
                text, self._pending = self._pending, None
                if text:  # an empty turn says nothing
                    self._thought_only(text)

    def model_turn(self, *, text: str, tool_calls: int, reasoning: str = "") -> None:
        """A model call returned ``text`` (and ``reasoning``) asking for ``tool_calls`` tools.

        With tool calls the text (after the reasoning) is the thought of their steps; without, the reasoning
        (if any) is a thought-only step at once and the text is held back (thought-only step or final answer).
        """
        with self._lock:
            self.model_started()
            self._new_turn()
            if tool_calls:
                self._thought = "\n\n".join(t for t in (reasoning, text) if t)
            else:
                if reasoning:
                    self._thought_only(reasoning)
                self._pending = text

    def tool_step(self, action: str, arguments: Mapping[str, Any] | None, observation: str,
                  subtrace: AgentSession | DocRagSession | GraphRagSession | NullSession | None = None) -> str:
        """Record one tool call of the current turn (thought = the turn's text); return its Analysis IRI.

        ``subtrace`` is the session the tool ran: a Document RAG query, or another agent (its run
        should be finished first, so the step's sub-trace has its Conclusion).
        """
        with self._lock:
            iri = self._step(thought=self._thought, action=action, arguments=arguments, observation=observation,
                             subtrace=subtrace)
            self._current.append(self.session.iterations)
            return iri

    def finish(self, *, answer: str | None = None, error: BaseException | str | None = None) -> str:
        """Record the Conclusion once: the error if any, else the held-back text, else ``answer``; return its IRI."""
        with self._lock:
            if self.finished:
                return ""
            self.finished = True
            if error is not None:
                self.model_started()
                final = error_text(error)
            elif self._pending is not None:
                final, self._pending = self._pending, None
            else:
                final = answer or ""
            self.answer = final
            return self.session.conclude(final)

    # -- internals ---------------------------------------------------------

    def _new_turn(self) -> None:
        if self._current:
            self._previous, self._current = self._current, []
        self._thought = ""

    def _used(self) -> Sequence[int]:
        n = self.session.iterations + 1
        return () if self._previous in ([], [n - 1]) else tuple(self._previous)

    def _step(self, **step: Any) -> str:
        return self.session.iteration(used=self._used(), **step)

    def _thought_only(self, text: str) -> None:
        self._new_turn()
        self._step(thought=text)
        self._previous, self._current = [self.session.iterations], []


F = TypeVar("F", bound=Callable[..., Any])


def guarded(method: F) -> F:
    """Run an adapter callback; any exception is counted and logged once (``self._guard``), never raised.

    :param method: a callback of an object with a :class:`Guard` in ``_guard``.
    :returns: the same callback, returning ``None`` whatever happens inside.
    """

    @wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the adapter must never break the agent
            self._guard.failed(method.__name__, exc)

    return cast(F, run)
