"""Cheaper per-message delivery in faust-streaming 0.15.3's fetcher, same semantics.

Faust's fetcher (``Consumer._drain_messages``) hands each fetched message to
the conductor with ``await self.wait_first(callback(message),
self.suspend_flow.wait())``: four asyncio tasks per message (the callback,
the flow, the consumer's ``stopped`` and ``crashed`` events), an
``asyncio.wait`` and three cancellations, even though the callback almost
never has to wait (it only does while the flow is suspended for a rebalance,
the producer buffer is over its limit or the agent's queue is full). In the
worker's profile that was the largest single cost after the fold itself.

:func:`_drain_messages` below is Faust's loop with one change: it first runs
the callback eagerly, up to its first suspension point. If it finishes
there (the common case) the message is delivered without creating a task; if
it suspends, the started coroutine is handed to the same ``wait_first`` as
before (via :class:`Resumed`), so a suspended flow or a stopping consumer
interrupts it exactly as it would have. The read offset is set after the
callback either way, as Faust does.

**A fetch that wakes when a stream buffer drains** (wraps
``Consumer.on_buffer_drop``). When an agent's queue passes its high-water
mark (``stream_buffer_maxsize`` / 1.25), Faust takes that partition out of
the *live* set of partitions it fetches for, and puts it back once the queue
is under 40 %. Under a backlog, the worker's fetcher asked aiokafka for the
records of the partitions still in the set, often only the idle OTLP spans
topic's, and aiokafka waited up to the fetcher's one-second timeout for new
records of those, not noticing that the events partitions came back with
records already fetched: the worker sat idle for most of each second
(BENCHMARKS.md, "Throughput, seventh pass"). Here a partition put back wakes
that wait (in the consumer thread's loop), and aiokafka looks at its
records again at once, as it does when new records arrive.

**A stream yields to the event loop every** :data:`STREAM_YIELD_EVERY`
**events, not before each one.** Faust's stream iterator (the Cython
``StreamIterator.next`` the worker's streams run) starts every event with
``await asyncio.sleep(0)``: one trip through the event loop per event (an
``epoll_wait``, the loop's bookkeeping, a task step), which under a backlog
is about one loop iteration per event for nothing, since the next event is
already queued. :class:`SometimesYield` takes ``sleep``'s place in that
module: every :data:`STREAM_YIELD_EVERY`-th call is the real ``sleep(0)``,
the others finish at once. Other tasks (the fetcher, the producer, timers)
still run at least every that many events, and whenever the stream waits
for an event or for its batch to be taken (BENCHMARKS.md, "Throughput, ninth
pass").

**Two settings read once, not per message.** Faust's settings object
resolves every attribute through ``SettingsRegistry.__getattribute__`` and a
``Param`` descriptor; two of them were read for every message: the
conductor's ``wait_until_ebb`` reads ``ProducerBuffer.size``, which reads
``conf.producer_threaded``, and the channel's decoding calls
``App.create_event``, which reads ``conf.Event``. Here each is read on
first use and kept on the buffer and the app (2.5 % of the worker's samples
before; BENCHMARKS.md, "Throughput, thirteenth pass").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, cast

from faust import App, Sensor
from faust.transport import consumer as faust_consumer
from faust.transport import producer as faust_producer

try:
    from faust._cython import streams as faust_cython_streams
except ImportError:  # pragma: no cover - faust-streaming's wheels ship it; without it Faust runs its Python iterator
    faust_cython_streams = None

from provstream.streams import faust_fence

_APPLIED = "_provstream_eager_delivery"

#: Events a stream hands out between two yields to the event loop (Faust: one).
STREAM_YIELD_EVERY = 64


def apply() -> None:
    """Patch :class:`faust.transport.consumer.Consumer`, ``ProducerBuffer.size``, ``App.create_event`` and the
    Cython stream iterator's ``sleep`` (idempotent)."""
    cls = faust_consumer.Consumer
    if getattr(cls, _APPLIED, False):
        return
    cls._drain_messages = _drain_messages  # type: ignore[method-assign]
    cls.on_buffer_drop = _waking_on_buffer_drop(cls.on_buffer_drop)  # type: ignore[method-assign,assignment]
    faust_producer.ProducerBuffer.size = property(_buffer_size)  # type: ignore[assignment,method-assign]
    App.create_event = _create_event  # type: ignore[method-assign]
    if faust_cython_streams is not None and getattr(faust_cython_streams, "sleep", None) is asyncio.sleep:
        faust_cython_streams.sleep = SometimesYield(STREAM_YIELD_EVERY)
    setattr(cls, _APPLIED, True)


