"""Who decides the next ReAct step: the :class:`Planner` port and the built-in
:class:`HeuristicPlanner`, used when no LLM endpoint is configured.

The heuristic planner needs no model: an arithmetic question goes to the
calculator; anything else is searched in the bundled corpus with the question
itself, and the best sentence found is the answer if it covers enough of the
question's key terms; otherwise it says it found nothing. Every thought it
records starts with ``[heuristic planner]`` so a trace shows who reasoned.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Protocol

from provstream.agent.react import Act, Decision, Finish, Turn
from provstream.agent.search import SearchIndex

LABEL: Final = "[heuristic planner]"
MIN_COVERAGE: Final = 0.5
NOT_FOUND: Final = "I could not find an answer in the bundled corpus."
_LINE: Final = re.compile(r"^\[(?P<id>[^\]]+)\]\s*(?P<text>.+)$")
_ARITHMETIC: Final = re.compile(
    r"^\s*(?:what\s+is|what's|how\s+much\s+is|calculate|compute|evaluate)?\s*"
    r"(?P<expr>[-+(]*\d[\d\s.,+\-*/^%()×÷]*[\d)])\s*[?.!=]?\s*$",
    re.IGNORECASE,
)


class Planner(Protocol):
    label: str

    def decide(self, question: str, history: Sequence[Turn]) -> Decision: ...


def arithmetic(question: str) -> str | None:
    """The expression if the whole question is a sum like ``What is 17 * 23?``."""
    match = _ARITHMETIC.match(question)
    if match is None or not re.search(r"\d\s*[-+*/^%×÷]", match.group("expr")):
        return None
    return match.group("expr").replace(",", "").strip()


class HeuristicPlanner:
    label = "heuristic planner"

    def __init__(self, index: SearchIndex, min_coverage: float = MIN_COVERAGE) -> None:
        self.index = index
        self.min_coverage = min_coverage

    def decide(self, question: str, history: Sequence[Turn]) -> Decision:
        if not history:
            return self._first(question)
        last = history[-1]
        if last.act.action == "calculator":
            return Finish(f"{LABEL} The calculator gives {last.observation}.", last.observation)
        return self._read(question, last.observation)

    def _first(self, question: str) -> Act:
        expression = arithmetic(question)
        if expression is not None:
            return Act(f"{LABEL} No LLM endpoint is configured. The question is arithmetic, "
                       f"so I give {expression} to the calculator.", "calculator", {"expression": expression})
        return Act(f"{LABEL} No LLM endpoint is configured, so I search the bundled corpus with the question.",
                   "search", {"query": question})

    def _read(self, question: str, observation: str) -> Finish:
        """Answer with the best passage sentence if it covers enough of the question."""
        match = _LINE.match(observation.splitlines()[0]) if observation else None
        if match is None:
            return Finish(f"{LABEL} The search found no passage about the question.", NOT_FOUND)
        _, coverage = self.index.weight(question, match["text"])
        if coverage < self.min_coverage:
            return Finish(f"{LABEL} The best passage [{match['id']}] covers only {coverage:.0%} of the "
                          f"question's key terms (I need {self.min_coverage:.0%}), so I do not trust it.", NOT_FOUND)
        return Finish(f"{LABEL} Passage [{match['id']}] covers {coverage:.0%} of the question's key terms; "
                      "I answer with its best sentence.", match["text"])
