"""OTLP test helpers: ReAct trajectories as GenAI-convention spans from the real OpenTelemetry SDK, and the
trace the emitter records for the same steps (the expectation every OTLP test compares against).

A :class:`Run` is a question, turns (one ``chat`` span each: a thought and the tool calls it requests) and an
answer; :func:`emit_run` records it with an SDK tracer at explicit, increasing times and returns the span ids;
:func:`expected_events` drives :class:`~provstream.connectors.emitter.Emitter` with the same steps (session ids
as the translation derives them, question times = the spans' start times) and returns its events.
"""

from __future__ import annotations

import json
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Tracer, set_span_in_context

from provstream.codec import records as wire
from provstream.codec.otlp import chunk_id
from provstream.connectors import emitter as emitter_module
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.core import events as ev
from provstream.core.fold import FoldState, fold
from provstream.core.trajectories import AgentTrajectory
from provstream.core.triples import Triple
from provstream.settings import Settings
from provstream.streams.spans import session_id, time_of

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z in ns (a multiple of 1000: microsecond-exact)


@dataclass
class Call:
    name: str
    arguments: dict[str, Any]
    result: str
    subagent: Run | None = None
    documents: tuple[dict[str, str], ...] | None = None  # a retrieval span under the tool span


@dataclass
class Turn:
    thought: str
    calls: list[Call] = field(default_factory=list)


@dataclass
class Run:
    question: str
    answer: str
    turns: list[Turn]


def run_of(t: AgentTrajectory) -> Run:
    """One turn per step: its thought, and its action (if any) as the one tool call."""
    return Run(t.question, t.answer, [
        Turn(s.thought, [Call(s.action, dict(s.arguments), s.observation)] if s.action else []) for s in t.steps])


def multi_tool(run: Run, k: int) -> Run:
    """Turn ``k`` also requests turn ``k+1``'s calls (in one chat output); turn ``k+1``'s thought is dropped."""
    turns = [replace(t, calls=list(t.calls)) for t in run.turns]
    turns[k].calls += turns[k + 1].calls
    del turns[k + 1]
    return replace(run, turns=turns)


def with_subagent(run: Run, k: int, sub: Run) -> Run:
    turns = [replace(t, calls=list(t.calls)) for t in run.turns]
    turns[k].calls[0] = replace(turns[k].calls[0], subagent=sub, result=sub.answer)
    return replace(run, turns=turns)


def with_retrieval(run: Run, k: int, documents: Sequence[dict[str, str]]) -> Run:
    turns = [replace(t, calls=list(t.calls)) for t in run.turns]
    turns[k].calls[0] = replace(turns[k].calls[0], documents=tuple(documents))
    return replace(run, turns=turns)


# -- spans ----------------------------------------------------------------------

class Clock:
    def __init__(self, start: int = T0) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1_000_000  # 1 ms
        return self.now


@dataclass
class Recorded:
    """The ids and start times of what :func:`emit_run` created (hex ids)."""

    trace: str
    agent: str
    start: int
    name: str = ""  # gen_ai.agent.name of the agent span
    conversation: str = ""  # gen_ai.conversation.id of the agent span
    retrievals: dict[tuple[int, int], tuple[str, int]] = field(default_factory=dict)  # (turn, call) -> (id, start)
    subagents: dict[tuple[int, int], Recorded] = field(default_factory=dict)


