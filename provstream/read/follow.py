"""Print steps from a live tail until interrupted (shared by ``provstream follow`` and ``show --follow``).

Following one trace also follows its sub-traces: a GraphRAG/DocRAG session
an agent iteration called is recorded before that iteration (the tool runs
first), so steps of other sessions in scope are held back (the most recent
:data:`HELD` of them) and printed, indented, once an iteration of a followed
trace links their session; its later steps then print as they arrive.
"""

from __future__ import annotations

import signal
import threading
from collections import OrderedDict
from collections.abc import Iterable
from types import FrameType
from typing import TextIO

from provstream.core import vocab as v
from provstream.core.triples import Iri, StepTriples
from provstream.read.live import TriplesTail
from provstream.read.steps import describe, format_line, in_scope

HELD = 10_000
SUB_INDENT = "  "


def print_steps(messages: Iterable[StepTriples], out: TextIO, *, user: str, collection: str,
                question: str | None = None, width: int = 120) -> int:
    """Print the messages in scope (and of ``question`` when given); return how many were printed."""
    printed = 0
    for msg in messages:
        if in_scope(msg, user=user, collection=collection, question=question):
            print(format_line(describe(msg), width), file=out, flush=True)
            printed += 1
    return printed


class TraceFilter:
    """Which messages of a scope belong to one trace, its sub-traces included (see the module doc)."""

    def __init__(self, question: str, subtraces: Iterable[str] = ()) -> None:
        self.question = question
        self.followed = {question, *subtraces}
        self._held: OrderedDict[int, StepTriples] = OrderedDict()
        self._count = 0

    def feed(self, msg: StepTriples) -> list[tuple[StepTriples, bool]]:
        """The messages to print now, in order, each with whether it belongs to a sub-trace."""
        if msg.question not in self.followed:
            self._hold(msg)
            return []
        shown = [(msg, msg.question != self.question)]
        for sub in linked_subtraces(msg):
            if sub not in self.followed:
                self.followed.add(sub)
                shown += [(m, True) for m in self._release(sub)]
        return shown

    def _hold(self, msg: StepTriples) -> None:
        self._count += 1
        self._held[self._count] = msg
        if len(self._held) > HELD:
            self._held.popitem(last=False)

    def _release(self, question: str) -> list[StepTriples]:
        keys = [k for k, m in self._held.items() if m.question == question]
        return [self._held.pop(k) for k in keys]


def linked_subtraces(msg: StepTriples) -> list[str]:
    """Question IRIs of the sub-traces whose Synthesis (RAG) or Conclusion (agent) a step of ``msg`` derives from."""
    found = []
    for t in msg.triples:
        if t.p.value == v.PROV_WAS_DERIVED_FROM and isinstance(t.o, Iri):
            question = v.subtrace_question_iri(t.o.value)
            if question is not None and question != msg.question:
                found.append(question)
    return found



def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def follow(tail: TriplesTail, out: TextIO, *, user: str, collection: str, question: str | None = None,
           subtraces: Iterable[str] = (), width: int = 120) -> int:
    """Print steps as they arrive until Ctrl-C (or SIGTERM); the caller closes the tail. Returns 0.

    With ``question``, only that trace's steps and its sub-traces' (``subtraces``:
    those already known), the latter indented.
    """
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    trace = None if question is None else TraceFilter(question, subtraces)
    try:
        while True:
            messages = tail.poll()
            if trace is None:
                print_steps(messages, out, user=user, collection=collection, width=width)
                continue
            for msg in messages:
                if in_scope(msg, user=user, collection=collection):
                    for shown, sub in trace.feed(msg):
                        indent = SUB_INDENT if sub else ""
                        print(indent + format_line(describe(shown), width - len(indent)), file=out, flush=True)
    except KeyboardInterrupt:
        return 0
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
