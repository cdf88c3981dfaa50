"""Record OpenAI Agents SDK runs step by step: :class:`ProvenanceProcessor`.

One line added to an existing agent program::

    from agents import add_trace_processor
    from provstream import Emitter, Settings
    from provstream.connectors.openai_agents import ProvenanceProcessor

    emitter = Emitter(Settings.from_env()).open()
    add_trace_processor(ProvenanceProcessor(emitter))
    result = await Runner.run(agent, "Who directed Alien?")   # recorded as it runs

Mapping (see ``docs/integrations.md``), from the SDK's tracing spans:

* a trace is a session; its Question is the last user message of the first
  model call's input (the trace's workflow name when that is not traced);
* a model call (``GenerationSpanData`` in Chat Completions form, or
  ``ResponseSpanData`` with the Responses ``output`` items) is a turn: its
  text (after its reasoning summary) is the thought of the tool steps it asks
  for; a turn with text and no tool call is the final answer (the
  Conclusion, at the trace's end) unless another model call follows;
* each function span (``FunctionSpanData``) is an Analysis step: action = the
  tool name, arguments = its JSON input, observation = its output (or error);
* a handoff (``HandoffSpanData``) is a step ``handoff`` with
  ``{"from_agent", "to_agent"}`` whose agent sub-trace is a session of its
  own for the receiving agent (opened at the handoff, its Question the
  handing-off session's question, its steps those of the receiving agent's
  span); a handoff from there nests again;
* an agent used as a tool (an agent span inside a function span) is an agent
  session of its own and the agent sub-trace of that tool's step;
* every session's ``agent_name`` is its agent's name (the first agent span's,
  the handoff's ``to_agent``, the tool agent's);
* Conclusions: a session that handed off concludes with the answer of the
  session it handed off to (so, at the trace's end, every session of a chain
  of handoffs carries the run's final output and none is left open); a run
  that fails (an error on a model, agent, turn or task span) ends its session
  with the error, and the sessions that handed off to it with the same text.

Tool inputs/outputs and model texts are only in the spans when the run
traces sensitive data (``RunConfig.trace_include_sensitive_data``, on by
default). Callbacks only append to the emitter's buffer, never raise into the
run (a failure is logged once and counted in :attr:`ProvenanceProcessor.failures`)
and keep per-trace state behind a lock, so concurrent runs are safe.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.tracing import TracingProcessor

from provstream.connectors._recording import RECENT, Guard, Recent, RunRecorder, error_text, guarded, json_arguments
from provstream.connectors.emitter import AgentSession, Emitter

__all__ = ["ProvenanceProcessor"]

log = logging.getLogger(__name__)
_MODEL_SPANS = ("generation", "response")
_RUN_SPANS = ("generation", "response", "agent", "task", "turn")  # an error on one of these fails the run



@dataclass
class _Context:
    """One agent session inside a trace: the trace's own, an agent used as a tool, or the target of a handoff."""

    name: str  # the trace's workflow name (question of last resort)
    key: str  # the trace id; ``trace id/function span id`` (agent as a tool); ``trace id/handoff span id``
    slot: str | None = None  # parent span id of the agent spans that run it (the SDK's task span, a tool's, ...)
    agent_name: str | None = None
    recorder: RunRecorder | None = None  # opened at the first model call (its input holds the question)
    question: str = ""
    error: str | None = None
    handoffs: list[_Context] = field(default_factory=list)  # sessions it handed off to (its sub-traces)


@dataclass
class _Span:
    kind: str
    span_id: str
    context: _Context
    tool: _Span | None = None  # the outermost function span of ``context`` this span is inside (itself for it)
    nested: list[_Context] = field(default_factory=list)


@dataclass
class _Trace:
    main: _Context
    spans: dict[str, _Span] = field(default_factory=dict)
    handed_to: dict[str, _Context] = field(default_factory=dict)  # slot -> session the next agent span there runs


