"""Eager delivery: a callback that does not wait costs no task; one that waits behaves as if awaited."""

from __future__ import annotations

import asyncio
import threading
import types
from collections.abc import Iterator

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


class _Fetcher:
    """What ``faust_fence.wake_fetch`` touches of aiokafka's ``Fetcher``: the futures a fetch waits on."""

    def __init__(self) -> None:
        self._fetch_waiters: set[asyncio.Future[None]] = set()


class _Consumer:
    """Faust's consumer as ``on_buffer_drop`` and ``wake_fetch`` see it, its consumer thread's loop running."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._buffered_partitions: set[str] = set()
        self._active_partitions: set[str] = {"events-0", "spans-0"}
        self.app = types.SimpleNamespace(in_recovery=False)
        self._thread = types.SimpleNamespace(thread_loop=loop, _consumer=types.SimpleNamespace(_fetcher=_Fetcher()))

    def _get_active_partitions(self) -> set[str]:
        return self._active_partitions


def _waiting_fetch(consumer: _Consumer) -> asyncio.Future[None]:
    loop = consumer._thread.thread_loop

    async def register() -> asyncio.Future[None]:
        waiter = loop.create_future()
        consumer._thread._consumer._fetcher._fetch_waiters.add(waiter)
        return waiter

    return asyncio.run_coroutine_threadsafe(register(), loop).result(5)


@pytest.fixture
def thread_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in its own thread, as Faust's consumer thread runs aiokafka's."""
    faust_speedups.apply()
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.close()


def test_a_partition_put_back_after_a_full_buffer_wakes_the_waiting_fetch(
        thread_loop: asyncio.AbstractEventLoop) -> None:
    from faust.transport.consumer import Consumer

    consumer = _Consumer(thread_loop)
    Consumer.on_buffer_full(consumer, "events-0")  # type: ignore[arg-type]
    assert consumer._active_partitions == {"spans-0"}
    waiter = _waiting_fetch(consumer)

    Consumer.on_buffer_drop(consumer, "events-0")  # type: ignore[arg-type]

    assert consumer._active_partitions == {"events-0", "spans-0"}
    asyncio.run_coroutine_threadsafe(asyncio.wait_for(asyncio.shield(waiter), 5), thread_loop).result(6)
    assert waiter.done() and waiter.result() is None


def test_a_drop_for_a_partition_never_taken_out_leaves_the_fetch_waiting(
        thread_loop: asyncio.AbstractEventLoop) -> None:
    from faust.transport.consumer import Consumer

    consumer = _Consumer(thread_loop)
    waiter = _waiting_fetch(consumer)

    Consumer.on_buffer_drop(consumer, "events-0")  # type: ignore[arg-type]

    asyncio.run_coroutine_threadsafe(asyncio.sleep(0.05), thread_loop).result(5)  # the loop ran what was queued
    assert not waiter.done()


def test_waking_before_the_consumer_started_or_after_it_stopped_does_nothing() -> None:
    from provstream.streams import faust_fence

    faust_fence.wake_fetch(types.SimpleNamespace(_thread=types.SimpleNamespace(_consumer=None)))
    faust_fence.wake_fetch(object())
    closed = asyncio.new_event_loop()
    closed.close()
    faust_fence.wake_fetch(_Consumer(closed))


def test_stream_iterator_yields_to_the_loop_every_nth_event() -> None:
    import faust._cython.streams as cython_streams

    faust_speedups.apply()
    assert isinstance(cython_streams.sleep, faust_speedups.SometimesYield)
    assert cython_streams.sleep.every == faust_speedups.STREAM_YIELD_EVERY

    sleep = faust_speedups.SometimesYield(3)
    ran: list[int] = []

    async def other() -> None:
        ran.append(0)

    async def stream() -> list[int]:
        seen = []
        task = asyncio.ensure_future(other())
        for _ in range(6):
            await sleep(0)
            seen.append(len(ran))  # how often the other task had run before this event
        await task
        return seen

    # The other task is scheduled before the first event; it first gets the loop at the 3rd call.
    assert asyncio.run(stream()) == [0, 0, 1, 1, 1, 1]


def test_sometimes_yield_keeps_real_delays() -> None:
    sleep = faust_speedups.SometimesYield(64)

    async def main() -> str:
        return await sleep(0.001, "slept")

    assert asyncio.run(main()) == "slept"


class _Conf:
    """A settings stand-in that counts its reads, as Faust's registry resolves each one."""

    def __init__(self, **values: object) -> None:
        self.values = values
        self.reads = 0

    def __getattr__(self, name: str) -> object:
        self.reads += 1
        return self.values[name]


def test_the_settings_read_per_message_are_read_once() -> None:
    from faust import App
    from faust.transport.producer import ProducerBuffer

    faust_speedups.apply()
    assert ProducerBuffer.size.fget is faust_speedups._buffer_size  # type: ignore[attr-defined]
    assert App.create_event is faust_speedups._create_event

    pending: asyncio.Queue[int] = asyncio.Queue()
    for i in range(3):
        pending.put_nowait(i)
    conf = _Conf(producer_threaded=False)
    buffer = types.SimpleNamespace(app=types.SimpleNamespace(conf=conf), pending=pending, queue=None)
    assert [faust_speedups._buffer_size(buffer) for _ in range(5)] == [3] * 5 and conf.reads == 1
    threaded = types.SimpleNamespace(app=types.SimpleNamespace(conf=_Conf(producer_threaded=True)), pending=pending,
                                     queue=None)
    assert faust_speedups._buffer_size(threaded) == 0  # no thread's queue yet
    threaded.queue = asyncio.Queue()
    threaded.queue.put_nowait(1)
    assert faust_speedups._buffer_size(threaded) == 1

    made = []

    class Event:
        def __init__(self, *args: object) -> None:
            made.append(args)

    conf = _Conf(Event=Event)
    app = types.SimpleNamespace(conf=conf)
    events = [faust_speedups._create_event(app, b"k", i, [], "message") for i in range(4)]
    assert all(isinstance(e, Event) for e in events) and conf.reads == 1
    assert made[2] == (app, b"k", 2, [], "message")
