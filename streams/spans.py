"""The pure span -> event translation: ``step(state, spans, now) -> (state, events)``.

No I/O, no random ids: the state of one trace and the span records of one
spans-topic message (:func:`provstream.codec.otlp.span_records`) in, the new
state and the provstream :class:`~provstream.events.Event` s out, with ids
derived from the trace id and span ids (a re-sent span changes nothing; a
replay of the spans topic gives the same events).

Mapping (GenAI semantic conventions, OpenInference equivalents in brackets;
the table is in ``docs/integrations.md``):

* every ``invoke_agent`` span [``AGENT``] is one agent session, id
  ``uuid5(NAMESPACE, "<trace id>/<span id>")``; scope from the resource
  attributes ``provstream.user`` / ``provstream.collection``, else the
  settings' defaults; the Question keeps ``gen_ai.conversation.id``
  [``session.id``] and ``gen_ai.agent.name`` [``agent.name``] as its
  ``conversation_id`` / ``agent_name``;
* question: the last ``user`` message of the agent span's
  ``gen_ai.input.messages``, else of its first ``chat`` span, else
  ``input.value``;
* steps, in start-time order over the agent span's subtree (a nested agent's
  subtree belongs to that agent): each tool call a ``chat`` [``LLM``] span's
  output requests is one step (action ``gen_ai.tool.name``, arguments
  ``gen_ai.tool.call.arguments``, observation ``gen_ai.tool.call.result`` of
  the ``execute_tool`` [``TOOL``] span matched by ``gen_ai.tool.call.id``,
  else by order), its thought the text of that output (first call only); a
  text-only output that is not the final answer is a thought-only step; an
  ``execute_tool`` span no output asked for is a step of its own;
* an ``invoke_agent`` [``AGENT``] span under a tool call (an agent used as a
  tool) is the step's agent sub-trace (the step derives from that session's
  Conclusion); else a ``retrieval`` [``RETRIEVER``] span under it is a DocRAG
  session linked from that step (chunks: document ids, else ``sha256:`` of
  their text);
* conclusion: the final assistant text of the agent span's
  ``gen_ai.output.messages`` [``output.value``], else of the last ``chat``.

With ``PROVSTREAM_ENCRYPT=1`` the receiver has sealed the texts
(:mod:`provstream.codec.otlp_seal`) so that this module reads them unopened:
messages keep their structure in clear with one sealed text each, sealed
tool arguments are passed through as the step's arguments
(:func:`~provstream.codec.otlp.arguments_text`), and equal texts of a trace
are equal sealed strings (the answer comparison below works on them).

Spans end before their parents, so an SDK exports an agent's children
before the agent span: a session is translated as soon as its agent span
arrives after at least one of its descendants. An agent span that arrives
first (spans exported out of order) waits until the trace has had no new
span for ``settle_s`` (:func:`step` with no spans, from the worker's timer).
Spans of no known kind, and spans left outside every agent once a trace
settled, are counted as unmapped; spans of an agent already translated are
counted as late. Neither is an error.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from provstream.codec.otlp import arguments_text, chunk_id, kind_of, scope_names
from provstream.codec.otlp import text_of as _str
from provstream.core import events as ev
from provstream.core.vocab import Mechanism

NAMESPACE = uuid.UUID("6f1c1d52-3c1e-5b8e-9a57-0b5d7a1f0e21")  # provstream OTLP ids (fixed for ever)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_OI_MESSAGE = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
_OI_TOOL_CALL = re.compile(r"^tool_calls\.(\d+)\.tool_call\.(id|function\.name|function\.arguments)$")
_OI_CONTENT = re.compile(r"^contents\.(\d+)\.message_content\.text$")
_OI_DOCUMENT = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(id|content)$")

State = dict[str, Any]
Record = dict[str, Any]


@dataclass(frozen=True)
class Scope:
    """The scope a session gets when its resource names none (the settings' ``user`` / ``collection``)."""

    user: str = "trustgraph"
    collection: str = "default"


@dataclass
class Translated:
    """What one :func:`step` gives: the trace's new state and the events to produce, in order.

    ``unmapped``: spans counted as unmappable by this call; ``late``: spans that arrived after
    their agent session was translated; ``duplicates``: re-sent spans (ignored).
    """

    state: State
    events: list[ev.Event] = field(default_factory=list)
    unmapped: int = 0
    late: int = 0
    duplicates: int = 0


def session_id(trace_id: str, span_id: str) -> str:
    """The session id of the agent (or retrieval) span ``span_id`` of trace ``trace_id`` (hex ids).

    >>> session_id("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")
    'fea7c50a-328c-5cd2-a67d-74dd58c5a1c5'
    """
    return str(uuid.uuid5(NAMESPACE, f"{trace_id}/{span_id}"))


def event_id(session: str, step_key: str) -> str:
    """The event id of step ``step_key`` (``question``, ``i3``, ``final``, ...) of ``session``."""
    return str(uuid.uuid5(NAMESPACE, f"{session}#{step_key}"))


def step(state: State | None, records: Iterable[Record], now: float, *, scope: Scope = Scope(),
         settle_s: float = 3.0) -> Translated:
    """Add one message's spans of a trace to its state; return the events now complete.

    :param state: the trace's state (``None`` for a trace not seen yet); not modified
    :param records: span records of this trace (:func:`provstream.codec.otlp.span_records`); none for a timer tick
    :param now: the current time (seconds since the epoch): when the spans arrived, or the tick
    :param scope: user and collection for sessions whose resource names none
    :param settle_s: how long an out-of-order trace waits for more spans before it is translated
    :returns: the new state (JSON-serialisable) and the events to produce, in order

    >>> step(None, [], 0.0).events
    []
    """
    st: State = _copy(state)
    spans: dict[str, Record] = st["spans"]
    out = Translated(st)
    for r in records:
        sid = r["id"]
        if sid in spans:
            out.duplicates += 1
            continue
        st["n"] += 1
        kind = kind_of(r["a"])
        spans[sid] = {"p": r["p"], "k": kind, "s": r["s"], "e": r["e"], "n": r.get("n", ""),
                      "a": r["a"], "u": r.get("u", ""), "c": r.get("c", ""), "o": st["n"]}
        st["last"] = now
        if kind == "other":
            out.unmapped += 1
        elif _owner_done(st, sid):
            out.late += 1
    st["t"] = st["t"] or next((r["t"] for r in records), "")
    settled = bool(spans) and now - st["last"] >= settle_s
    children = _children(spans)
    for sid in sorted((s for s, r in spans.items() if r["k"] == "agent"), key=lambda s: spans[s]["o"]):
        if sid in st["done"]:
            continue
        if settled or _natural_order(spans, children, sid):
            out.events.extend(_session_events(st["t"], spans, children, sid, scope))
            st["done"].append(sid)
    if settled and not st["counted"]:
        st["counted"] = True
        out.unmapped += _outside_agents(spans)
    if out.events and not pending(st):
        _compact(st)
    return out


def _compact(st: State) -> None:
    """Once every session of a trace is translated, keep only what duplicate and late spans are told by."""
    st["spans"] = {sid: {**r, "a": {}} for sid, r in st["spans"].items()}
    st["counted"] = True  # nothing is left to count: the rest arrives late


def _copy(state: State | None) -> State:
    if state is None:
        return {"t": "", "spans": {}, "done": [], "n": 0, "last": 0.0, "counted": False}
    return {**state, "spans": dict(state["spans"]), "done": list(state["done"])}


def pending(state: State) -> bool:
    """Whether ``state`` still has an agent session to translate (the worker's timer ticks such traces only)."""
    return any(r["k"] == "agent" and s not in state["done"] for s, r in state["spans"].items()) \
        or (bool(state["spans"]) and not state["counted"])


def _children(spans: Mapping[str, Record]) -> dict[str, list[str]]:
    children: dict[str, list[str]] = {}
    for sid, r in spans.items():
        if r["p"]:
            children.setdefault(r["p"], []).append(sid)
    for kids in children.values():
        kids.sort(key=lambda s: (spans[s]["s"], s))
    return children


def _owner_done(st: State, sid: str) -> bool:
    """Whether the nearest agent at or above ``sid`` (by parent ids known so far) was already translated."""
    spans, seen = st["spans"], set()
    current: str | None = st["spans"][sid]["p"]
    while current and current in spans and current not in seen:
        seen.add(current)
        if spans[current]["k"] == "agent":
            return current in st["done"]
        current = spans[current]["p"]
    return False


def _descendants(children: Mapping[str, list[str]], root: str) -> list[str]:
    out, stack = [], list(children.get(root, ()))
    while stack:
        s = stack.pop()
        out.append(s)
        stack.extend(children.get(s, ()))
    return out


def _natural_order(spans: Mapping[str, Record], children: Mapping[str, list[str]], agent: str) -> bool:
    """The agent span came after every descendant seen, there is one, and what the chat spans say is there.

    Children-before-parents order; with content capture on, also: each ``chat`` span's input holds as many
    assistant messages as there are earlier ``chat`` spans, and every tool call with an id has its
    ``execute_tool`` span (a gap in a shuffled export then waits for the trace to settle).
    """
    below = _descendants(children, agent)
    if not below or max(spans[s]["o"] for s in below) > spans[agent]["o"]:
        return False
    own = sorted((s for s in _subtree(spans, children, agent)), key=lambda s: (spans[s]["s"], spans[s]["o"]))
    chats = [s for s in own if spans[s]["k"] == "chat"]
    call_ids = {_tool_call_id(spans[s]["a"]) for s in own if spans[s]["k"] == "tool"}
    for i, c in enumerate(chats):
        history = _messages(spans[c]["a"], "input")
        if history is not None and sum(1 for m in history if m.get("role") == "assistant") != i:
            return False
        output = _messages(spans[c]["a"], "output")
        if i == len(chats) - 1 and output is not None and _tool_calls(output):
            return False  # the last chat seen asks for tools: the one with the answer has not arrived
        if any(call_id and call_id not in call_ids for call_id, _, _ in _tool_calls(_messages(spans[c]["a"],
                                                                                              "output"))):
            return False
    return True


def _outside_agents(spans: Mapping[str, Record]) -> int:
    """Spans of a known kind with no agent span at or above them."""
    count = 0
    for r in spans.values():
        if r["k"] in ("other", "agent"):
            continue
        current, hops = r["p"], 0
        while current and current in spans and spans[current]["k"] != "agent" and hops < 10_000:
            current, hops = spans[current]["p"], hops + 1
        if not (current and current in spans and spans[current]["k"] == "agent"):
            count += 1
    return count


# -- one agent session ----------------------------------------------------------

@dataclass
class _Step:
    key: tuple[int, int, str]
    start: int
    thought: str = ""
    action: str = ""
    arguments: str = "{}"  # canonical JSON text (arguments_text), or sealed by the receiver
    observation: str = ""
    tool: str | None = None  # the matched execute_tool span


def _subtree(spans: Mapping[str, Record], children: Mapping[str, list[str]], agent: str) -> list[str]:
    """The agent's descendants, not entering nested agents (their spans are theirs)."""
    out, stack = [], list(children.get(agent, ()))
    while stack:
        s = stack.pop()
        out.append(s)
        if spans[s]["k"] != "agent":
            stack.extend(children.get(s, ()))
    return out


def _session_events(trace: str, spans: Mapping[str, Record], children: Mapping[str, list[str]], agent: str,
                    default: Scope) -> list[ev.Event]:
    a = spans[agent]
    sid = session_id(trace, agent)
    user, collection = scope_names(a["u"], a["c"], default.user, default.collection)
    below = _subtree(spans, children, agent)
    order = sorted(below, key=lambda s: (spans[s]["s"], spans[s]["o"]))
    chats = [s for s in order if spans[s]["k"] == "chat"]
    tools = [s for s in order if spans[s]["k"] == "tool"]

    question = _last_user_text(_messages(a["a"], "input"))
    if question is None and chats:
        question = _last_user_text(_messages(spans[chats[0]]["a"], "input"))
    if question is None:
        question = _str(a["a"].get("input.value"))
    agent_answer = _assistant_text(_messages(a["a"], "output"))
    if agent_answer is None and "output.value" in a["a"]:
        agent_answer = _str(a["a"]["output.value"])

    steps: list[_Step] = []
    used: set[str] = set()
    final_text: str | None = None
    for i, c in enumerate(chats):
        out = _messages(spans[c]["a"], "output")
        text = _assistant_text(out) or ""
        calls = _tool_calls(out)
        start = spans[c]["s"]
        if not calls:
            if i == len(chats) - 1 and (agent_answer is None or agent_answer == text):
                final_text = text
            elif text:
                steps.append(_Step((start, 0, c), start, thought=text))
            continue
        for j, (call_id, name, arguments) in enumerate(calls):
            tool = _match(spans, tools, used, call_id)
            s = _Step((start, j, c), start, thought=text if j == 0 else "", action=name,
                      arguments=arguments_text(arguments))
            if tool is not None:
                used.add(tool)
                _fill_from_tool(s, spans[tool]["a"], spans[tool]["n"])
                s.tool = tool
            steps.append(s)
    for t in tools:
        if t not in used:
            s = _Step((spans[t]["s"], 0, t), spans[t]["s"])
            _fill_from_tool(s, spans[t]["a"], spans[t]["n"])
            s.tool = t
            steps.append(s)
    steps.sort(key=lambda s: s.key)
    answer = agent_answer if agent_answer is not None else (final_text or "")

    conversation = _str(a["a"].get("gen_ai.conversation.id", a["a"].get("session.id"))) or None
    agent_name = _str(a["a"].get("gen_ai.agent.name", a["a"].get("agent.name"))) or None
    events = [_event(sid, "question", 0, a["s"], ev.AgentQuestion(question, conversation, agent_name), user,
                     collection)]
    subs: list[ev.Event] = []
    for n, s in enumerate(steps, start=1):
        subtrace = None
        if s.tool is not None:
            under = sorted(_subtree(spans, children, s.tool), key=lambda d: (spans[d]["s"], spans[d]["o"]))
            agent_span = next((d for d in under if spans[d]["k"] == "agent"), None)
            retrieval = next((d for d in under if spans[d]["k"] == "retrieval"), None)
            if agent_span is not None:  # an agent used as a tool: its own session, translated on its own
                subtrace = ev.SubTrace(Mechanism.AGENT, session_id(trace, agent_span))
            elif retrieval is not None:
                subs.extend(_docrag_events(trace, spans[retrieval], retrieval, s.observation, user, collection))
                subtrace = ev.SubTrace(Mechanism.DOCRAG, session_id(trace, retrieval))
        events.append(_event(sid, f"i{n}", n, s.start, ev.AgentIteration(
            iteration=n, thought=s.thought, action=s.action, arguments=s.arguments,
            observation=s.observation, subtrace=subtrace), user, collection))
    events.append(_event(sid, "final", len(steps) + 1, a["e"] or a["s"],
                         ev.AgentConclusion(answer, len(steps)), user, collection))
    return subs + events


def _docrag_events(trace: str, r: Record, span: str, synthesis: str, user: str, collection: str) -> list[ev.Event]:
    sid = session_id(trace, span)
    attrs = r["a"]
    query = _str(attrs.get("gen_ai.retrieval.query.text", attrs.get("input.value", "")))
    chunks = tuple(chunk_id(d) for d in _documents(attrs))
    return [
        _event(sid, "question", 0, r["s"], ev.DocRagQuestion(query), user, collection, Mechanism.DOCRAG),
        _event(sid, "exploration", 1, r["s"], ev.DocRagExploration(len(chunks), chunks), user, collection,
               Mechanism.DOCRAG),
        _event(sid, "synthesis", 2, r["e"] or r["s"], ev.DocRagSynthesis(synthesis), user, collection,
               Mechanism.DOCRAG),
    ]


def _event(session: str, key: str, seq: int, ns: int, payload: ev.Payload, user: str, collection: str,
           mechanism: Mechanism = Mechanism.AGENT) -> ev.Event:
    return ev.Event(event_id(session, key), session, mechanism, seq, time_of(ns), payload, user, collection)


def time_of(ns: int) -> datetime:
    """A span timestamp (ns since the epoch) as an aware UTC datetime, to the microsecond.

    >>> time_of(1_700_000_000_123_456_789).isoformat()
    '2023-11-14T22:13:20.123456+00:00'
    """
    return _EPOCH + timedelta(microseconds=ns // 1000)


# -- attributes -------------------------------------------------------------------

def _messages(attrs: Mapping[str, Any], direction: str) -> list[dict[str, Any]] | None:
    """``gen_ai.{input,output}.messages`` (JSON), else OpenInference ``llm.{input,output}_messages.*``."""
    raw = attrs.get(f"gen_ai.{direction}.messages")
    if isinstance(raw, str):
        return _parsed_messages(raw)
    if isinstance(raw, list):
        return [m for m in raw if isinstance(m, dict)]
    if "openinference.span.kind" not in attrs:
        return None
    flat: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        m = _OI_MESSAGE.match(key)
        if m and m.group(1) == direction:
            flat.setdefault(int(m.group(2)), {})[m.group(3)] = value
    if not flat:
        return None
    return [_oi_message(flat[i]) for i in sorted(flat)]


@lru_cache(maxsize=4096)
def _parsed_messages(raw: str) -> list[dict[str, Any]] | None:
    """Messages JSON text, parsed once (a span's messages are read several times; callers never modify them)."""
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return [m for m in value if isinstance(m, dict)] if isinstance(value, list) else None


def _oi_message(fields: Mapping[str, Any]) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if isinstance(fields.get("content"), str):
        parts.append({"type": "text", "content": fields["content"]})
    contents: dict[int, str] = {}
    calls: dict[int, dict[str, Any]] = {}
    for key, value in fields.items():
        if m := _OI_CONTENT.match(key):
            contents[int(m.group(1))] = _str(value)
        elif m := _OI_TOOL_CALL.match(key):
            name = {"id": "id", "function.name": "name", "function.arguments": "arguments"}[m.group(2)]
            calls.setdefault(int(m.group(1)), {"type": "tool_call"})[name] = value
    parts += [{"type": "text", "content": contents[i]} for i in sorted(contents)]
    parts += [calls[i] for i in sorted(calls)]
    return {"role": fields.get("role", ""), "parts": parts}


def _texts(message: Mapping[str, Any]) -> list[str]:
    if isinstance(message.get("content"), str):
        return [message["content"]]
    return [p["content"] for p in message.get("parts") or () if isinstance(p, dict) and p.get("type") == "text"
            and isinstance(p.get("content"), str)]


def _last_user_text(messages: list[dict[str, Any]] | None) -> str | None:
    if messages is None:
        return None
    users = [m for m in messages if m.get("role") == "user"]
    return "\n".join(_texts(users[-1])) if users else None


def _assistant_text(messages: list[dict[str, Any]] | None) -> str | None:
    """The text of the first output message (the first choice), ``None`` if there is none."""
    if not messages:
        return None
    return "\n".join(_texts(messages[0]))


def _tool_calls(messages: list[dict[str, Any]] | None) -> list[tuple[str, str, Any]]:
    if not messages:
        return []
    return [(_str(p.get("id")), _str(p.get("name")), p.get("arguments"))
            for p in messages[0].get("parts") or () if isinstance(p, dict) and p.get("type") == "tool_call"]


def _match(spans: Mapping[str, Record], tools: list[str], used: set[str], call_id: str) -> str | None:
    """The tool span of a call: same ``gen_ai.tool.call.id``, else the next unused one (start order)."""
    if call_id:
        for t in tools:
            if t not in used and _tool_call_id(spans[t]["a"]) == call_id:
                return t
    return next((t for t in tools if t not in used and not _claimed_elsewhere(spans[t]["a"], call_id)), None)


def _tool_call_id(attrs: Mapping[str, Any]) -> str:
    return _str(attrs.get("gen_ai.tool.call.id", attrs.get("tool_call.id", "")))


def _claimed_elsewhere(attrs: Mapping[str, Any], call_id: str) -> bool:
    """A tool span with a call id different from the call's cannot be matched by order."""
    own = _tool_call_id(attrs)
    return bool(own and call_id and own != call_id)


def _fill_from_tool(s: _Step, attrs: Mapping[str, Any], span_name: str) -> None:
    name = attrs.get("gen_ai.tool.name", attrs.get("tool.name"))
    if name is None and not s.action and span_name.startswith("execute_tool "):
        name = span_name.removeprefix("execute_tool ")
    if name is not None:
        s.action = _str(name)
    args = attrs.get("gen_ai.tool.call.arguments",
                     attrs.get("input.value") if attrs.get("openinference.span.kind") == "TOOL" else None)
    if args is not None:
        s.arguments = arguments_text(args)
    result = attrs.get("gen_ai.tool.call.result",
                       attrs.get("output.value") if attrs.get("openinference.span.kind") == "TOOL" else None)
    if result is not None:
        s.observation = _str(result)


def _documents(attrs: Mapping[str, Any]) -> list[dict[str, Any]]:
    raw = attrs.get("gen_ai.retrieval.documents")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raw = None
    if isinstance(raw, list):
        return [d if isinstance(d, dict) else {"content": _str(d)} for d in raw]
    flat: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if m := _OI_DOCUMENT.match(key):
            flat.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [flat[i] for i in sorted(flat)]
