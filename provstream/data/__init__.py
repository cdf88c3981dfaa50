"""Real data bundled with provstream: the one place the demo, tests and benchmarks read it from.

Nothing in provstream reads outside its own installation; these files ship
with the package (source and licence in ``README.md`` beside them).

* :data:`REACT_TRAJECTORIES` — 12 real ReAct trajectories (HotpotQA, FEVER),
  one JSON object per line::

      {"source": "...", "question": "...", "answer": "...",
       "steps": [{"thought": "...", "action": "Search",
                  "arguments": {"input": "..."}, "observation": "..."}]}

* :data:`HOTPOTQA_DEV_QUESTIONS` — 7,405 HotpotQA dev questions
  (``{"question": ..., "answer": ..., "type": ...}`` per line).

Example::

    >>> from provstream.data import REACT_TRAJECTORIES
    >>> REACT_TRAJECTORIES.name
    'hotpot_fever.jsonl'
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

DATA_DIR: Final = Path(__file__).resolve().parent
REACT_TRAJECTORIES: Final = DATA_DIR / "react" / "hotpot_fever.jsonl"
HOTPOTQA_DEV_QUESTIONS: Final = DATA_DIR / "hotpotqa_dev_questions.jsonl"

__all__ = ["DATA_DIR", "HOTPOTQA_DEV_QUESTIONS", "REACT_TRAJECTORIES"]
