"""The trace model as a JSON-ready structure (pure)."""

from __future__ import annotations

import json
from typing import Any

from provstream.core.vocab import Mechanism
from provstream.read.model import AgentTrace, Analysis, Completeness, Question, RagTrace, Trace, missing_names
from provstream.read.text import iso_time


def trace_json(trace: Trace) -> dict[str, Any]:
    return _agent(trace) if isinstance(trace, AgentTrace) else _rag(trace)


def dumps(trace: Trace) -> str:
    return json.dumps(trace_json(trace), indent=2, ensure_ascii=False) + "\n"


def _question(question: Question, done: Completeness) -> dict[str, Any]:
    agent = {"agent_name": question.agent_name or None, "conversation_id": question.conversation_id or None} \
        if question.mechanism is Mechanism.AGENT else {}
    return {
        "session_id": question.iri,
        "session": question.session_id,
        "type": question.mechanism.label,
        "question": question.query,
        **agent,
        "time": iso_time(question.started),
        "status": done.status,
        "steps": done.steps,
        "expected_steps": done.expected,
        "missing_steps": list(missing_names(question.mechanism, done.missing)),
        "late_steps": done.late,
    }


def arguments_json(arguments: str) -> Any:
    """Tool arguments as JSON when they parse, the raw text otherwise."""
    try:
        return json.loads(arguments) if arguments else None
    except ValueError:
        return arguments


def _analysis(trace: AgentTrace, a: Analysis) -> dict[str, Any]:
    return {
        "iri": a.iri, "step": a.step, "thought": a.thought, "action": a.action,
        "arguments": arguments_json(a.arguments) if a.action else None,
        "observation": a.observation, "uses": list(a.uses),
        "subtraces": [_call(trace, s) for s in a.calls],
    }


def _call(trace: AgentTrace, synthesis: str) -> dict[str, Any]:
    sub = trace.subtrace(synthesis)
    if sub is None:
        return {"synthesis": {"iri": synthesis}, "recorded": False}
    return _agent(sub) if isinstance(sub, AgentTrace) else _rag(sub)


def _agent(trace: AgentTrace) -> dict[str, Any]:
    c = trace.conclusion
    return {
        **_question(trace.question, trace.completeness),
        "analyses": [_analysis(trace, a) for a in trace.analyses],
        "conclusion": {"iri": c.iri, "answer": c.answer} if c else None,
    }


def _rag(trace: RagTrace) -> dict[str, Any]:
    out = _question(trace.question, trace.completeness)
    e, f, s = trace.exploration, trace.focus, trace.synthesis
    if trace.question.mechanism is Mechanism.GRAPHRAG:
        out["exploration"] = {"iri": e.iri, "edge_count": e.edge_count} if e else None
        out["focus"] = None if f is None else {"iri": f.iri, "edges": [
            {"iri": x.iri, "subject": x.subject, "predicate": x.predicate, "object": x.object,
             "reasoning": x.reasoning} for x in f.edges]}
    else:
        out["exploration"] = None if e is None else {"iri": e.iri, "chunk_count": e.chunk_count,
                                                     "chunks": list(e.chunks)}
    out["synthesis"] = {"iri": s.iri, "content": s.content} if s else None
    return out
