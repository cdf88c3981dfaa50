"""One live step (a triples message) as one line of text, and the scope filter (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from provstream.core import vocab as v
from provstream.core.triples import Iri, Literal, StepTriples
from provstream.read.parse import step_name
from provstream.read.text import truncate

_ROLES = (v.TG_QUESTION, v.TG_ANALYSIS, v.TG_CONCLUSION, v.TG_EXPLORATION, v.TG_FOCUS, v.TG_SYNTHESIS)


@dataclass(frozen=True, slots=True)
class StepLine:
    """One live step; ``trace`` is the trace's IRI (what ``tg-show-explain-trace`` takes)."""

    session_id: str
    type: str
    step: str
    text: str
    status: str
    duplicate: bool = False
    trace: str = ""


def in_scope(msg: StepTriples, *, user: str, collection: str, question: str | None = None) -> bool:
    return msg.user == user and msg.collection == collection and (question is None or msg.question == question)


def describe(msg: StepTriples) -> StepLine:
    subject, role = _role(msg)
    values = _values(msg, subject)
    step = _step(msg, subject, role)
    return StepLine(msg.session_id, msg.mechanism.label, step, _text(role, values),
                    msg.status.state.word, msg.duplicate, msg.question)


def format_line(line: StepLine, width: int = 120) -> str:
    head = f"{line.trace or line.session_id}  {line.type:<8} {line.step:<11} "
    tail = f"  [{line.status}{', duplicate' if line.duplicate else ''}]"
    room = max(width - len(head) - len(tail), 10)
    return head + truncate(line.text, room) + tail


def _role(msg: StepTriples) -> tuple[str, str]:
    """The step's main subject and its tg: type (the Question before anything else)."""
    typed = {(t.s.value, t.o.value) for t in msg.triples
             if t.p.value == v.RDF_TYPE and isinstance(t.o, Iri) and t.o.value in _ROLES}
    for role in _ROLES:
        subjects = sorted(s for s, r in typed if r == role)
        if subjects:
            return subjects[0], role
    return msg.question, ""


def _values(msg: StepTriples, subject: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in msg.triples:
        if t.s.value == subject and isinstance(t.o, (Literal, Iri)):
            out.setdefault(t.p.value, []).append(t.o.value)
    return out


def _step(msg: StepTriples, subject: str, role: str) -> str:
    if role == v.TG_ANALYSIS:
        return step_name(msg.question, subject)
    return v.local_name(role).lower() if role else f"seq {msg.seq}"


def _first(values: dict[str, list[str]], predicate: str) -> str:
    found = values.get(predicate)
    return min(found) if found else ""


def _text(role: str, values: dict[str, list[str]]) -> str:
    if role == v.TG_QUESTION:
        return _first(values, v.TG_QUERY)
    if role == v.TG_ANALYSIS:
        action = _first(values, v.TG_ACTION)
        call = f"{action} {_first(values, v.TG_ARGUMENTS)}" if action else ""
        observed = _first(values, v.TG_OBSERVATION)
        parts = [_first(values, v.TG_THOUGHT), call, f"→ {observed}" if observed else ""]
        return " | ".join(p for p in parts if p)
    if role == v.TG_CONCLUSION:
        return _first(values, v.TG_ANSWER)
    if role == v.TG_EXPLORATION:
        return _exploration(values)
    if role == v.TG_FOCUS:
        return f"{len(values.get(v.TG_SELECTED_EDGE, []))} edges selected"
    return _first(values, v.TG_CONTENT)


def _exploration(values: dict[str, list[str]]) -> str:
    if v.TG_EDGE_COUNT in values:
        return f"{_first(values, v.TG_EDGE_COUNT)} edges"
    chunks = sorted(values.get(v.TG_SELECTED_CHUNK, []))
    return f"{_first(values, v.TG_CHUNK_COUNT)} chunks" + (": " + ", ".join(chunks) if chunks else "")
