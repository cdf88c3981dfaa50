"""Two runs side by side: align the steps of two traces and say where they first diverge (pure).

Steps are aligned by position (an agent's ``i1`` with the other's ``i1``; a
RAG trace's exploration, focus and synthesis with the other's). A pair
*matches* when it has the same action and arguments (arguments compared as
JSON, so key order and spacing do not count); it is *the same* when, in
addition, its observation and thought are equal (``ignore_thoughts`` leaves
thoughts out). The runs are *equivalent* when they have the same mechanism,
question, steps and answer; sub-traces a step called are compared by their
answer. Session ids, IRIs and times never count.

Example::

    >>> from provstream.read.model import AgentTrace, Completeness, Conclusion, Question
    >>> from provstream.core.vocab import Mechanism
    >>> q = Question("urn:trustgraph:agent:a", Mechanism.AGENT, "a", "Why?")
    >>> r = Question("urn:trustgraph:agent:b", Mechanism.AGENT, "b", "Why?")
    >>> a = AgentTrace(q, Completeness(), conclusion=Conclusion("urn:trustgraph:agent:a/final", "42"))
    >>> b = AgentTrace(r, Completeness(), conclusion=Conclusion("urn:trustgraph:agent:b/final", "43"))
    >>> compare(a, b).equivalent
    False
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from provstream.read.model import AgentTrace, Analysis, RagTrace, Trace
from provstream.read.pictures import mermaid_label
from provstream.read.text import iso_time, truncate, visible


@dataclass(frozen=True, slots=True)
class Field:
    """One compared value of a step on each side (``None``: the side has no such step)."""

    name: str
    a: str | None
    b: str | None

    @property
    def same(self) -> bool:
        return self.a == self.b


@dataclass(frozen=True, slots=True)
class StepPair:
    """The n-th step of each run (``a`` / ``b`` its name there, ``None`` when that run has fewer steps)."""

    a: str | None
    b: str | None
    label: str  # what the step did (action and arguments, or the step's kind)
    fields: tuple[Field, ...]
    match_fields: tuple[str, ...] = ("action", "arguments")

    @property
    def matches(self) -> bool:
        """Both runs have the step and it did the same thing (same action and arguments)."""
        return self.a is not None and self.b is not None and all(
            f.same for f in self.fields if f.name in self.match_fields)

    @property
    def same(self) -> bool:
        return self.a is not None and self.b is not None and all(f.same for f in self.fields)

    @property
    def differences(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if not f.same)


@dataclass(frozen=True)
class TraceDiff:
    a: Trace
    b: Trace
    question: Field
    steps: tuple[StepPair, ...]
    answer: Field
    mechanism: Field
    ignore_thoughts: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def first_divergence(self) -> int | None:
        """The index in :attr:`steps` of the first pair that is not the same, ``None`` if every pair is."""
        return next((n for n, s in enumerate(self.steps) if not s.same), None)

    @property
    def equivalent(self) -> bool:
        return self.mechanism.same and self.question.same and self.answer.same and self.first_divergence is None


def compare(a: Trace, b: Trace, *, ignore_thoughts: bool = False) -> TraceDiff:
    """Align the steps of runs ``a`` and ``b``.

    :param a: the first run (the reference).
    :param b: the second run.
    :param ignore_thoughts: leave agents' thoughts out (they vary between model runs that act alike).
    :returns: the :class:`TraceDiff`; ``.equivalent`` and ``.first_divergence`` summarise it.
    """
    mech = Field("type", a.question.mechanism.label, b.question.mechanism.label)
    question = Field("question", a.question.query, b.question.query)
    left, right = _steps(a, ignore_thoughts), _steps(b, ignore_thoughts)
    pairs = []
    for n in range(max(len(left), len(right))):
        la = left[n] if n < len(left) else None
        rb = right[n] if n < len(right) else None
        pairs.append(_pair(la, rb))
    return TraceDiff(a, b, question, tuple(pairs), Field("answer", _answer(a), _answer(b)), mech, ignore_thoughts)


_Step = tuple[str, str, dict[str, str], tuple[str, ...]]  # name, label, fields, the fields that decide a match


def _pair(a: _Step | None, b: _Step | None) -> StepPair:
    names = list(dict.fromkeys([*(a[2] if a else {}), *(b[2] if b else {})]))
    fields = tuple(Field(n, a[2].get(n, "") if a else None, b[2].get(n, "") if b else None) for n in names)
    label = (a or b)[1] if (a or b) else ""  # type: ignore[index]
    match = (a or b)[3] if (a or b) else ()  # type: ignore[index]
    return StepPair(a[0] if a else None, b[0] if b else None, label, fields, match)


def _answer(trace: Trace) -> str | None:
    if isinstance(trace, AgentTrace):
        return trace.conclusion.answer if trace.conclusion else None
    return trace.synthesis.content if trace.synthesis else None


def _steps(trace: Trace, ignore_thoughts: bool) -> list[_Step]:
    if isinstance(trace, AgentTrace):
        return [_analysis(trace, a, ignore_thoughts) for a in trace.analyses]
    return _rag(trace)


def _canonical_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, ensure_ascii=False)
    except ValueError:
        return arguments


def _analysis(trace: AgentTrace, a: Analysis, ignore_thoughts: bool) -> _Step:
    values = {"action": a.action, "arguments": _canonical_arguments(a.arguments) if a.action else "",
              "observation": a.observation}
    if not ignore_thoughts:
        values["thought"] = a.thought
    values["uses"] = ", ".join(a.uses)
    calls = []
    for end in a.calls:
        sub = trace.subtrace(end)
        calls.append(_answer(sub) or "(no answer)" if sub is not None else "(not recorded)")
    if calls:
        values["sub-trace answer"] = " | ".join(calls)
    label = f"{a.action} {a.arguments}" if a.action else (a.thought or "(no action)")
    return a.step, label, values, ("action", "arguments")


def _rag(trace: RagTrace) -> list[_Step]:
    out: list[_Step] = []
    e, f, s = trace.exploration, trace.focus, trace.synthesis
    if e is not None:
        out.append(("exploration", "exploration", {
            "edge count": "" if e.edge_count is None else str(e.edge_count),
            "chunk count": "" if e.chunk_count is None else str(e.chunk_count),
            "chunks": ", ".join(e.chunks)}, ("edge count", "chunk count", "chunks")))
    if f is not None:
        edges = "; ".join(f"{x.subject} {x.predicate} {x.object}" for x in f.edges)
        out.append(("focus", "focus", {"edges": edges, "reasoning": "; ".join(x.reasoning for x in f.edges)},
                    ("edges",)))
    if s is not None:
        out.append(("synthesis", "synthesis", {"content": s.content}, ("content",)))
    return out


# -- JSON -----------------------------------------------------------------------------

def diff_json(d: TraceDiff) -> dict[str, Any]:
    """The comparison as a JSON-ready structure."""
    first = d.first_divergence
    return {
        "a": _side(d.a), "b": _side(d.b),
        "equivalent": d.equivalent,
        "first_divergence": None if first is None else {"index": first, "a": d.steps[first].a,
                                                         "b": d.steps[first].b},
        "type": _field(d.mechanism), "question": _field(d.question), "answer": _field(d.answer),
        "ignore_thoughts": d.ignore_thoughts,
        "steps": [{"a": s.a, "b": s.b, "label": s.label, "matches": s.matches, "same": s.same,
                   "differences": [{"field": f.name, "a": f.a, "b": f.b} for f in s.differences]}
                  for s in d.steps],
    }


def _side(trace: Trace) -> dict[str, Any]:
    q = trace.question
    return {"session_id": q.iri, "session": q.session_id, "type": q.mechanism.label, "time": iso_time(q.started),
            "status": trace.completeness.status}


def _field(f: Field) -> dict[str, Any]:
    return {"same": f.same, "a": f.a, "b": f.b}


# -- text -------------------------------------------------------------------------------

GREEN, RED, YELLOW, DIM, RESET = "\x1b[32m", "\x1b[31m", "\x1b[33m", "\x1b[2m", "\x1b[0m"


def diff_text(d: TraceDiff, width: int = 100, *, colour: bool = False) -> str:
    """The comparison as terminal text; ``colour`` adds ANSI colours (recorded text is made visible first).

    :returns: the text, ending with a newline; the last line is the verdict.
    """
    def paint(code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if colour else text

    def show(text: str | None, room: int) -> str:
        return "(none)" if text is None else visible(truncate(" ".join(text.split()), max(room, 10)) or '""')

    lines = [f"A  {show(d.a.question.iri, width)}  ({d.a.completeness.status})",
             f"B  {show(d.b.question.iri, width)}  ({d.b.completeness.status})", ""]
    for f in (d.mechanism, d.question):
        lines += _field_lines(f, width, paint, show, top=True)
    first = d.first_divergence
    for n, s in enumerate(d.steps):
        name = s.a if s.a == s.b else f"{s.a or '-'}/{s.b or '-'}"
        mark = paint(GREEN, "=") if s.same else paint(RED if not s.matches else YELLOW, "≠")
        note = paint(RED, "  ◀ first divergence") if n == first else ""
        only = "" if s.a and s.b else f"  (only in {'A' if s.a else 'B'})"
        lines.append(f"  {mark} {name:<12} {show(s.label, width - 20)}{only}{note}")
        if s.a and s.b:
            for f in s.differences:
                lines += _field_lines(f, width, paint, show)
    lines += _field_lines(d.answer, width, paint, show, top=True)
    lines.append("")
    if d.equivalent:
        lines.append(paint(GREEN, f"equivalent: {len(d.steps)} steps match, same answer"))
    else:
        differing = sum(1 for s in d.steps if not s.same)
        where = "" if first is None else f"; first divergence at step {d.steps[first].a or d.steps[first].b}"
        answer = "" if d.answer.same else "; the answers differ"
        lines.append(paint(RED, f"differ: {differing} of {len(d.steps)} steps differ{where}{answer}"))
    return "\n".join(lines) + "\n"


def _field_lines(f: Field, width: int, paint: Any, show: Any, *, top: bool = False) -> list[str]:
    if top and f.same:
        return [f"{paint(GREEN, '=')} {f.name:<14} {show(f.a, width - 20)}"]
    indent = "" if top else "      "
    head = f"{paint(RED, '≠')} {f.name}" if top else f"{indent}{f.name}"
    return [head, f"{indent}    A: {paint(RED, show(f.a, width - 12))}",
            f"{indent}    B: {paint(GREEN, show(f.b, width - 12))}"]


# -- Mermaid ----------------------------------------------------------------------------

def diff_mermaid(d: TraceDiff) -> str:
    """Both runs as two columns, aligned steps linked: ``===`` when the same, a dotted ``differs`` link otherwise."""
    lines = ["flowchart LR"]
    for side, trace, pick in (("a", d.a, 0), ("b", d.b, 1)):
        lines.append(f'  subgraph {side}["{side.upper()}: {mermaid_label(trace.question.session_id)}"]')
        lines.append("    direction TB")
        lines.append(f'    {side}_q(["Question: {mermaid_label(trace.question.query)}"])')
        prev = f"{side}_q"
        for n, s in enumerate(d.steps):
            name = s.a if pick == 0 else s.b
            if name is None:
                continue
            lines.append(f'    {side}_{n}["{mermaid_label(name + " · " + s.label)}"]')
            lines.append(f"    {prev} --> {side}_{n}")
            prev = f"{side}_{n}"
        answer = _answer(trace)
        if answer is not None:
            lines.append(f'    {side}_end(["Answer: {mermaid_label(answer)}"])')
            lines.append(f"    {prev} --> {side}_end")
        lines.append("  end")
    same: list[str] = []
    differ: list[str] = []
    for n, s in enumerate(d.steps):
        if s.a is not None and s.b is not None:
            lines.append(f"  a_{n} {'===' if s.same else '-. differs .-'} b_{n}")
            (same if s.same else differ).extend([f"a_{n}", f"b_{n}"])
    if _answer(d.a) is not None and _answer(d.b) is not None:
        lines.append(f"  a_end {'===' if d.answer.same else '-. differs .-'} b_end")
        (same if d.answer.same else differ).extend(["a_end", "b_end"])
    lines += ["  classDef same fill:#e6f4ea,stroke:#3c8d5a", "  classDef differ fill:#fdecea,stroke:#c0392b"]
    if same:
        lines.append(f"  class {','.join(same)} same")
    if differ:
        lines.append(f"  class {','.join(differ)} differ")
    return "\n".join(lines) + "\n"