class ProvenanceProcessor(TracingProcessor):
    """An Agents SDK tracing processor that records each trace as a provenance session, step by step.

    Args:
        emitter: the :class:`~provstream.connectors.emitter.Emitter` the steps go through.
        user: the sessions' user (default: the emitter's settings).
        collection: the sessions' collection (default: the emitter's settings).

    Attributes:
        sessions: trace id (or ``trace id/span id`` of an agent used as a tool) -> session URI (the last 1,024).
        links: ``(Analysis IRI of a tool step, URI of the agent session the tool ran)`` pairs (the last 1,024).
        last_session: the URI of the most recently opened trace session.

    Example::

        processor = ProvenanceProcessor(emitter)
        add_trace_processor(processor)          # or set_trace_processors([processor]) to keep only it
        await Runner.run(agent, "Who directed Alien?")
        processor.last_session                  # -> "urn:trustgraph:agent:..."
    """

    def __init__(self, emitter: Emitter, user: str | None = None, collection: str | None = None) -> None:
        self.emitter = emitter
        self.user = user
        self.collection = collection
        self.sessions: Recent[str, str] = Recent()
        self.links: deque[tuple[str, str]] = deque(maxlen=RECENT)
        self.last_session = ""
        self._traces: dict[str, _Trace] = {}
        self._lock = threading.Lock()
        self._guard = Guard(log)

    @property
    def failures(self) -> int:
        """How many callbacks failed to record their step (the first is logged)."""
        return self._guard.failures

    # -- TracingProcessor ----------------------------------------------------

    @guarded
    def on_trace_start(self, trace: Any) -> None:
        with self._lock:
            self._traces[trace.trace_id] = _Trace(_Context(str(trace.name or ""), trace.trace_id))

    @guarded
    def on_trace_end(self, trace: Any) -> None:
        with self._lock:
            state = self._traces.pop(trace.trace_id, None)
        if state is not None:
            self._finish(state.main)

    @guarded
    def on_span_start(self, span: Any) -> None:
        state = self._trace(span)
        if state is None:
            return
        kind = str(span.span_data.type)
        with self._lock:
            parent = state.spans.get(span.parent_id) if span.parent_id else None
        context, tool = (parent.context, parent.tool) if parent else (state.main, None)
        if kind == "agent":
            context, tool = self._agent_context(state, span, context, tool)
        current = _Span(kind, span.span_id, context, tool)
        if kind == "function" and tool is None:
            current.tool = current
        with self._lock:
            state.spans[span.span_id] = current
        if kind in _MODEL_SPANS and tool is None and context.recorder is not None:
            context.recorder.model_started()

    @guarded
    def on_span_end(self, span: Any) -> None:
        state = self._trace(span)
        if state is None:
            return
        with self._lock:
            current = state.spans.pop(span.span_id, None)
        if current is None or (current.tool is not None and current.tool is not current):
            return  # unknown, or inside a tool (part of that tool's step)
        data, error = span.span_data, span.error
        if error and current.kind in _RUN_SPANS and current.context.error is None:  # the first is the cause
            current.context.error = str(error.get("message") or error)
        if current.kind in _MODEL_SPANS and not error:
            self._model_turn(current.context, data)
        elif current.kind == "function":
            self._tool_step(current, data, error)
        elif current.kind == "handoff":
            self._handoff(state, current, data)

    def shutdown(self) -> None:
        """Nothing of its own to release: the emitter's owner closes it."""

    def force_flush(self) -> None:
        """Wait until the steps recorded so far are acknowledged by Kafka (the emitter's ``flush``)."""
        try:
            self.emitter.flush()
        except Exception as exc:  # noqa: BLE001
            self._guard.failed("force_flush", exc)

    # -- internals -------------------------------------------------------------

    def _trace(self, span: Any) -> _Trace | None:
        with self._lock:
            return self._traces.get(span.trace_id)

    def _agent_context(self, state: _Trace, span: Any, context: _Context,
                       tool: _Span | None) -> tuple[_Context, _Span | None]:
        """The session an agent span runs in: a handoff's target, a new one (agent as a tool), else the caller's."""
        slot = str(span.parent_id or "")
        name = str(getattr(span.span_data, "name", "") or "") or None
        with self._lock:
            target = state.handed_to.pop(slot, None)
        if target is not None:
            return target, None
        if tool is not None:  # an agent used as a tool: a session of its own
            nested = _Context(state.main.name, f"{span.trace_id}/{tool.span_id}", slot, name)
            tool.nested.append(nested)
            return nested, None
        if context.slot is None:  # the first agent span of the trace's own session
            context.slot = slot
            if context.recorder is None:
                context.agent_name = name
        return context, tool

    def _handoff(self, state: _Trace, current: _Span, data: Any) -> None:
        """A step ``handoff`` whose sub-trace is the receiving agent's session, opened now."""
        source = current.context
        recorder = self._open(source, None)
        target = _Context(state.main.name, f"{state.main.key}/{current.span_id}", source.slot,
                          str(data.to_agent or "") or None)
        sub = self._open(target, source.question)
        source.handoffs.append(target)
        with self._lock:
            state.handed_to[source.slot or ""] = target
        recorder.tool_step("handoff", {"from_agent": data.from_agent, "to_agent": data.to_agent},
                           f"{data.from_agent} handed the conversation over to {data.to_agent}",
                           subtrace=sub.session if isinstance(sub.session, AgentSession) else None)

    def _open(self, context: _Context, model_input: Any) -> RunRecorder:
        if context.recorder is None:
            question = _question(model_input) or context.name
            session = self.emitter.agent(question, user=self.user, collection=self.collection,
                                         agent_name=context.agent_name)
            context.question = question
            context.recorder = RunRecorder(session)
            self.sessions[context.key] = context.recorder.uri
            if "/" not in context.key:
                self.last_session = context.recorder.uri
        return context.recorder

    def _model_turn(self, context: _Context, data: Any) -> None:
        model_input, items = _model_io(data)
        recorder = self._open(context, model_input)
        text, reasoning, calls = _turn(items)
        recorder.model_turn(text=text, reasoning=reasoning, tool_calls=calls)

    def _tool_step(self, current: _Span, data: Any, error: Any) -> None:
        recorder = self._open(current.context, None)
        output = data.output
        observation = error_text(str(error.get("message") or error)) if error and output is None \
            else ("" if output is None else str(output))
        subs = []
        for nested in current.nested:
            subs.append(self._open(nested, None))
            self._finish(nested, answer=observation)
        sessions = [s.session for s in subs if isinstance(s.session, AgentSession)]
        step = recorder.tool_step(str(data.name), json_arguments(data.input), observation,
                                  subtrace=sessions[-1] if sessions else None)
        for sub in subs:
            if step and sub.uri:
                self.links.append((step, sub.uri))

    def _finish(self, context: _Context, answer: str | None = None) -> None:
        """Conclude ``context``: the sessions it handed off to first, then it with the answer the last one gave."""
        recorder = self._open(context, None)
        for target in context.handoffs:
            self._finish(target, answer)
        last = context.handoffs[-1].recorder if context.handoffs else None
        if last is not None and last.answer is not None:
            answer = last.answer
        recorder.finish(answer=answer, error=context.error)


