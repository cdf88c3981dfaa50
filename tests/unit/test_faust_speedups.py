"""Eager delivery: a callback that does not wait costs no task; one that waits behaves as if awaited."""

from __future__ import annotations

import asyncio
import contextlib
from unittest.mock import MagicMock

import pytest
from aiokafka.consumer import fetcher as aiokafka_fetcher

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


def _new_fetcher(**kwargs: float) -> float:
    """A Fetcher's prefetch backoff, built without a broker (its fetch task is cancelled before it runs)."""
    async def main() -> float:
        client = MagicMock()
        client._metadata_max_age_ms = 300_000
        fetcher = aiokafka_fetcher.Fetcher(client, MagicMock(), **kwargs)
        fetcher._fetch_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await fetcher._fetch_task
        return float(fetcher._prefetch_backoff)

    return asyncio.run(main())


def test_fetchers_send_the_next_fetch_sooner_once_applied() -> None:
    faust_speedups.apply()
    faust_speedups.apply()  # idempotent: one wrapper
    assert _new_fetcher() == faust_speedups.PREFETCH_BACKOFF_S == 0.01
    assert aiokafka_fetcher.Fetcher.__init__.__wrapped__.__name__ == "__init__"  # type: ignore[attr-defined]
    assert not hasattr(aiokafka_fetcher.Fetcher.__init__.__wrapped__, "__wrapped__")  # type: ignore[attr-defined]


def test_an_explicit_prefetch_backoff_is_kept() -> None:
    faust_speedups.apply()
    assert _new_fetcher(prefetch_backoff=0.5) == 0.5
