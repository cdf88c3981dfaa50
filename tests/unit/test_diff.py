"""Two runs side by side (pure): alignment, first divergence, the three output forms."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

from provstream import testing as samples
from provstream.core import vocab as v
from provstream.read.diff import compare, diff_json, diff_mermaid, diff_text
from provstream.read.model import Completeness
from provstream.read.parse import build_trace

START = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


def _run(record: dict, session: str):
    msgs = samples.fold_all(samples.agent_events(record, session, start=START))
    return build_trace(v.question_iri(v.Mechanism.AGENT, session), samples.triples_of(msgs),
                       Completeness.from_status(msgs[-1].status))


def test_two_recordings_of_one_trajectory_are_equivalent() -> None:
    record = samples.load_trajectories()[0]
    d = compare(_run(record, "a"), _run(record, "b"))
    assert d.equivalent and d.first_divergence is None
    assert all(s.same and s.matches for s in d.steps)
    assert diff_json(d)["equivalent"] is True
    assert diff_text(d).splitlines()[-1].startswith("equivalent:")


def test_one_changed_observation_is_the_divergence() -> None:
    record = samples.load_trajectories()[0]
    changed = copy.deepcopy(record)
    changed["steps"][1]["observation"] = "Something else entirely."
    d = compare(_run(record, "a"), _run(changed, "b"))
    assert not d.equivalent and d.first_divergence == 1
    step = d.steps[1]
    assert step.matches and not step.same  # same action and arguments, another observation
    assert [f.name for f in step.differences] == ["observation"]
    data = diff_json(d)
    assert data["first_divergence"] == {"index": 1, "a": "i2", "b": "i2"}
    assert data["steps"][1]["differences"][0]["b"] == "Something else entirely."
    text = diff_text(d, colour=True)
    assert "◀ first divergence" in text and "\x1b[31m" in text
    assert "a_1 -. differs .- b_1" in diff_mermaid(d) and "a_0 === b_0" in diff_mermaid(d)


def test_thoughts_can_be_ignored_and_arguments_compare_as_json() -> None:
    record = samples.load_trajectories()[0]
    changed = copy.deepcopy(record)
    changed["steps"][0]["thought"] = "A different way of putting it."
    assert not compare(_run(record, "a"), _run(changed, "b")).equivalent
    assert compare(_run(record, "a"), _run(changed, "b"), ignore_thoughts=True).equivalent


def test_a_shorter_run_differs_at_its_end() -> None:
    records = samples.load_trajectories()
    d = compare(_run(records[0], "a"), _run(records[1], "b"))
    assert not d.equivalent and d.first_divergence == 0
    assert "only in" in diff_text(d) or len(records[0]["steps"]) == len(records[1]["steps"])


def test_recorded_escape_sequences_stay_visible_in_text() -> None:
    record = copy.deepcopy(samples.load_trajectories()[0])
    other = copy.deepcopy(record)
    other["steps"][0]["observation"] = "\x1b[2J gone"
    assert "\x1b[2J" not in diff_text(compare(_run(record, "a"), _run(other, "b")), colour=False)
