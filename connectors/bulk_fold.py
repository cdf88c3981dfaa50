"""The bulk rebuild's read and fold: the triples topic into a :class:`GraphImage`, on every core.

:class:`ImageFold` folds records exactly as the sink writes them. :func:`fold_parts`
runs one fold per set of partitions, each in a process of its own (the
caller's is one of them), and merges their CSV files into one import.

Why the parts can be merged: the worker keys every record by its session, so
a session's records are all in one partition, and so are the nodes its triples
describe. Two parts' images then share only nodes no session owns: the
``(:Resource {iri, graph})`` a relationship row makes of an end it does not
find (:func:`.image.object_only`). Each part writes the nodes it owns and its
relationships, all parts with one array delimiter; the caller writes the
shared nodes once. The parts are not merged, and the caller folds everything
in its own process instead, when the result could depend on how the sink's
batches interleaved the partitions:

* a node is owned in two parts (one subject IRI in two partitions);
* a retraction in one part deleted a node that another part's rows named;
* two parts made one shared node with different ``graph`` values.

Example::

    result = fold_parts(settings, consumer, ring, groups, directory, on_records)
    if result.conflict is None:
        result.plan    # the import of every part's files
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

from kafka import KafkaConsumer
from kafka.structs import TopicPartition

from provstream.connectors.neo4j.csvfiles import (
    ImportPlan,
    NodeScan,
    free_delimiter,
    merge_plans,
    scan_nodes,
    write_csv,
)
from provstream.connectors.neo4j.image import GraphImage, object_only
from provstream.connectors.neo4j.rows import Rows, batch_rows_at, triple_count
from provstream.connectors.sink import Failure, Record, decode_records, isolate_rejects, split_retractions
from provstream.core.triples import StepTriples
from provstream.crypto import KeyRing
from provstream.errors import ProvstreamError
from provstream.gc_tuning import collector_paused, tune_gc
from provstream.keys import close_ring, open_ring
from provstream.security import kafka_python_options
from provstream.settings import Settings
from provstream.topics import source_of

Ranges = Mapping[TopicPartition, tuple[int, int]]  # partition -> [start, end) offsets to read

# Records folded at a time. The sink writes whatever a poll returns, up to ``sink_batch_size``
# (2,000) records, and where its batches end does not change the graph, except for writes that
# follow their own session's retraction in one batch: the sink, and the fold as it, erase those too.
# Smaller batches keep a batch's decoded messages and rows in the core's cache from the decoding to
# the image: the read phase takes about half the CPU (BENCHMARKS.md).
FOLD_BATCH: Final = 250


def reader_options(settings: Settings) -> dict[str, Any]:
    """The options of a consumer that reads the triples topic for a bulk rebuild (the sink's, in bigger fetches).

    A fetch returns up to 8 MiB per partition instead of kafka-python's 1 MiB: a rebuild reads
    whole partitions, and fewer, larger fetches cost less per record (BENCHMARKS.md).

    :param settings: the settings the rebuild runs with.
    :returns: keyword arguments for :class:`KafkaConsumer` (add ``group_id`` / ``client_id``).

    Example: ``KafkaConsumer(**reader_options(settings), client_id="provstream-bulk-fold")``.
    """
    return {**kafka_python_options(settings, "sink"), "enable_auto_commit": False,
            "max_poll_records": 10 * settings.sink_batch_size, "max_partition_fetch_bytes": 8 * 1024 * 1024}


class ImageFold:
    """Folds triples-topic records into a :class:`GraphImage` batch by batch, as the sink writes them.

    Example::

        fold = ImageFold()
        fold.add(records)          # one sink batch
        fold.image, fold.failures  # the graph; (record, reason) the sink would dead-letter
    """

    def __init__(self, ring: KeyRing | None = None, track: bool = False) -> None:
        """:param ring: the sink's key ring (``PROVSTREAM_ENCRYPT=1``), to open sealed literals.
        :param track: also note every IRI a row names (:attr:`touched`), for :func:`conflict`."""
        self.image = GraphImage()
        self.ring = ring
        self.failures: list[Failure] = []
        self.messages = 0
        self.triples = 0
        self.retractions = 0
        self.touched: set[str] | None = set() if track else None
        self.erased: set[str] = set()  # the IRIs of the nodes retractions deleted with their sessions

    def add(self, records: Sequence[Record]) -> None:
        """One sink batch: its triples messages, then its retractions (the sink's order)."""
        retracted, rest = split_retractions(records)
        good, bad = decode_records(rest)
        if self.ring is not None:
            good = [(record, self.ring.open_triples(msg)) for record, msg in good]
        rejected = isolate_rejects(self._write, good)
        self.failures += bad + [(record, f"Neo4j rejected the message: {exc}") for (record, _), exc in rejected]
        for user, collection, session in retracted:
            if self.ring is not None:
                self.ring.forget(user, collection, session)
            doomed, _ = self.image.erase(user, collection, session)
            self.erased.update(doomed)
            self.retractions += 1

    def _write(self, items: list[tuple[Record, StepTriples]]) -> None:
        messages = [msg for _, msg in items]
        # The rows the sink would send (raises StoreError before anything is applied).
        _, rows = batch_rows_at(messages, [
            (source_of(record.headers), (record.partition, record.offset)) for record, _ in items])
        self.image.write(rows)
        if self.touched is not None:
            self.touched.update(row["iri"] for row in rows)
        self.messages += len(messages)
        self.triples += triple_count(messages)


def read_records(consumer: KafkaConsumer, ranges: Ranges, batch_size: int,
                 add: Callable[[list[Record]], None]) -> int:
    """Read each partition of ``ranges`` from its start to its end and hand the records on in sink batches.

    :param consumer: a consumer the partitions are assigned to here (its group, if any, is not used).
    :param ranges: partition -> [start, end) offsets.
    :param batch_size: records per batch (:data:`FOLD_BATCH` in a rebuild).
    :param add: called with each batch, in the order the consumer returned the records.
    :returns: the records read.
    """
    todo = {tp for tp, (start, end) in ranges.items() if start < end}
    consumer.assign(sorted(todo, key=lambda tp: tp.partition))
    for tp in todo:
        consumer.seek(tp, ranges[tp][0])
    batch: list[Record] = []
    count = 0
    while todo:
        for tp, records in consumer.poll(timeout_ms=500).items():
            end = ranges[tp][1]
            batch += [r for r in records if r.offset < end]
        for tp in [tp for tp in todo if consumer.position(tp) >= ranges[tp][1]]:
            todo.discard(tp)
        full = len(batch) if not todo else len(batch) - len(batch) % batch_size
        for start in range(0, full, batch_size):  # slices of the poll, not one copy of the rest per batch
            chunk = batch[start:start + batch_size]
            add(chunk)
            count += len(chunk)
        del batch[:full]
    consumer.unsubscribe()
    return count


def split_ranges(ranges: Ranges, parts: int) -> list[dict[TopicPartition, tuple[int, int]]]:
    """Deal the partitions with records into at most ``parts`` groups of about as many records each.

    :param ranges: partition -> [start, end) offsets.
    :param parts: the most groups wanted (processes).
    :returns: the non-empty groups (the first holds the largest partition).

    >>> [sorted(tp.partition for tp in g) for g in split_ranges(
    ...     {TopicPartition("t", p): (0, n) for p, n in enumerate([5, 9, 4, 0])}, 2)]
    [[1], [0, 2]]
    """
    groups: list[dict[TopicPartition, tuple[int, int]]] = [{} for _ in range(max(1, parts))]
    sizes = [0] * len(groups)
    for tp, (start, end) in sorted(ranges.items(), key=lambda item: (item[1][0] - item[1][1], item[0].partition)):
        if start >= end:
            continue
        i = sizes.index(min(sizes))
        groups[i][tp] = (start, end)
        sizes[i] += end - start
    return [g for g in groups if g]


# -- one part ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PartReport:
    """What a part's fold tells the caller, to decide whether the parts merge (:func:`conflict`).

    :ivar records: records read.
    :ivar messages: triples messages folded.
    :ivar triples: their triples.
    :ivar retractions: retraction records applied.
    :ivar failures: the records the sink would dead-letter, with the reason.
    :ivar owned: the IRIs of the part's nodes that are not :func:`.image.object_only`.
    :ivar shared: object-only nodes: IRI -> ``graph``.
    :ivar touched: every IRI a row of the part named.
    :ivar erased: the IRIs of the nodes its retractions deleted with their sessions.
    :ivar seen: the candidate array delimiters its owned nodes' values contain.
    """

    records: int
    messages: int
    triples: int
    retractions: int
    failures: list[Failure]
    owned: frozenset[str]
    shared: Mapping[str, Any]
    touched: frozenset[str]
    erased: frozenset[str]
    seen: frozenset[str]


class Part:
    """One set of partitions folded into an image of its own, then written as CSV with a given delimiter.

    Example::

        part = Part(ring)
        part.read(consumer, ranges, 2000, lambda records, triples: None)
        report = part.report()
        plan = part.write(directory, free_delimiter(report.seen))
    """

    def __init__(self, ring: KeyRing | None = None) -> None:
        self.fold = ImageFold(ring, track=True)
        self.records = 0
        self._scan: NodeScan | None = None

    def read(self, consumer: KafkaConsumer, ranges: Ranges, batch_size: int,
             after: Callable[[int, int], None]) -> None:
        """Fold ``ranges`` (:func:`read_records`), calling ``after(records, triples)`` after each batch."""
        def add(records: list[Record]) -> None:
            self.fold.add(records)
            self.records += len(records)
            after(self.records, self.fold.triples)

        read_records(consumer, ranges, batch_size, add)

    def report(self) -> PartReport:
        """Scan the image (once) and report on it; :meth:`write` writes what the scan found."""
        fold, image = self.fold, self.fold.image
        owned: set[str] = set()
        shared: dict[str, Any] = {}
        for node in image.nodes():
            if object_only(node):
                shared[node.iri] = node.props.get("graph")
            else:
                owned.add(node.iri)
        self._scan = scan_nodes(image, leave_out=object_only)
        return PartReport(self.records, fold.messages, fold.triples, fold.retractions, fold.failures, frozenset(owned),
                          shared, frozenset(fold.touched or ()), frozenset(fold.erased), self._scan.seen)

    def write(self, directory: Path, delimiter: str) -> ImportPlan:
        """The CSV of the owned nodes and of every relationship, into ``directory``."""
        if self._scan is None:
            raise ProvstreamError("a part is written after its report")
        return write_csv(self.fold.image, directory, self._scan, delimiter)


def conflict(reports: Sequence[PartReport]) -> str | None:
    """Why the parts' images cannot simply be merged, or ``None`` when they can.

    >>> a = PartReport(1, 1, 1, 0, [], frozenset({"urn:s"}), {}, frozenset({"urn:s"}), frozenset(), frozenset())
    >>> conflict([a, a])
    "node urn:s is in two processes' partitions"
    """
    for i, a in enumerate(reports):
        for b in reports[i + 1:]:
            both = a.owned & b.owned
            if both:
                return f"node {min(both)} is in two processes' partitions"
        for j, b in enumerate(reports):
            gone = a.erased & b.touched if i != j else set()
            if gone:
                return f"a retraction deleted node {min(gone)}, which another process's partitions name"
    graphs: dict[str, Any] = {}
    for report in reports:
        for iri, graph in report.shared.items():
            if graphs.setdefault(iri, graph) != graph:
                return f"node {iri} was made in two graphs"
    return None


def shared_image(reports: Sequence[PartReport]) -> GraphImage:
    """The object-only nodes of every part that no part owns, as one image (written once)."""
    owned = frozenset().union(*(r.owned for r in reports))
    rows: dict[str, dict[str, Any]] = {}
    for report in reports:
        for iri, graph in report.shared.items():
            if iri not in owned and iri not in rows:
                rows[iri] = {"iri": iri, "graph": graph}
    image = GraphImage()
    image.apply(Rows(objects=tuple(rows.values())))
    return image


# -- the processes ----------------------------------------------------------------------

@dataclass(frozen=True)
class Folded:
    """The parts' merged result (``conflict`` is ``None``), or why they were not merged.

    :ivar plan: the import of every part's CSV files; ``None`` with a conflict.
    :ivar reports: each part's report, the caller's first.
    :ivar conflict: why the caller must fold everything itself.
    :ivar read_seconds: from the start to the last part's report.
    :ivar csv_seconds: from then until every part's files were written.
    """

    plan: ImportPlan | None
    reports: tuple[PartReport, ...]
    conflict: str | None
    read_seconds: float
    csv_seconds: float = 0.0


def fold_parts(settings: Settings, consumer: KafkaConsumer, ring: KeyRing | None,
               groups: Sequence[Ranges], directory: Path,
               on_records: Callable[[int, int], None] | None = None) -> Folded:
    """Fold ``groups[0]`` here and every other group in a process of its own, then write one import's CSV.

    :param settings: the rebuild's settings (each process reads with the sink's credentials).
    :param consumer: this process's consumer (``groups[0]`` is assigned to it).
    :param ring: this process's key ring (each other process opens its own).
    :param groups: partition ranges, one group per process.
    :param directory: the CSV files go to ``directory/part-<i>`` and ``directory/shared``.
    :param on_records: called with the records read and the triples folded so far, by every part together.
    :returns: the plan, or the conflict that stops the merge (no file is written then).
    :raises ProvstreamError: a part failed (its reason), or ended without reporting.
    """
    began = time.monotonic()
    context = multiprocessing.get_context("spawn")
    links: list[Connection] = []
    children: list[Any] = []
    progress = [(0, 0)] * len(groups)

    def note(i: int, counts: tuple[int, int]) -> None:
        progress[i] = counts
        if on_records is not None:
            on_records(sum(c[0] for c in progress), sum(c[1] for c in progress))

    def message(i: int) -> tuple[str, Any]:
        try:
            verb, value = links[i - 1].recv()
        except (EOFError, OSError):
            children[i - 1].join(timeout=5)
            raise ProvstreamError(f"bulk fold process {i} ended without a result "
                                  f"(exit code {children[i - 1].exitcode})") from None
        if verb == "error":
            raise ProvstreamError(f"bulk fold process {i}: {value}")
        return verb, value

    def drain() -> None:
        for i, link in enumerate(links, start=1):
            while link.poll():
                verb, value = message(i)
                if verb != "progress":
                    raise ProvstreamError(f"bulk fold process {i}: unexpected {verb!r}")
                note(i, value)

    def receive(i: int, want: str) -> Any:
        while True:
            verb, value = message(i)
            if verb == want:
                return value
            if verb != "progress":
                raise ProvstreamError(f"bulk fold process {i}: unexpected {verb!r}")
            note(i, value)

    try:
        for i, group in enumerate(groups[1:], start=1):
            mine, theirs = context.Pipe()
            child = context.Process(target=run_part, name=f"provstream-bulk-fold-{i}", daemon=True,
                                    args=(theirs, settings, dict(group), directory / f"part-{i}"))
            child.start()
            theirs.close()
            links.append(mine)
            children.append(child)
        part = Part(ring)

        def after(records: int, triples: int) -> None:
            note(0, (records, triples))
            drain()

        part.read(consumer, groups[0], FOLD_BATCH, after)
        reports = [part.report()] + [receive(i, "folded") for i in range(1, len(groups))]
        folded = time.monotonic()
        why = conflict(reports)
        if why is not None:
            for link in links:
                link.send(("stop", None))
            return Folded(None, tuple(reports), why, folded - began)
        shared = shared_image(reports)
        delimiter = free_delimiter(frozenset().union(*(r.seen for r in reports)))
        for link in links:
            link.send(("write", delimiter))
        plans = [part.write(directory / "part-0", delimiter), write_csv(shared, directory / "shared", None, delimiter)]
        plans += [receive(i, "written") for i in range(1, len(groups))]
        return Folded(merge_plans(plans), tuple(reports), None, folded - began, time.monotonic() - folded)
    finally:
        for link in links:
            link.close()
        for child in children:
            child.join(timeout=30)
            if child.is_alive():
                child.kill()
                child.join()


def run_part(link: Connection, settings: Settings, ranges: Ranges, directory: Path) -> None:
    """A fold process: read ``ranges``, report, then write its CSV or stop, as the caller says.

    Messages to the caller: ``("progress", (records, triples))``, ``("folded", PartReport)``,
    ``("written", ImportPlan)`` or ``("error", reason)``. The process ends without
    tearing its image down object by object (``os._exit``).
    """
    code = 0
    try:
        tune_gc(settings)
        ring = open_ring(settings, "sink")
        consumer = KafkaConsumer(**reader_options(settings), client_id="provstream-bulk-fold")
        try:
            with collector_paused():
                part = Part(ring)
                part.read(consumer, ranges, FOLD_BATCH,
                          lambda records, triples: link.send(("progress", (records, triples))))
                link.send(("folded", part.report()))
                verb, delimiter = link.recv()
                if verb == "write":
                    link.send(("written", part.write(directory, delimiter)))
        finally:
            consumer.close(autocommit=False)
            close_ring(ring)
    except EOFError:
        code = 1  # the caller went away
    except BaseException as exc:  # noqa: BLE001 - reported to the caller, which raises it
        code = 1
        try:
            link.send(("error", f"{type(exc).__name__}: {exc}"))
        except OSError:
            pass
    finally:
        link.close()
        os._exit(code)