# -- reading span data -------------------------------------------------------------

def _dump(item: Any) -> Any:
    return item.model_dump() if hasattr(item, "model_dump") else item


def _model_io(data: Any) -> tuple[Any, list[Any]]:
    """``(input, output items)`` of a generation span (Chat Completions) or a response span (Responses)."""
    if getattr(data, "type", "") == "response":
        response = getattr(data, "response", None)
        return getattr(data, "input", None), [_dump(o) for o in (getattr(response, "output", None) or [])]
    return getattr(data, "input", None), [_dump(o) for o in (getattr(data, "output", None) or [])]


def _content_text(content: Any, kinds: Sequence[str] = ("output_text", "text", "input_text")) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") in kinds)
    return ""


def _turn(items: Sequence[Any]) -> tuple[str, str, int]:
    """``(text, reasoning, tool calls)`` of a model call's output items, either API's form."""
    texts: list[str] = []
    reasoning: list[str] = []
    calls = 0
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "reasoning":  # Responses: a reasoning item with summary parts
            reasoning += [str(s.get("text", "")) for s in item.get("summary") or () if isinstance(s, Mapping)]
        elif kind in ("function_call", "computer_call", "custom_tool_call", "file_search_call", "web_search_call"):
            calls += 1
        elif kind == "message" or item.get("role") == "assistant":  # Responses message or Chat Completions message
            texts.append(_content_text(item.get("content")))
            calls += len(item.get("tool_calls") or ())
            for key in ("reasoning_content", "reasoning"):
                if isinstance(item.get(key), str) and item[key]:
                    reasoning.append(item[key])
    return "".join(texts), "\n".join(r for r in reasoning if r), calls


def _question(model_input: Any) -> str:
    """The last user message of a model call's input (a string input is the question itself)."""
    if isinstance(model_input, str):
        return model_input
    if isinstance(model_input, Sequence):
        for item in reversed(model_input):
            item = _dump(item)
            if isinstance(item, Mapping) and item.get("role") == "user":
                return _content_text(item.get("content"))
    return ""
