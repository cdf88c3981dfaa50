"""Faust fixes: the recovery seeks before it resumes; the consumer thread hands over only records Faust still wants."""

from __future__ import annotations

import asyncio
from typing import Any

from faust.tables.recovery import Recovery

from provstream.streams import faust_fixes

STREAM = ("events", 0)
CHANGELOG = ("app-sessions-changelog", 0)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> None:
            self.calls.append(name + (f" {sorted(args[0])}" if args and isinstance(args[0], set) else ""))
        return record


class FakeRecovery:
    def __init__(self, calls: Recorder, generation: int = 3) -> None:
        seek_done = asyncio.Event()

        async def perform_seek() -> None:
            calls("seek start")()
            await asyncio.sleep(0)  # the fetcher could run here: nothing of the streams may be resumed yet
            calls("seek end")()
            seek_done.set()

        async def maybe_start() -> None:
            calls("fetcher")()

        async def send() -> None:
            calls("rebalance complete")()

        class Table:
            async def on_recovery_completed(self, actives: Any, standbys: Any) -> None:
                calls("table recovered")()

        table = Table()
        self.log = type("Log", (), {"info": lambda *a: None, "warning": lambda *a: None, "dev": lambda *a: None})()
        self.tables = type("Tables", (), {"values": lambda s: [table], "on_actives_ready": calls("actives ready"),
                                          "on_standbys_ready": calls("standbys ready")})()
        self.actives_for_table = {table: set()}
        self.standbys_for_table = {table: set()}
        self.completed = type("Done", (), {"set": calls("completed")})()
        consumer = type("Consumer", (), {
            "assignment": lambda s: {STREAM, CHANGELOG}, "perform_seek": lambda s: perform_seek(),
            "resume_partitions": lambda s, tps: calls("resume partitions")(set(tps)),
            "resume_flow": calls("resume flow")})()
        self.app = type("App", (), {
            "consumer": consumer, "consumer_generation_id": generation,
            "conf": type("Conf", (), {"broker_request_timeout": 5})(),
            "flow_control": type("Flow", (), {"resume": calls("clear queues and resume")})(),
            "_fetcher": type("Fetcher", (), {"maybe_start": lambda s: maybe_start()})(),
            "assignor": type("Assignor", (), {"assigned_standbys": lambda s: set()})(),
            "on_rebalance_end": calls("rebalance end"),
            "on_rebalance_complete": type("Signal", (), {"send": lambda s: send()})(),
        })()
        self._set_recovery_ended = calls("recovery ended")

    def _is_changelog_tp(self, tp: Any) -> bool:
        return bool(tp[0].endswith("-changelog"))

    async def _wait(self, coro: Any, timeout: float) -> None:
        await coro


def test_streams_resume_only_after_the_seek_and_the_queue_clear() -> None:
    for method in (faust_fixes.on_recovery_completed, faust_fixes._resume_streams):
        calls = Recorder()
        asyncio.run(method(FakeRecovery(calls), 3))
        order = calls.calls
        resume = order.index(f"resume partitions {[STREAM]}")
        assert order.index("seek end") < order.index("clear queues and resume") < resume < order.index("resume flow")
        assert "seek start" in order and order[-1] == "rebalance end"


def test_a_newer_rebalance_leaves_the_partitions_paused() -> None:
    calls = Recorder()
    asyncio.run(faust_fixes.on_recovery_completed(FakeRecovery(calls, generation=4), 3))
    assert not any(c.startswith(("resume", "seek")) for c in calls.calls)


def test_apply_patches_faust_once() -> None:
    faust_fixes.apply()
    faust_fixes.apply()
    assert Recovery.on_recovery_completed is faust_fixes.on_recovery_completed
    assert Recovery._resume_streams is faust_fixes._resume_streams


# -- the worker's offset guard -------------------------------------------------------

class Msg:
    def __init__(self, partition: int, offset: int, generation: int = 1) -> None:
        self.topic, self.partition, self.offset, self.generation_id = "events", partition, offset, generation
        self.tp = ("events", partition)


class Ev:
    def __init__(self, partition: int, offset: int, generation: int = 1) -> None:
        self.message = Msg(partition, offset, generation)


def test_the_guard_accepts_contiguous_offsets_and_redeliveries() -> None:
    from provstream.streams.app import OffsetGuard

    guard = OffsetGuard()
    committed = {("events", 0): 10}.get
    assert guard.check([Ev(0, 10), Ev(0, 11), Ev(1, 3)], committed) == ""  # p1: nothing committed yet
    assert guard.check([Ev(0, 12), Ev(1, 4)], committed) == ""
    assert guard.check([Ev(0, 9), Ev(0, 10)], committed) == "", "going back (a seek, a redelivery) is fine"


