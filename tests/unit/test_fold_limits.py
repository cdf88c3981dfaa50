"""Iteration numbers are bounded: a conclusion claiming 2**63 - 1 iterations must not fold for ever."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.core import events as ev
from provstream.core.fold import MAX_ITERATIONS, fold
from provstream.core.vocab import Mechanism
from provstream.errors import InvalidEvent, InvalidStep
from provstream.settings import Settings

T = datetime(2025, 1, 1, tzinfo=UTC)


def _event(payload: ev.Payload) -> ev.Event:
    return ev.Event("e1", "s1", Mechanism.AGENT, 1, T, payload)


@pytest.mark.parametrize("payload", [
    ev.AgentConclusion("a", 2**63 - 1), ev.AgentConclusion("a", MAX_ITERATIONS + 1),
    ev.AgentIteration(2**63 - 1), ev.AgentIteration(MAX_ITERATIONS + 1),
])
def test_iteration_numbers_beyond_the_bound_are_invalid_at_once(payload: ev.Payload) -> None:
    began = time.monotonic()
    with pytest.raises(InvalidEvent, match=str(MAX_ITERATIONS)):
        fold(None, _event(payload))
    assert time.monotonic() - began < 1.0


def test_the_bound_itself_folds() -> None:
    _, step = fold(None, _event(ev.AgentConclusion("a", MAX_ITERATIONS)))
    assert len(step.status.missing) == MAX_ITERATIONS + 1  # the question and every iteration


def test_the_emitter_refuses_an_iteration_past_the_bound() -> None:
    with Emitter(Settings(), transport=MemoryTransport()) as emitter:
        session = emitter.agent("?")
        session._iterations = MAX_ITERATIONS  # as if it had run that many
        with pytest.raises(InvalidStep, match="the most allowed"):
            session.iteration(thought="one too many")
        assert session.conclude("done").endswith("/final")