def _msg(role: str, parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    m: dict[str, Any] = {"role": role, "parts": parts}
    if finish:
        m["finish_reason"] = finish
    return m


def emit_run(tracer: Tracer, run: Run, clock: Clock, parent: Any = None, name: str = "react",
             conversation: str = "conv-1", content: bool = True) -> Recorded:
    """Record ``run`` as GenAI spans: ``invoke_agent`` > (``chat``, ``execute_tool`` [> ``retrieval`` |
    ``invoke_agent``])*, then a final ``chat`` with the answer. ``content=False``: no messages, arguments or
    results (content capture off)."""
    user = _msg("user", [{"type": "text", "content": run.question}])
    attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": name,
                             "gen_ai.conversation.id": conversation}
    if content:
        attrs["gen_ai.input.messages"] = json.dumps([user])
    agent = tracer.start_span(f"invoke_agent {name}", context=parent, start_time=clock(), attributes=attrs)
    ctx = set_span_in_context(agent)
    sc = agent.get_span_context()
    rec = Recorded(f"{sc.trace_id:032x}", f"{sc.span_id:016x}", agent.start_time or 0,  # type: ignore[attr-defined]
                   name, conversation)
    history = [user]
    for i, turn in enumerate(run.turns):
        parts: list[dict[str, Any]] = [{"type": "text", "content": turn.thought}] if turn.thought else []
        parts += [{"type": "tool_call", "id": f"call_{i}_{j}", "name": c.name, "arguments": c.arguments}
                  for j, c in enumerate(turn.calls)]
        out = _msg("assistant", parts, "tool_call" if turn.calls else "stop")
        chat_attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "react-fewshot"}
        if content:
            chat_attrs["gen_ai.input.messages"] = json.dumps(history)
            chat_attrs["gen_ai.output.messages"] = json.dumps([out])
        chat = tracer.start_span("chat react-fewshot", context=ctx, start_time=clock(), attributes=chat_attrs)
        chat.end(end_time=clock())
        history.append(out)
        for j, c in enumerate(turn.calls):
            tool_attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c.name,
                                          "gen_ai.tool.call.id": f"call_{i}_{j}"}
            if content:
                tool_attrs["gen_ai.tool.call.arguments"] = json.dumps(c.arguments)
                tool_attrs["gen_ai.tool.call.result"] = c.result
            tool = tracer.start_span(f"execute_tool {c.name}", context=ctx, start_time=clock(), attributes=tool_attrs)
            tctx = set_span_in_context(tool)
            if c.documents is not None:
                r = tracer.start_span("retrieval corpus", context=tctx, start_time=clock(), attributes={
                    "gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": "corpus",
                    "gen_ai.retrieval.query.text": str(c.arguments.get("input", "")),
                    "gen_ai.retrieval.documents": json.dumps(list(c.documents))})
                rec.retrievals[(i, j)] = (f"{r.get_span_context().span_id:016x}", r.start_time or 0)  # type: ignore
                r.end(end_time=clock())
            if c.subagent is not None:
                rec.subagents[(i, j)] = emit_run(tracer, c.subagent, clock, tctx, name=f"{name}-sub",
                                                 conversation=conversation, content=content)
            tool.end(end_time=clock())
            history.append(_msg("tool", [{"type": "tool_call_response", "id": f"call_{i}_{j}",
                                          "response": c.result}]))
    final = _msg("assistant", [{"type": "text", "content": run.answer}], "stop")
    chat_attrs = {"gen_ai.operation.name": "chat"}
    if content:
        chat_attrs["gen_ai.input.messages"] = json.dumps(history)
        chat_attrs["gen_ai.output.messages"] = json.dumps([final])
    tracer.start_span("chat react-fewshot", context=ctx, start_time=clock(), attributes=chat_attrs).end(
        end_time=clock())
    if content:
        agent.set_attribute("gen_ai.output.messages", json.dumps([final]))
    agent.end(end_time=clock())
    return rec