def test_the_guard_names_a_hole_after_the_last_event_or_the_committed_offset() -> None:
    from provstream.streams.app import OffsetGuard

    guard = OffsetGuard()
    committed = {("events", 0): 65, ("events", 1): 7}.get
    assert guard.check([Ev(0, 65), Ev(0, 66)], committed) == ""
    assert guard.check([Ev(0, 67), Ev(0, 284)], committed) == "events/0 68..283"
    fresh = OffsetGuard()
    assert fresh.check([Ev(1, 8)], committed) == "events/1 7..7", "the very first event must be the committed one"
    assert fresh.check([Ev(1, 2, generation=2)], {}.get) == "", "a new generation starts over"


class FakeFetcher:
    """aiokafka's fetcher as far as ``_fetch_records`` uses it: an empty ``partitions`` set means every partition."""

    _closed = False

    def __init__(self, buffered: dict[Any, list[Any]]) -> None:
        self.buffered = buffered
        self.asked: list[Any] = []
        self._subscriptions = self

    def fetch_context(self) -> Any:
        import contextlib
        return contextlib.nullcontext()

    async def fetched_records(self, partitions: Any, timeout: Any = None, max_records: Any = None) -> dict[Any, Any]:
        self.asked.append(set(partitions) if partitions is not None else None)
        taken = {tp: r for tp, r in self.buffered.items() if not partitions or tp in partitions}
        for tp in taken:
            del self.buffered[tp]
        return taken


class FakeKafkaConsumer:
    _closed = False

    def __init__(self, fetcher: FakeFetcher, assigned: set[Any]) -> None:
        self._fetcher = fetcher
        self.assigned = assigned
        self.seeks: list[tuple[Any, int]] = []

    def assignment(self) -> set[Any]:
        return self.assigned

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks.append((tp, offset))


class Record:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class FakeThread:
    def __init__(self, active: set[Any]) -> None:
        attributes = {"flow_active": True, "_buffered_partitions": set(), "_active_partitions": active}
        self.consumer = type("C", (), attributes)()


def _fetch(thread: FakeThread, consumer: FakeKafkaConsumer, active: set[Any] | None) -> dict[Any, Any]:
    return asyncio.run(faust_fixes._fetch_records(thread, consumer, active, timeout=1.0))


def test_an_empty_active_set_fetches_nothing_rather_than_everything() -> None:
    fetcher = FakeFetcher({STREAM: [Record(7)]})
    consumer = FakeKafkaConsumer(fetcher, {STREAM, CHANGELOG})
    assert _fetch(FakeThread(set()), consumer, set()) == {}
    assert fetcher.asked == [] and STREAM in fetcher.buffered and consumer.seeks == []


def test_records_of_a_partition_paused_while_the_fetch_waited_are_fetched_again() -> None:
    active = {CHANGELOG}
    fetcher = FakeFetcher({STREAM: [Record(7), Record(8)], CHANGELOG: [Record(3)]})

    async def paused_meanwhile(partitions: Any, timeout: Any = None, max_records: Any = None) -> dict[Any, Any]:
        partitions.clear()  # recovery ended: changelog paused, events not resumed yet; aiokafka reads "all"
        return await FakeFetcher.fetched_records(fetcher, partitions)

    fetcher.fetched_records = paused_meanwhile  # type: ignore[method-assign]
    consumer = FakeKafkaConsumer(fetcher, {STREAM, CHANGELOG})
    assert _fetch(FakeThread(active), consumer, active) == {}
    assert sorted(consumer.seeks) == [(CHANGELOG, 3), (STREAM, 7)], "drained partitions are read again"


def test_records_of_active_or_buffered_partitions_pass_and_unassigned_ones_are_not_seeked() -> None:
    other = ("events", 1)
    gone = ("events", 2)
    fetcher = FakeFetcher({STREAM: [Record(1)], other: [Record(5)], gone: [Record(9)]})
    consumer = FakeKafkaConsumer(fetcher, {STREAM, other})
    thread = FakeThread({STREAM})
    thread.consumer._buffered_partitions = {other}
    active: set[Any] = {STREAM}

    async def everything(partitions: Any, timeout: Any = None, max_records: Any = None) -> dict[Any, Any]:
        return await FakeFetcher.fetched_records(fetcher, None)

    fetcher.fetched_records = everything  # type: ignore[method-assign]
    got = _fetch(thread, consumer, active)
    assert set(got) == {STREAM, other}
    assert consumer.seeks == [], "a partition no longer assigned is not seeked (the rebalance sets its position)"


def test_client_only_fetches_pass_through() -> None:
    fetcher = FakeFetcher({STREAM: [Record(1)]})
    consumer = FakeKafkaConsumer(fetcher, {STREAM})
    assert set(_fetch(FakeThread(set()), consumer, None)) == {STREAM}


def test_apply_patches_the_consumer_thread() -> None:
    from faust.transport.drivers.aiokafka import AIOKafkaConsumerThread

    faust_fixes.apply()
    assert AIOKafkaConsumerThread._fetch_records is faust_fixes._fetch_records
