"""Two fixes for faust-streaming 0.15.3 (aiokafka 0.14) that could skip events after a restart.

Pinned and fenced: :mod:`.faust_fence` refuses other versions and
fingerprints every function replaced here. Incident history: CHANGELOG.md.

**Fetching for partitions Faust does not want** (replaces
``AIOKafkaConsumerThread._fetch_records``). Upstream: Faust hands its *live*
set of active partitions to the consumer thread, and aiokafka reads an *empty*
set as "every partition". When a restarted worker finishes reading its
table's changelog, Faust pauses the changelog partitions before it resumes
the events partitions, so for a moment the set is empty: a waiting fetch
drains the events partitions, Faust's ``getmany`` drops those records as not
active, and aiokafka's position has already moved past them, so they are
never read. Here: nothing is fetched for an empty set, and for records of
partitions no longer active when the fetch returns, aiokafka is sought back
to the first of them in the consumer thread (before anything else runs
there), so they are read again once the partition resumes; a seek Faust
issued in between is never overtaken. Shown by
``tests/unit/test_faust_fixes.py::test_an_empty_active_set_fetches_nothing_rather_than_everything``
and ``…::test_records_of_a_partition_paused_while_the_fetch_waited_are_fetched_again``.

**Seeking before resuming** (replaces ``Recovery.on_recovery_completed`` and
``Recovery._resume_streams``). Upstream, recovery ends by (1) resuming the
stream partitions, (2) ``await consumer.perform_seek()`` to the committed
offsets, (3) ``app.flow_control.resume()``, which clears every agent's queue.
Between 1 and 2 the fetcher queues events from the old position; the agent
folds some, step 3 drops the rest, and the fetcher's read offset, advanced
past them, makes it discard their refetch after the seek ("DROPPED MESSAGE
ROFF"): a dropped event is committed over, several stall commits for good.
Here the same steps run in another order, with no ``await`` between the last
three: seek while the stream partitions are still paused, clear the queues,
then resume the partitions and the flow (the order of upstream's fix for the
table-less path, faust-streaming PR #217). Shown by
``…::test_streams_resume_only_after_the_seek_and_the_queue_clear``.
:class:`provstream.streams.app.OffsetGuard` still checks every batch for a
hole and ends the worker before Faust could commit over one
(``…::test_the_guard_names_a_hole_after_the_last_event_or_the_committed_offset``).
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