class Collected(SpanExporter):
    """An SDK exporter that keeps the finished spans (in end order), for re-export in any order."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


@contextmanager
def sdk_tracer(exporter: SpanExporter, settings: Settings | None = None) -> Iterator[Tracer]:
    """A tracer of a fresh SDK provider exporting each span as it ends (resource names the scope)."""
    attributes = {"service.name": "provstream-otlp-test"}
    if settings is not None:
        attributes |= {"provstream.user": settings.user, "provstream.collection": settings.collection}
    provider = TracerProvider(resource=Resource.create(attributes))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield provider.get_tracer("provstream.tests")
    finally:
        provider.shutdown()


# -- what the emitter records --------------------------------------------------

class _Frozen(datetime):
    at: datetime

    @classmethod
    def now(cls, tz: Any = None) -> datetime:  # type: ignore[override]
        return cls.at


def expected_events(run: Run, rec: Recorded, settings: Settings, monkeypatch: Any, content: bool = True) \
        -> list[ev.Event]:
    """The events :class:`Emitter` records for ``run`` (and its sub-runs), with the translation's session ids
    (never sealed: what the sink writes to Neo4j once it opened them)."""
    transport = MemoryTransport()
    monkeypatch.setattr(emitter_module, "datetime", _Frozen)
    with Emitter(replace(settings, encrypt=0), transport=transport) as emitter:  # the clear texts, as Neo4j shows
        _drive(emitter, run, rec, content)
    monkeypatch.undo()
    return [wire.decode_event(v) for _, v in transport.sent]


def _drive(emitter: Emitter, run: Run, rec: Recorded, content: bool) -> Any:
    """Record ``run`` (its sub-agents first: each is the sub-trace of the step that called it); return its session."""
    agents: dict[tuple[int, int], Any] = {}
    for sub_key, sub in rec.subagents.items():
        i, j = sub_key
        sub_run = run.turns[i].calls[j].subagent
        assert sub_run is not None
        agents[sub_key] = _drive(emitter, sub_run, sub, content)
    _Frozen.at = time_of(rec.start)
    a = emitter.agent(run.question if content else "", session_id=session_id(rec.trace, rec.agent),
                      conversation_id=rec.conversation, agent_name=rec.name)
    for i, turn in enumerate(run.turns):
        if not turn.calls:
            if content and turn.thought:
                a.iteration(thought=turn.thought)
            continue
        for j, c in enumerate(turn.calls):
            sub = agents.get((i, j))
            if (i, j) in rec.retrievals:
                rid, start = rec.retrievals[(i, j)]
                _Frozen.at = time_of(start)
                sub = emitter.docrag(str(c.arguments.get("input", "")), session_id=session_id(rec.trace, rid))
                assert c.documents is not None
                sub.explore(len(c.documents), [chunk_id(d) for d in c.documents])  # sha256: of the text if no id
                sub.synthesize(c.result if content else "")
            if content:
                a.iteration(thought=turn.thought if j == 0 else "", action=c.name, arguments=c.arguments,
                            observation=c.result, subtrace=sub)
            else:
                a.iteration(action=c.name, subtrace=sub)
    a.conclude(run.answer if content else "")
    return a


def fold_triples(events: Sequence[ev.Event]) -> set[Triple]:
    """The triples the fold makes of ``events`` (in any order: each step's triples depend on it alone)."""
    states: dict[str, FoldState] = {}
    out: set[Triple] = set()
    for e in events:
        states[e.session_id], msg = fold(states.get(e.session_id), e)
        out.update(msg.triples)
    return out


@contextmanager
def provstream_process(argv: list[str], env: dict[str, str], ready: str,
                       timeout: float = 90) -> Iterator[subprocess.Popen[str]]:
    """``python -m provstream ARGV`` until its stdout says ``ready``; always stopped (SIGTERM, then SIGKILL)."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([sys.executable, "-m", "provstream", *argv], env=env, stdout=subprocess.PIPE,
                                stderr=err, text=True, stdin=subprocess.DEVNULL)
        try:
            assert proc.stdout is not None
            deadline = time.monotonic() + timeout
            line = ""
            while ready not in line:
                left = deadline - time.monotonic()
                if left <= 0 or proc.poll() is not None:
                    err.seek(0)
                    raise AssertionError(f"{argv[0]} not ready: {line!r} {err.read()[-3000:]}")
                if select.select([proc.stdout], [], [], min(left, 1))[0]:
                    line = proc.stdout.readline()
            yield proc
        except BaseException:
            err.seek(0)
            print(f"--- {argv[0]} stderr ---\n{err.read()[-5000:]}")
            raise
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)
            if proc.stdout is not None:
                proc.stdout.close()
