"""Batches that close when the stream has nothing more queued: low latency when idle, full batches under load.

Faust's ``Stream.take_events(max_, within)`` hands out a batch when it holds
``max_`` events, or else every ``within`` seconds. At 1,000 events/s with
``max_`` 2,000 the batch never fills, so every event waited for the next
``within`` tick (0-50 ms, 25 ms on average: BENCHMARKS.md, "Latency by
stage").

:func:`take_ready` is that method with one more way to close a batch: as
soon as the event just added is the last one the stream's channel holds
(its queue is empty). Faust's fetcher puts a whole fetch into that queue at
once, so when steps trickle in a batch is the steps that arrived together and
goes out at once; under a backlog the queue refills while a batch is folded
and published (the stream stops taking from it meanwhile), so the next batch
is full again. ``within`` stays the longest a taken event waits. Everything
else (acknowledgements, the strict ``max_``, stopping) is Faust's code,
unchanged; :mod:`.faust_fence` fingerprints the method this follows.

Adapted from faust-streaming 0.15.3 ``faust/streams.py`` (BSD-3-Clause,
Copyright (c) 2017-2020 Robinhood Markets, Inc.; (c) faust-streaming contributors).

Example::

    async for batch in take_ready(stream, 2000, within=0.05):
        ...  # a list of events; they are acknowledged when the next batch is asked for
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any, cast

from faust.types import EventT, StreamT
from mode.utils.futures import notify


def take_ready(stream: StreamT, max_: int, within: float) -> AsyncGenerator[list[EventT], None]:
    """Batches of at most ``max_`` events of ``stream``, each handed out once its channel's queue is empty.

    :param stream: an agent's stream.
    :param max_: the largest batch.
    :param within: the longest a batch waits for its first event to be handed out (seconds).
    :returns: an async generator of event lists; the events of a batch are acknowledged when the next
        batch is asked for (or the generator closes), as Faust's ``take_events`` does. The stream
        tracks it, so its stop closes a generator left open.
    """
    agen = _take_ready(stream, max_, within)
    cast(Any, stream)._active_agens.add(agen)
    return agen


async def _take_ready(stream: StreamT, max_: int, within: float) -> AsyncGenerator[list[EventT], None]:
    s: Any = stream  # Faust's Stream: the attributes below are not in its StreamT protocol
    events: list[EventT] = []
    ready = asyncio.Event()
    consumed = asyncio.Event()
    consuming: asyncio.Future[None] | None = None
    enable_acks: bool = s.enable_acks
    channel_it = s.channel.__aiter__()
    queue = getattr(s.channel, "queue", None)  # a channel without a queue: closed by size and time only
    queue_empty = queue.empty if queue is not None else (lambda: False)

    async def add_to_buffer(value: Any) -> Any:
        nonlocal consuming
        try:
            if consuming is not None:  # a batch is being handed out: wait until it is taken
                try:
                    await consuming
                finally:
                    consuming = None
            event = s.current_event
            if event is None:
                raise RuntimeError("Take buffer found current_event is None")
            events.append(event)
            if len(events) >= max_:
                ready.set()
                consumed.clear()  # strict: never more than max_ events in a batch
                await s.wait(consumed)
            elif queue_empty():
                ready.set()  # the last event the channel holds: the batch can go now
        except asyncio.CancelledError:  # pragma: no cover
            raise
        except Exception as exc:  # pragma: no cover - Faust's own handling
            s.log.exception("Error adding to take buffer: %r", exc)
            await s.crash(exc)
        return value

    s.enable_acks = False
    s.add_processor(add_to_buffer)
    s._enable_passive(channel_it)
    try:
        while not s.should_stop:
            await s.wait_for_stopped(ready, timeout=within)
            if events:
                consuming = s.loop.create_future()
                try:
                    yield list(events)
                finally:
                    for event in events:
                        await s.ack(event)
                    events.clear()
                    notify(consuming)
                    ready.clear()
                    consumed.set()
            else:
                ready.clear()
    finally:
        s.enable_acks = enable_acks
        s._processors.remove(add_to_buffer)
