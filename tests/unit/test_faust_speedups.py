"""Eager delivery: a callback that does not wait costs no task; one that waits behaves as if awaited."""

from __future__ import annotations

import asyncio

import pytest

from provstream.streams import faust_speedups
from provstream.streams.faust_speedups import Resumed, run_eagerly


def test_a_callback_that_never_waits_finishes_at_once() -> None:
    done = []

    async def deliver() -> None:
        done.append(1)

    assert run_eagerly(deliver()) is faust_speedups._DONE
    assert done == [1]


def test_a_callback_that_waits_is_finished_by_awaiting_it() -> None:
    async def main() -> list[str]:
        gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        seen: list[str] = []

        async def deliver() -> str:
            seen.append("before")
            seen.append(await gate)
            return "result"

        pending = run_eagerly(deliver())
        assert isinstance(pending, Resumed) and seen == ["before"]
        asyncio.get_running_loop().call_later(0.01, gate.set_result, "after")
        assert await pending == "result"
        return seen

    assert asyncio.run(main()) == ["before", "after"]


def test_a_waiting_callback_sees_cancellation_where_it_waits() -> None:
    async def main() -> list[str]:
        seen: list[str] = []

        async def deliver() -> None:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

        pending = run_eagerly(deliver())
        assert isinstance(pending, Resumed)
        task = asyncio.ensure_future(faust_speedups._finish(pending))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen

    assert asyncio.run(main()) == ["cancelled"]


def test_errors_surface_from_either_path() -> None:
    async def fails_at_once() -> None:
        raise ValueError("now")

    with pytest.raises(ValueError, match="now"):
        run_eagerly(fails_at_once())

    async def main() -> None:
        async def fails_later() -> None:
            await asyncio.sleep(0.001)
            raise ValueError("later")

        pending = run_eagerly(fails_later())
        await pending

    with pytest.raises(ValueError, match="later"):
        asyncio.run(main())


def test_apply_patches_faust_once() -> None:
    from faust.transport.consumer import Consumer

    faust_speedups.apply()
    faust_speedups.apply()
    assert Consumer._drain_messages is faust_speedups._drain_messages
