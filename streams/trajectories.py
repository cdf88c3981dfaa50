"""Events of a recorded ReAct trajectory (the bundled data's JSON lines).

Pure and deterministic: the same record, session id and start time give the
same events (event ids ``<session>:<seq>``, one second between steps). Used
by the worker's integration tests and benchmark to feed real trajectories
through the fold.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from provstream import events as ev
from provstream.vocab import Mechanism


def load(path: Path) -> list[dict[str, Any]]:
    """The trajectories of a JSON-lines file, in file order."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def trajectory_events(
    record: Mapping[str, Any], session_id: str, start: datetime,
    user: str = "trustgraph", collection: str = "default",
) -> list[ev.Event]:
    """Question, one iteration per step, conclusion: the events an agent emits for ``record``."""
    steps = record["steps"]
    payloads: list[ev.Payload] = [
        ev.AgentQuestion(record["question"]),
        *(_iteration(i, step) for i, step in enumerate(steps, start=1)),
        ev.AgentConclusion(record["answer"], len(steps)),
    ]
    return [
        ev.Event(f"{session_id}:{seq}", session_id, Mechanism.AGENT, seq, start + timedelta(seconds=seq),
                 payload, user, collection)
        for seq, payload in enumerate(payloads)
    ]


def _iteration(n: int, step: Mapping[str, Any]) -> ev.AgentIteration:
    return ev.AgentIteration(
        iteration=n, thought=step.get("thought", ""), action=step.get("action", ""),
        arguments=json.dumps(step.get("arguments", {}), sort_keys=True), observation=step.get("observation", ""),
    )


def sessions(
    records: list[dict[str, Any]], prefix: str, start: datetime, count: int,
    user: str = "trustgraph", collection: str = "default",
) -> Iterator[list[ev.Event]]:
    """``count`` sessions ``<prefix>-<n>`` cycling through ``records``."""
    for n in range(count):
        yield trajectory_events(records[n % len(records)], f"{prefix}-{n}", start, user, collection)
