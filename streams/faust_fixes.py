"""Two fixes for faust-streaming 0.15.3 (aiokafka 0.14) that could skip events after a restart.

**Fetching for partitions Faust does not want** (:func:`_fetch_records`).
Faust's fetcher hands its *live* set of active partitions to the consumer
thread, which waits up to a second in aiokafka's ``fetched_records``; aiokafka
reads an *empty* set as "every partition". When a restarted worker finished
reading its table's changelog, Faust paused the changelog partitions before
it resumed the events partitions, so for a moment the set was empty: the
waiting fetch drained the events partitions' records, Faust's ``getmany``
dropped them because they were not active, and aiokafka's position had
already moved past them. The worker then sat idle with every event after
its committed offsets unread (seen in about 1 of 3 SIGKILL-and-restart runs
of tests/integration/test_worker.py, with nothing logged). The replacement
fetches nothing for an empty set and, for records of partitions no longer
active when the fetch returns, seeks aiokafka back to the first of them in
the consumer thread, before anything else can run there, so they are read
again once the partition is resumed; a seek Faust issued in between
(recovery seeks to the committed offsets) is never overtaken, because the
drained records started at the position that seek had set.

**Resuming before seeking** (:func:`on_recovery_completed`).

After a rebalance, Faust's table recovery ends in ``Recovery.on_recovery_completed``
(or ``Recovery._resume_streams`` when there was nothing to restore), which did:

1. resume the stream partitions (the events topic) in the consumer;
2. ``await consumer.perform_seek()``: seek them to the committed offsets and
   set the fetcher's read offsets to those;
3. ``app.flow_control.resume()``, which *clears* every agent's queue.

The fetcher runs during recovery (it reads the changelog), so between 1 and 2
it fetched events at the consumer's position and put them in the agent's
queue; the agent folded some of them, step 3 dropped the rest, and the
fetcher's read offset, advanced past them, made it discard their refetch
after the seek ("DROPPED MESSAGE ROFF"). A single dropped event was then
committed over (Faust treats a one-offset hole above the committed offset as
done), several stalled the commits for good. The fault suite showed both:
2 of 11 SIGKILL-the-worker runs, each time right after the restarted worker
recovered its table (tests/faults, worker logs with ``DEVLOG=1``).

The fix keeps Faust's steps and changes their order: seek while the stream
partitions are still paused, clear the queues, and only then resume the
partitions and the flow, with no ``await`` in between, so nothing can be
fetched into a queue that is about to be cleared or past a read offset that
is about to be reset. Same order as upstream's fix for the table-less path
(faust-streaming PR #217); applied to both methods. With it no fault run
dropped a refetch any more, but 2 of 14 still lost a whole block of events
fetched right after the restarted worker's recovery (325 and 786 events),
(the fetch described above); :class:`provstream.streams.app.OffsetGuard`
still checks every batch for a hole and ends the worker before Faust could
commit over one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiokafka.errors import ConsumerStoppedError
from faust.tables.recovery import Recovery
from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

log = logging.getLogger("provstream.worker")
_APPLIED = "_provstream_seek_before_resume"


def apply() -> None:
    """Patch Faust's ``Recovery`` and its aiokafka consumer thread (idempotent)."""
    if getattr(Recovery, _APPLIED, False):
        return
    Recovery.on_recovery_completed = on_recovery_completed  # type: ignore[method-assign]
    Recovery._resume_streams = _resume_streams  # type: ignore[method-assign]
    AIOKafkaConsumerThread._fetch_records = _fetch_records  # type: ignore[method-assign]
    setattr(Recovery, _APPLIED, True)


async def _seek_then_resume(self: Any, generation_id: int, *, restored: bool) -> bool:
    """Seek the stream partitions, clear the queues, then resume; ``False`` if a new rebalance began first."""
    app = self.app
    consumer = app.consumer
    assignment = consumer.assignment()
    if app.consumer_generation_id != generation_id:
        self.log.warning("Recovery rebalancing again app id %s param %s", app.consumer_generation_id, generation_id)
        return False
    streams = {tp for tp in assignment if not self._is_changelog_tp(tp)}
    if assignment:
        self.log.info("Seek stream partitions to committed offsets.")
        await self._wait(consumer.perform_seek(), timeout=app.conf.broker_request_timeout)
    else:
        self.log.info("Resuming streams with empty assignment")
    self.completed.set()
    self.log.info("Resuming flow...")
    app.flow_control.resume()  # clears the agents' queues: nothing of the streams can be in them yet
    consumer.resume_partitions(streams)
    consumer.resume_flow()
    await app._fetcher.maybe_start()
    self.tables.on_actives_ready()
    if not restored or not app.assignor.assigned_standbys():
        self.tables.on_standbys_ready()
    app.on_rebalance_end()
    self.log.info("Worker ready")
    return True


async def on_recovery_completed(self: Any, generation_id: int = 0) -> None:
    """``Recovery.on_recovery_completed`` with the stream partitions resumed after the seek."""
    self.log.info("Restore complete!")
    await self.app.on_rebalance_complete.send()
    self._set_recovery_ended()
    callbacks = [asyncio.ensure_future(table.on_recovery_completed(self.actives_for_table[table],
                                                                   self.standbys_for_table[table]))
                 for table in self.tables.values()]
    if callbacks:
        await asyncio.wait(callbacks)
    await _seek_then_resume(self, generation_id, restored=True)


async def _resume_streams(self: Any, generation_id: int = 0) -> None:
    """``Recovery._resume_streams`` (nothing to restore) with the same order."""
    await self.app.on_rebalance_complete.send()
    await _seek_then_resume(self, generation_id, restored=False)


async def _fetch_records(
    self: Any, consumer: Any, active_partitions: set[Any] | None,
    timeout: float | None = None, max_records: int | None = None,
) -> dict[Any, list[Any]]:
    """``AIOKafkaConsumerThread._fetch_records``: only records of partitions Faust still wants (see the module)."""
    if not self.consumer.flow_active or (active_partitions is not None and not active_partitions):
        return {}
    fetcher = consumer._fetcher
    if consumer._closed or fetcher._closed:
        raise ConsumerStoppedError()
    with fetcher._subscriptions.fetch_context():
        records: dict[Any, list[Any]] = await fetcher.fetched_records(
            active_partitions, timeout=timeout, max_records=max_records)
    if active_partitions is None:
        return records
    wanted = (self.consumer, consumer, active_partitions)
    return {tp: batch for tp, batch in records.items() if _wanted(*wanted, tp, batch)}


def _wanted(faust_consumer: Any, consumer: Any, active: set[Any], tp: Any, batch: list[Any]) -> bool:
    """Whether Faust's ``getmany`` will deliver ``tp``'s records; if not, seek back so they are fetched again."""
    if tp in active or tp in faust_consumer._buffered_partitions:
        return True
    if batch and tp in consumer.assignment():
        log.info("%s: %d records fetched while not active; reading them again from offset %d",
                 tp, len(batch), batch[0].offset)
        consumer.seek(tp, batch[0].offset)
    return False
