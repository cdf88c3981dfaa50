"""A fix for faust-streaming 0.15.3: resuming stream partitions after a rebalance could skip events.

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
for a reason not found yet; :class:`provstream.streams.app.OffsetGuard`
therefore checks every batch for a hole and ends the worker before Faust
can commit over one.
"""

from __future__ import annotations

import asyncio
from typing import Any

from faust.tables.recovery import Recovery

_APPLIED = "_provstream_seek_before_resume"


def apply() -> None:
    """Patch :class:`faust.tables.recovery.Recovery` (idempotent)."""
    if getattr(Recovery, _APPLIED, False):
        return
    Recovery.on_recovery_completed = on_recovery_completed  # type: ignore[method-assign]
    Recovery._resume_streams = _resume_streams  # type: ignore[method-assign]
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