class _Done:
    """An awaitable that finishes at once, without a trip through the event loop."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return iter(())  # type: ignore[return-value]


_AT_ONCE = _Done()


class SometimesYield:
    """``asyncio.sleep`` for Faust's stream iterator: ``sleep(0)`` yields to the loop on every ``every``-th call.

    :param every: how many calls make one real ``asyncio.sleep(0)``; the others are awaitables that
        finish at once. A call with a delay other than 0 is always ``asyncio.sleep``'s.

    Example: ``faust._cython.streams.sleep = SometimesYield(64)``; then 63 of every 64
    ``await sleep(0)`` in ``StreamIterator.next`` go on at once.
    """

    __slots__ = ("every", "_calls")

    def __init__(self, every: int) -> None:
        self.every = max(1, every)
        self._calls = 0

    def __call__(self, delay: float, result: Any = None) -> Awaitable[Any]:
        if delay or result is not None:
            return asyncio.sleep(delay, result)
        self._calls += 1
        if self._calls < self.every:
            return _AT_ONCE
        self._calls = 0
        return asyncio.sleep(0)


def _waking_on_buffer_drop(on_buffer_drop: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    """Wrap ``Consumer.on_buffer_drop``: a partition put back wakes the fetch waiting in the consumer thread."""
    def waking(self: Any, tp: Any) -> None:
        put_back = tp in faust_fence.buffered_partitions(self)
        on_buffer_drop(self, tp)
        if put_back:
            faust_fence.wake_fetch(self)

    return waking


class Resumed:
    """An awaitable that finishes a coroutine already run to its first suspension.

    ``first`` is what the coroutine yielded there (the future it waits on);
    awaiting this yields it on to the running task and relays every later
    send/throw to the coroutine, as ``await coroutine`` would have.
    """

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self._coro, self._first
        while True:
            try:
                sent = yield value
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation included: the coroutine sees it where it waits
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


_DONE = object()


def run_eagerly(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coro`` to its first suspension: ``_DONE`` if it finished, else a :class:`Resumed` of it."""
    try:
        first = coro.send(None)
    except StopIteration:
        return _DONE
    return Resumed(coro, first)


async def _finish(resumed: Resumed) -> Any:
    return await resumed


async def _drain_messages(self: Any, fetcher: Any) -> None:  # pragma: no cover - exercised by the worker tests
    """``faust.transport.consumer.Consumer._drain_messages`` with eager delivery (see the module)."""
    callback = self.callback
    getmany = self.getmany
    consumer_should_stop = self._stopped.is_set
    fetcher_should_stop = fetcher._stopped.is_set

    get_read_offset = self._read_offset.__getitem__
    set_read_offset = self._read_offset.__setitem__
    flag_consumer_fetching = faust_consumer.CONSUMER_FETCHING
    set_flag = self.diag.set_flag
    unset_flag = self.diag.unset_flag
    commit_every = self._commit_every
    acks_enabled_for = self.app.topics.acks_enabled_for

    yield_every = 100
    num_since_yield = 0
    sleep = asyncio.sleep

    try:
        while not (consumer_should_stop() or fetcher_should_stop()):
            set_flag(flag_consumer_fetching)
            ait = getmany(timeout=1.0)
            await self.sleep(0)
            if not self.should_stop:
                async for tp, message in ait:
                    num_since_yield += 1
                    if num_since_yield > yield_every:
                        await sleep(0)
                        num_since_yield = 0

                    offset = message.offset
                    r_offset = get_read_offset(tp)
                    if r_offset is None or offset >= r_offset:
                        gap = offset - (r_offset or 0)
                        if gap > 1 and r_offset:
                            if acks_enabled_for(message.topic):
                                await self._add_gap(tp, r_offset + 1, offset)
                        if commit_every is not None:
                            if self._n_acked >= commit_every:
                                self._n_acked = 0
                                await self.commit()
                        pending = run_eagerly(callback(message))
                        if pending is not _DONE:
                            await self.wait_first(_finish(cast(Resumed, pending)), self.suspend_flow.wait())
                        set_read_offset(tp, offset)
                    else:
                        self.log.dev("DROPPED MESSAGE ROFF %r: k=%r v=%r", offset, message.key, message.value)
                unset_flag(flag_consumer_fetching)

    except self.consumer_stopped_errors:
        if self.transport.app.should_stop:
            self.log.info("Broker stopped consumer, shutting down...")
            return
        raise
    except asyncio.CancelledError:
        if self.transport.app.should_stop:
            self.log.info("Consumer shutting down for user cancel.")
            return
        raise
    except Exception as exc:
        self.log.exception("Drain messages raised: %r", exc)
        raise
    finally:
        unset_flag(flag_consumer_fetching)



_THREADED = "_provstream_producer_threaded"
_EVENT_CLASS = "_provstream_event_class"


def _buffer_size(self: Any) -> int:
    """faust-streaming 0.15.3's ``ProducerBuffer.size``, with ``conf.producer_threaded`` read once."""
    threaded = self.__dict__.get(_THREADED)
    if threaded is None:
        threaded = self.__dict__[_THREADED] = bool(self.app.conf.producer_threaded)
    if threaded:
        if not self.queue:
            return 0
        return len(self.queue._queue)
    return len(self.pending._queue)


def _create_event(self: Any, key: Any, value: Any, headers: Any, message: Any) -> Any:
    """faust-streaming 0.15.3's ``App.create_event``, with ``conf.Event`` read once."""
    event_class = self.__dict__.get(_EVENT_CLASS)
    if event_class is None:
        event_class = self.__dict__[_EVENT_CLASS] = self.conf.Event
    return event_class(self, key, value, headers, message)


def without_monitor(app: Any) -> None:
    """Replace Faust's ``Monitor`` in ``app.sensors`` by a sensor that records nothing (on start).

    The monitor keeps per-message and per-event statistics for Faust's web
    views, which the worker does not serve (``web_enabled`` is off). A bare
    :class:`faust.Sensor` takes its place rather than no sensor at all, so
    Faust's rebalance bookkeeping still finds a sensor state. ``app.monitor``
    stays usable for the calls Faust makes on it directly.
    """
    init_dependencies = app.on_init_dependencies

    def on_init_dependencies() -> Any:
        dependencies = init_dependencies()
        if app.monitor in set(app.sensors):
            app.sensors.remove(app.monitor)
            app.sensors.add(Sensor())
        return dependencies

    app.on_init_dependencies = on_init_dependencies
