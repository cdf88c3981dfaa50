"""The eager ``wait_first`` of the fetcher: same outcomes as Faust's, without tasks when nothing waits."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from faust.transport.drivers import aiokafka as faust_aiokafka
from mode import Service
from mode.utils.locks import Event

from provstream.streams import eager_delivery
from provstream.streams.eager_delivery import EagerDelivery, EagerDeliveryConsumer


class Fetching(EagerDelivery, Service):
    def __init__(self) -> None:
        super().__init__()
        self.suspend_flow = Event()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_callback_that_does_not_wait_runs_in_place_without_tasks() -> None:
    async def main() -> None:
        svc = Fetching()
        seen: list[str] = []

        async def callback() -> str:
            seen.append("ran")
            return "delivered"

        tasks_before = len(asyncio.all_tasks())
        result = await svc.wait_first(callback(), svc.suspend_flow.wait())
        assert result.done == [result.done[0]] and result.results == ["delivered"] and not result.stopped
        assert seen == ["ran"] and len(asyncio.all_tasks()) == tasks_before

    run(main())


def test_a_callback_that_waits_is_carried_on_and_its_result_returned() -> None:
    async def main() -> None:
        svc = Fetching()
        room: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def callback() -> int:
            await asyncio.sleep(0)
            return await room + 1

        asyncio.get_running_loop().call_later(0.01, room.set_result, 41)
        result = await svc.wait_first(callback(), svc.suspend_flow.wait())
        assert result.results == [42] and not result.stopped

    run(main())


def test_a_suspended_flow_releases_a_callback_blocked_on_a_full_buffer() -> None:
    async def main() -> None:
        svc = Fetching()
        queue: asyncio.Queue[int] = asyncio.Queue(maxsize=1)
        queue.put_nowait(0)  # full
        cleaned: list[str] = []

        async def callback() -> None:
            try:
                await queue.put(1)
            finally:
                cleaned.append("callback ended")

        asyncio.get_running_loop().call_later(0.01, svc.suspend_flow.set)
        result = await asyncio.wait_for(svc.wait_first(callback(), svc.suspend_flow.wait()), 5)
        await asyncio.sleep(0.01)  # the cancelled callback task finishes
        assert result.results == [True]  # the flow suspension won
        assert cleaned == ["callback ended"] and queue.qsize() == 1 and not queue._putters  # type: ignore[attr-defined]

    run(main())


def test_errors_of_the_callback_propagate_before_or_after_it_waited() -> None:
    async def main() -> None:
        svc = Fetching()

        async def at_once() -> None:
            raise ValueError("bad")

        async def later() -> None:
            await asyncio.sleep(0.001)
            raise KeyError("worse")

        with pytest.raises(ValueError, match="bad"):
            await svc.wait_first(at_once(), svc.suspend_flow.wait())
        with pytest.raises(KeyError, match="worse"):
            await svc.wait_first(later(), svc.suspend_flow.wait())

    run(main())


def test_while_the_flow_is_suspended_and_for_other_waits_faust_runs_unchanged() -> None:
    async def main() -> None:
        svc = Fetching()
        svc.suspend_flow.set()

        async def callback() -> str:
            return "x"

        result = await svc.wait_first(callback(), svc.suspend_flow.wait())
        assert set(result.results) <= {"x", True} and result.results
        ready = Event()
        ready.set()
        assert (await svc.wait_first(ready)).results == [True]

    run(main())


def test_install_points_the_aiokafka_transport_at_the_eager_consumer() -> None:
    before = faust_aiokafka.Transport.Consumer
    try:
        eager_delivery.install()
        assert faust_aiokafka.Transport.Consumer is EagerDeliveryConsumer
        assert issubclass(EagerDeliveryConsumer, faust_aiokafka.Consumer)
    finally:
        faust_aiokafka.Transport.Consumer = before


def test_faust_still_delivers_through_wait_first_raced_against_the_flow_suspension() -> None:
    import inspect

    from faust.transport.consumer import Consumer

    source = inspect.getsource(Consumer._drain_messages)
    assert "self.wait_first(" in source and "callback(message), self.suspend_flow.wait()" in source
