"""take_ready: a batch goes out once the stream has nothing more queued, never larger than max_, every event once.

Runs a real Faust agent through Faust's own in-memory test context (no Kafka).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import faust

from provstream.streams.take import take_ready


def _agent(max_: int, within: float, batches: list[list[Any]]) -> Any:
    app = faust.App("take-test", store="memory://", web_enabled=False)

    @app.agent()
    async def agent(stream: Any) -> None:
        async for batch in take_ready(stream, max_, within):
            batches.append([event.value for event in batch])

    return agent


async def _until(condition: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


def test_a_lone_event_goes_out_without_waiting_for_within() -> None:
    batches: list[list[Any]] = []
    agent = _agent(100, 30.0, batches)

    async def run() -> float:
        async with agent.test_context() as ag:
            began = time.monotonic()
            await ag.put(1, wait=False)
            await _until(lambda: batches, 10.0)
            return time.monotonic() - began

    took = asyncio.run(run())
    assert batches == [[1]]
    assert took < 10.0  # Faust's take_events would hold it for the full 30 s


def test_queued_events_go_out_together_and_never_more_than_max() -> None:
    batches: list[list[Any]] = []
    agent = _agent(100, 30.0, batches)

    async def run() -> None:
        async with agent.test_context() as ag:
            for value in range(250):  # queued before the agent takes any
                await ag.put(value, wait=False)
            await _until(lambda: sum(map(len, batches)) == 250, 10.0)

    asyncio.run(run())
    assert [v for batch in batches for v in batch] == list(range(250))
    assert [len(b) for b in batches] == [100, 100, 50]


def test_events_are_acknowledged_only_after_their_batch_was_taken() -> None:
    seen: list[tuple[int, int]] = []  # (batch size, acked events of it when the agent had it)
    app = faust.App("take-ack-test", store="memory://", web_enabled=False)

    @app.agent()
    async def agent(stream: Any) -> None:
        async for batch in take_ready(stream, 10, 30.0):
            seen.append((len(batch), sum(1 for event in batch if event.message.acked)))

    async def run() -> None:
        async with agent.test_context() as ag:
            for value in range(10):
                await ag.put(value, wait=False)
            await _until(lambda: seen, 10.0)

    asyncio.run(run())
    assert seen == [(10, 0)]
