"""The trace model as readable terminal text (pure: width is a parameter)."""

from __future__ import annotations

import json
import re

from provstream.core.vocab import Mechanism
from provstream.read.model import COMPLETE, AgentTrace, Analysis, Completeness, Question, RagTrace, Trace, missing_names
from provstream.read.text import format_time, wrap_field

_ITERATION = re.compile(r"^i(\d+)$")
_STEP = "  "
_SUB = "    │ "


MARK = "  ◀ the step you asked for"


def render_trace(trace: Trace, width: int = 100, *, mark: str | None = None) -> str:
    """The trace as terminal text.

    :param trace: the trace to render.
    :param width: the line width to wrap to.
    :param mark: a step of the trace to point at (``i3``, ``final``, ``exploration``,
        ``focus``, ``synthesis``, as :func:`~provstream.core.vocab.parse_step_iri` names them).
    :returns: the text, ending with a newline.
    """
    lines = render_agent(trace, width) if isinstance(trace, AgentTrace) else render_rag(trace, width)
    if mark is not None:
        heading = {"final": "Conclusion", "exploration": "Exploration", "focus": "Focus",
                   "synthesis": "Synthesis"}.get(mark, f"Step {mark}")
        for n, line in enumerate(lines):
            if line == heading or (heading == "Focus" and line.startswith("Focus ")):
                lines[n] = line + MARK
                break
    return "\n".join(lines) + "\n"


def status_line(mechanism: Mechanism, done: Completeness) -> str:
    parts = [done.status]
    if done.steps is not None:
        total = f" of {done.expected}" if done.expected is not None and done.status != COMPLETE else ""
        parts.append(f"{done.steps}{total} steps")
    if done.missing:
        parts.append("missing: " + ", ".join(missing_names(mechanism, done.missing)))
    if done.late:
        parts.append(f"late steps: {done.late}")
    return " · ".join(parts)


def _header(question: Question, done: Completeness, width: int, indent: str = "") -> list[str]:
    return [
        f"{indent}{question.mechanism.label} trace  {question.iri}",
        *wrap_field("Question", question.query or "(not recorded)", width, indent + _STEP),
        *(wrap_field("Agent", question.agent_name, width, indent + _STEP) if question.agent_name else []),
        *(wrap_field("Conversation", question.conversation_id, width, indent + _STEP)
          if question.conversation_id else []),
        *wrap_field("Time", format_time(question.started), width, indent + _STEP),
        *wrap_field("Status", status_line(question.mechanism, done), width, indent + _STEP),
    ]


# -- agent ------------------------------------------------------------------

def render_agent(trace: AgentTrace, width: int) -> list[str]:
    lines = _header(trace.question, trace.completeness, width)
    for analysis in trace.analyses:
        lines += ["", f"Step {analysis.step}", *_analysis(trace, analysis, width)]
    lines.append("")
    if trace.conclusion is None:
        lines += ["Conclusion", f"{_STEP}(not recorded yet)"]
    else:
        lines += ["Conclusion", *wrap_field("Answer", trace.conclusion.answer, width, _STEP)]
    return lines


def pretty_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments


def linear(analysis: Analysis) -> bool:
    """True when the step only derives from the step before it (the default chain)."""
    match = _ITERATION.match(analysis.step)
    if match is None:
        return not analysis.uses
    n = int(match.group(1))
    return analysis.uses == ((f"i{n - 1}",) if n > 1 else ())


def _analysis(trace: AgentTrace, a: Analysis, width: int) -> list[str]:
    lines: list[str] = []
    if not linear(a):
        lines += wrap_field("uses:", ", ".join(a.uses) or "the question", width, _STEP)
    for label, text in (("Thought", a.thought), ("Action", a.action)):
        if text:
            lines += wrap_field(label, text, width, _STEP)
    if a.action and a.arguments:
        lines += wrap_field("Arguments", pretty_arguments(a.arguments), width, _STEP)
    if a.observation:
        lines += wrap_field("Observation", a.observation, width, _STEP)
    for synthesis in a.calls:
        lines += _call(trace, synthesis, width)
    return lines


def _call(trace: AgentTrace, synthesis: str, width: int) -> list[str]:
    sub = trace.subtrace(synthesis)
    if sub is None:
        return wrap_field("Sub-trace", f"{synthesis} (not recorded in this scope)", width, _STEP)
    if isinstance(sub, AgentTrace):
        nested = render_agent(sub, width - len(_SUB))
        return [f"{_STEP}Sub-trace:", *(_SUB + line if line else _SUB.rstrip() for line in nested)]
    return [f"{_STEP}Sub-trace:", *render_rag(sub, width - len(_SUB), _SUB)]


# -- GraphRAG / DocRAG ------------------------------------------------------

def render_rag(trace: RagTrace, width: int, indent: str = "") -> list[str]:
    lines = _header(trace.question, trace.completeness, width, indent)
    lines += ["" if not indent else indent.rstrip(), f"{indent}Exploration", *_exploration(trace, width, indent)]
    if trace.question.mechanism is Mechanism.GRAPHRAG:
        lines += [indent.rstrip(), *_focus(trace, width, indent)]
    lines += [indent.rstrip(), f"{indent}Synthesis"]
    content = trace.synthesis.content if trace.synthesis else "(not recorded yet)"
    return lines + wrap_field("Content", content, width, indent + _STEP)


def _exploration(trace: RagTrace, width: int, indent: str) -> list[str]:
    e = trace.exploration
    pad = indent + _STEP
    if e is None:
        return [f"{pad}(not recorded yet)"]
    if trace.question.mechanism is Mechanism.GRAPHRAG:
        return wrap_field("Edges", "-" if e.edge_count is None else str(e.edge_count), width, pad)
    count = "-" if e.chunk_count is None else str(e.chunk_count)
    return [*wrap_field("Chunks", count, width, pad), *wrap_field("Chunk ids", ", ".join(e.chunks) or "-", width, pad)]


def _focus(trace: RagTrace, width: int, indent: str) -> list[str]:
    f = trace.focus
    pad = indent + _STEP
    if f is None:
        return [f"{indent}Focus", f"{pad}(not recorded yet)"]
    lines = [f"{indent}Focus ({len(f.edges)} edges selected)"]
    for n, edge in enumerate(f.edges, start=1):
        lines += wrap_field(f"{n}.", f"{edge.subject} {edge.predicate} {edge.object}", width, pad, 3)
        if edge.reasoning:
            lines += wrap_field("", "reasoning: " + edge.reasoning, width, pad, 3)
    return lines
