"""Bulk rebuild: the triples topic → Neo4j's offline importer → the streaming sink (docs/replay.md).

``provstream replay --bulk`` (or ``provstream rebuild``) rebuilds an empty
database of the local stack from the triples topic:

1. checks: the sink's consumer group has no member (the sink is stopped), Neo4j
   answers and its database is empty (``--force`` replaces one that is not);
2. notes the triples topic's end offsets, reads every partition from its
   beginning up to them, and folds the records into a :class:`GraphImage` batch
   by batch exactly as the sink would write them: the sink's own
   :func:`split_retractions`, :func:`decode_records`, :func:`build_rows` (via
   :func:`isolate_rejects`, so a message Neo4j would reject is isolated the
   same way) and :func:`lineage_rows`; retraction records erase their session.
   With several cores, one process per set of partitions folds and writes its
   own files (:mod:`.bulk_fold`), unless their images would not merge exactly;
3. writes the image as CSV (:mod:`.neo4j.csvfiles`) while Neo4j stops (the
   database is empty, or replaced with ``--force``), runs ``neo4j-admin database
   import full --overwrite-destination`` through ``deploy/neo4j.sh import``,
   and starts Neo4j again (also when the import failed);
4. runs the sink's :meth:`Neo4jStore.setup` (constraint and indexes: phase ``indexes``)
   and sets the empty lists CSV cannot carry (phase ``lists``);
5. dead-letters the records the sink would have dead-lettered, those past the
   sink group's committed offsets (earlier ones it dead-lettered already);
6. commits the sink group's offsets to the end offsets of step 2: a sink started
   afterwards continues with the first record the import did not cover.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.errors import CommitFailedError, KafkaError
from kafka.structs import OffsetAndMetadata, TopicPartition

from provstream.connectors.bulk_fold import (
    FOLD_BATCH,
    ImageFold,
    fold_parts,
    read_records,
    reader_options,
    split_ranges,
)
from provstream.connectors.neo4j import cypher as q
from provstream.connectors.neo4j.csvfiles import ImportPlan, write_csv
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.connectors.sink import Failure, Record, dlq_headers
from provstream.crypto import KeyRing
from provstream.errors import ConfigError, ProvstreamError, StoreUnavailable
from provstream.gc_tuning import collector_paused
from provstream.keys import close_ring, open_ring
from provstream.security import check_kafka, kafka_python_options
from provstream.settings import Settings

# Properties that may hold an empty list, and the statement that sets it after the import.
EMPTY_LIST_STATEMENTS = {"missingSteps": q.SET_EMPTY_MISSING_STEPS}


@dataclass(frozen=True)
class BulkOptions:
    """How to run a bulk rebuild.

    :ivar force: replace a database that is not empty.
    :ivar keep_files: leave the CSV files (under ``directory``) after the import.
    :ivar directory: where the CSV files go; ``None``: ``<stack dir>/bulk/<UTC time>``.
    """

    force: bool = False
    keep_files: bool = False
    directory: Path | None = None


@dataclass
class BulkStats:
    """What a bulk rebuild read, wrote and handed over, and where its time went (seconds per phase)."""

    records: int = 0
    total: int = 0
    messages: int = 0
    triples: int = 0
    retractions: int = 0
    dead_letters: int = 0
    dead_lettered: int = 0
    nodes: int = 0
    relationships: int = 0
    ends: dict[int, int] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0  # wall time of the whole command (the Neo4j stop overlaps the reading)
    processes: int = 1  # that read and folded the partitions (bulk_fold.fold_parts)
    serial_because: str | None = None  # why several processes' folds were not merged (then one read it all)

    @property
    def offline_seconds(self) -> float:
        """Reading, folding, CSV and the importer: everything but stopping and starting the server."""
        return sum(s for name, s in self.phases.items() if name in ("read", "csv", "import"))

    def rate(self, seconds: float) -> float:
        return self.triples / seconds if seconds > 0 else 0.0

    def summary(self) -> str:
        """One line: counts, the rate overall and without the server restart, the handover offsets.

        Example: ``bulk: 200000 triples (20000 messages, 0 dead letters, 0 retractions; folded in 2
        processes) -> 30000 nodes, 40000 relationships in 40.0 s (5000 triples/s; 100000 triples/s without
        the Neo4j stop/start) [read 2.0 s, ...]; sink group continues at 0:5000 1:5000``.
        """
        phases = ", ".join(f"{name} {s:.1f} s" for name, s in self.phases.items())
        offsets = " ".join(f"{p}:{o}" for p, o in sorted(self.ends.items()))
        folded = (f"in one process: {self.serial_because}" if self.serial_because
                  else f"in {self.processes} process{'es' if self.processes > 1 else ''}")
        return (f"bulk: {self.triples} triples ({self.messages} messages, {self.dead_letters} dead letters, "
                f"{self.retractions} retractions; folded {folded}) -> {self.nodes} nodes, "
                f"{self.relationships} relationships "
                f"in {self.seconds:.1f} s ({self.rate(self.seconds):.0f} triples/s; "
                f"{self.rate(self.offline_seconds):.0f} triples/s without the Neo4j stop/start) [{phases}]; "
                f"sink group continues at {offsets}")


Progress = Callable[[BulkStats], None]


# -- the rebuild -----------------------------------------------------------------------

def bulk_rebuild(settings: Settings, options: BulkOptions = BulkOptions(),
                 progress: Progress | None = None,
                 run_server: Callable[[str, tuple[str, ...]], str] | None = None) -> BulkStats:
    """Rebuild the local stack's database from the triples topic with the offline importer, then hand over.

    :param settings: the stack's settings (with the Neo4j password).
    :param options: ``force``, ``keep_files``, ``directory``.
    :param progress: called with the stats while reading.
    :param run_server: runs ``deploy/neo4j.sh VERB ARGS`` (tests may pass their own); default
        :func:`provstream.stack.server`.
    :returns: what was imported and the offsets handed to the sink group.
    :raises ConfigError: the sink is running, the database is not empty (without ``force``), no local stack.
    :raises ProvstreamError: Kafka, Neo4j or the importer failed (Neo4j is started again in any case).

    Example: ``print(bulk_rebuild(settings, BulkOptions(force=True)).summary())``.
    """
    if run_server is None:
        from provstream.stack import server

        def run_server(verb: str, args: tuple[str, ...]) -> str:
            return server(settings, "neo4j", verb, *args, extra_env=server_env(settings))

    if not (settings.stack_dir / "neo4j").is_dir():
        raise ConfigError(f"bulk rebuild imports into the local stack's Neo4j, and {settings.stack_dir / 'neo4j'} "
                          "does not exist (set PROVSTREAM_STACK_DIR; start the stack once)")
    stats = BulkStats()
    began = time.monotonic()
    check_kafka(settings, "sink")
    try:
        _refuse_running_sink(settings)
        consumer = KafkaConsumer(**reader_options(settings), group_id=settings.sink_group, client_id="provstream-bulk")
    except KafkaError as exc:
        raise ProvstreamError(f"cannot reach Kafka at {settings.kafka_bootstrap}: {exc}") from exc
    ring = open_ring(settings, "sink")
    stopper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="provstream-bulk-stop")
    try:
        _refuse_non_empty(settings, options.force)
        stopped = stopper.submit(_timed, stats, "stop", lambda: run_server("down", ()))
        try:
            directory = options.directory or settings.stack_dir / "bulk" / datetime.now(UTC).strftime(
                "%Y%m%dT%H%M%SZ")
            try:
                with collector_paused():  # the image is millions of acyclic objects
                    plan, failures, committed = _fold(consumer, settings, ring, directory, stats, progress)
                stats.nodes, stats.relationships = plan.nodes, plan.relationships
                argfile = directory / "import.args"
                argfile.write_text("".join(a + "\n" for a in plan.arguments(settings.neo4j_database)),
                                   encoding="utf-8")
                stopped.result()
                _timed(stats, "import", lambda: run_server("import", (str(argfile),)))
            finally:
                if not options.keep_files:
                    shutil.rmtree(directory, ignore_errors=True)
        finally:
            with contextlib.suppress(Exception):
                stopped.result()  # its own error, if any, was raised above
            _timed(stats, "start", lambda: run_server("up", ()))
        _finish_store(settings, plan, stats)
        stats.dead_letters = len(failures)
        stats.dead_lettered = _dead_letter(settings, failures, committed)
        _timed(stats, "handover", lambda: _commit(consumer, settings, stats.ends))
    finally:
        stopper.shutdown(wait=True)
        consumer.close(autocommit=False)
        close_ring(ring)
        stats.seconds = time.monotonic() - began
    return stats


def server_env(settings: Settings) -> dict[str, str]:
    """The ports ``deploy/neo4j.sh up`` must start the server on again: those the settings connect to.

    >>> server_env(Settings(neo4j_uri="bolt://127.0.0.1:27687", neo4j_http="http://127.0.0.1:27474"))
    {'PROVSTREAM_NEO4J_BOLT_PORT': '27687', 'PROVSTREAM_NEO4J_HTTP_PORT': '27474'}
    """
    out: dict[str, str] = {}
    for name, url in (("PROVSTREAM_NEO4J_BOLT_PORT", settings.neo4j_uri), ("PROVSTREAM_NEO4J_HTTP_PORT",
                                                                          settings.neo4j_http)):
        port = urlparse(url).port
        if port is not None:
            out[name] = str(port)
    return out


def _timed(stats: BulkStats, phase: str, step: Callable[[], Any]) -> Any:
    began = time.monotonic()
    try:
        return step()
    finally:
        stats.phases[phase] = stats.phases.get(phase, 0.0) + time.monotonic() - began


# How long a group coordinator that is not ready yet (a broker that just started) is waited for.
COORDINATOR_WAIT_S = 30.0


def describe_group(admin: Any, group_id: str, wait_s: float = COORDINATOR_WAIT_S,
                   sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """``admin.describe_groups([group_id])``, retried while Kafka answers with a retriable error.

    A broker that has just started has no group coordinator for a while (it is still creating
    ``__consumer_offsets``) and answers ``CoordinatorNotAvailableError``: that is waited for.

    :param admin: a :class:`kafka.KafkaAdminClient`.
    :param group_id: the consumer group.
    :param wait_s: how long retriable errors are retried (every 0.5 s) before the last is raised.
    :returns: what ``describe_groups`` returns (group id to description).

    Example: ``describe_group(admin, "provstream-sink")`` on a broker started a second ago
    returns once its coordinator is ready.
    """
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return dict(admin.describe_groups([group_id]))
        except KafkaError as exc:
            if not exc.retriable or time.monotonic() >= deadline:
                raise
            sleep(0.5)


def _refuse_running_sink(settings: Settings) -> None:
    admin = KafkaAdminClient(**kafka_python_options(settings, "sink"), client_id="provstream-bulk")
    try:
        for group in describe_group(admin, settings.sink_group).values():
            members = len(group.get("members") or ())
            if members:
                raise ConfigError(f"the sink group {settings.sink_group} has {members} running member(s): "
                                  "stop the sink(s) before a bulk rebuild (it hands their offsets over)")
    finally:
        admin.close()


def _refuse_non_empty(settings: Settings, force: bool) -> None:
    try:
        with Neo4jStore(settings) as store:
            nodes = store.count_nodes()
    except StoreUnavailable as exc:
        raise ConfigError(f"Neo4j is not reachable at {settings.neo4j_uri} ({exc}): start it "
                          "(provstream stack up --servers-only) so that bulk rebuild can check it is empty") from exc
    if nodes and not force:
        raise ConfigError(f"the database {settings.neo4j_database} is not empty ({nodes} nodes): bulk rebuild "
                          "imports into an empty database only (--force replaces it)")


def _ranges(consumer: KafkaConsumer, settings: Settings,
            stats: BulkStats) -> tuple[dict[TopicPartition, tuple[int, int]], dict[TopicPartition, int]]:
    """Every partition's [beginning, end) offsets as seen now, and the sink group's committed offsets."""
    topic = settings.triples_topic
    partitions = consumer.partitions_for_topic(topic)
    if not partitions:
        raise ProvstreamError(f"topic {topic} does not exist or has no partitions")
    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    starts, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
    committed = {tp: consumer.committed(tp) or 0 for tp in tps}
    stats.ends = {tp.partition: ends[tp] for tp in tps}
    ranges = {tp: (starts[tp], ends[tp]) for tp in tps}
    stats.total = sum(max(0, end - start) for start, end in ranges.values())
    return ranges, committed


def bulk_processes(settings: Settings, partitions: int) -> int:
    """How many processes read and fold: ``PROVSTREAM_BULK_PROCESSES``, or one per core; at most one per partition.

    >>> bulk_processes(Settings(bulk_processes=3), 2), bulk_processes(Settings(bulk_processes=1), 4)
    (2, 1)
    """
    wanted = settings.bulk_processes or os.cpu_count() or 1
    return max(1, min(wanted, partitions))


def _fold(consumer: KafkaConsumer, settings: Settings, ring: KeyRing | None, directory: Path,
          stats: BulkStats, progress: Progress | None) -> tuple[ImportPlan, list[Failure], dict[TopicPartition, int]]:
    """Read and fold the topic (phase ``read``), write the CSV (phase ``csv``); in several processes if it can."""
    ranges, committed = _ranges(consumer, settings, stats)

    def on_records(records: int, triples: int) -> None:
        stats.records, stats.triples = records, triples
        if progress is not None:
            progress(stats)

    groups = split_ranges(ranges, bulk_processes(settings, sum(1 for s, e in ranges.values() if s < e)))
    if len(groups) > 1:
        folded = fold_parts(settings, consumer, ring, groups, directory / "parts", on_records)
        stats.phases["read"] = folded.read_seconds
        if folded.plan is not None:
            reports = folded.reports
            stats.processes = len(groups)
            stats.records = sum(r.records for r in reports)
            stats.messages, stats.triples = sum(r.messages for r in reports), sum(r.triples for r in reports)
            stats.retractions = sum(r.retractions for r in reports)
            stats.phases["csv"] = folded.csv_seconds
            return folded.plan, [f for r in reports for f in r.failures], committed
        stats.serial_because = folded.conflict  # read again below, in this process alone
    fold = ImageFold(ring)

    def add(records: list[Record]) -> None:
        fold.add(records)
        stats.messages, stats.retractions = fold.messages, fold.retractions
        on_records(stats.records + len(records), fold.triples)

    stats.records = 0
    _timed(stats, "read", lambda: read_records(consumer, ranges, FOLD_BATCH, add))
    plan = _timed(stats, "csv", lambda: write_csv(fold.image, directory))
    return plan, fold.failures, committed


def _finish_store(settings: Settings, plan: ImportPlan, stats: BulkStats) -> None:
    """The constraint and indexes (phase ``indexes``), then the empty lists (phase ``lists``)."""
    unknown = sorted(set(plan.empty_lists) - set(EMPTY_LIST_STATEMENTS))
    if unknown:
        raise ProvstreamError(f"cannot set the empty list property {unknown[0]!r} after the import")
    attempt_until = time.monotonic() + 60
    while True:
        try:
            with Neo4jStore(settings) as store:
                _timed(stats, "indexes", store.setup)
                for name, iris in sorted(plan.empty_lists.items()):
                    done = _timed(stats, "lists", partial(store.set_empty_lists, EMPTY_LIST_STATEMENTS[name]))
                    if done != len(iris):
                        raise ProvstreamError(f"the imported graph has {done} nodes to take an empty {name} list, "
                                              f"the image {len(iris)}: rebuild it with the sink instead "
                                              "(provstream replay)")
            return
        except StoreUnavailable:
            if time.monotonic() > attempt_until:
                raise
            time.sleep(1)


def _dead_letter(settings: Settings, failures: list[Failure], committed: dict[TopicPartition, int]) -> int:
    """Send the failures the sink has not handled yet (past its committed offsets) to the dead-letter topic."""
    due = [(r, reason) for r, reason in failures if r.offset >= committed.get(TopicPartition(r.topic, r.partition), 0)]
    if not due:
        return 0
    producer = KafkaProducer(**kafka_python_options(settings, "sink"), client_id="provstream-bulk-dlq", acks="all",
                             max_request_size=settings.max_message_bytes + 64 * 1024)
    try:
        futures = [producer.send(settings.triples_dlq_topic, key=r.key, value=r.value, headers=dlq_headers(r, reason))
                   for r, reason in due]
        producer.flush()
        for future in futures:
            future.get(timeout=30)
    except KafkaError as exc:
        raise ProvstreamError(f"cannot dead-letter to {settings.triples_dlq_topic}: {exc}") from exc
    finally:
        producer.close(timeout=10)
    return len(due)


def _commit(consumer: KafkaConsumer, settings: Settings, ends: dict[int, int]) -> None:
    offsets = {TopicPartition(settings.triples_topic, p): OffsetAndMetadata(o, "", -1) for p, o in ends.items()}
    try:
        consumer.commit(offsets)
    except (CommitFailedError, KafkaError) as exc:
        raise ProvstreamError(f"the import is done but the sink group {settings.sink_group}'s offsets could not be "
                              f"set ({exc}); was a sink started meanwhile? stop it and set them to "
                              + " ".join(f"{p}:{o}" for p, o in sorted(ends.items()))) from exc
