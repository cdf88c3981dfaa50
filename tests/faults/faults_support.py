"""The fault cases' common scenario: stream sessions, inject a fault, recover, check the graph.

:class:`Pipeline` runs the worker(s) and sink(s) of one test as child
processes and acts as their supervisor: a process that exits on its own
(the worker exits by design when Kafka finally refuses a delivery) is
restarted and counted. :func:`run_case` drives one case and records a
:class:`FaultResult` row for the table in BENCHMARKS.md (printed at the end of
the run and written to ``<private stack>/fault-results.json``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from e2e_graph import Cypher, GraphReport, check, log_triples, same_graph, step_count, stored_triples
from e2e_stack import Child, committed, end_offsets, start_sink, start_worker
from e2e_workload import Planned, Streamer, emit_steps, plan

from provstream.connectors.emitter import Emitter
from provstream.settings import Settings

RESULTS: list[FaultResult] = []
RATE = 80.0  # steps/s while a fault case streams: a dozen busy agents; the sink keeps up with room to spare
CATCH_UP_TIMEOUT = 240.0


@dataclass(frozen=True)
class FaultResult:
    case: str
    events_sent: int
    steps_expected: int
    steps_in_graph: int
    lost: int
    duplicated: int
    outage_s: float | None
    recovery_s: float | None
    note: str = ""


def record(result: FaultResult, results_file: Path | None = None) -> None:
    RESULTS.append(result)
    if results_file is not None:
        results_file.write_text(json.dumps([asdict(r) for r in RESULTS], indent=1))


def table(results: list[FaultResult]) -> str:
    head = ("| case | events sent | steps in graph / expected | lost | duplicated | outage (s) | "
            "recovery (s) | note |\n|---|---|---|---|---|---|---|---|")
    rows = [f"| {r.case} | {r.events_sent} | {r.steps_in_graph} / {r.steps_expected} | {r.lost} | {r.duplicated} | "
            f"{_s(r.outage_s)} | {_s(r.recovery_s)} | {r.note} |" for r in results]
    return "\n".join([head, *rows])


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


@dataclass
class Pipeline:
    """The worker and sink processes of one test, restarted if they exit on their own."""

    settings: Settings
    logs: Path
    workers: list[Child] = field(default_factory=list)
    sinks: list[Child] = field(default_factory=list)
    restarts: list[str] = field(default_factory=list)
    _count: int = 0

    def add_worker(self) -> Child:
        self._count += 1
        child = start_worker(self.settings, self.logs, f"worker{self._count}", "--log-level", "INFO")
        self.workers.append(child)
        return child

    def add_sink(self) -> Child:
        self._count += 1
        child = start_sink(self.settings, self.logs, f"sink{self._count}", "--verbose")  # each write in its log
        self.sinks.append(child)
        return child

    def replace(self, child: Child) -> Child:
        """Start a new process in place of ``child`` (which is dead or being killed)."""
        group = self.workers if child in self.workers else self.sinks
        group.remove(child)
        return self.add_worker() if group is self.workers else self.add_sink()

    def supervise(self) -> None:
        """Restart any process that exited on its own (and note it)."""
        for child in [c for c in self.workers + self.sinks if not c.alive()]:
            self.restarts.append(f"{child.name} exited {child.proc.returncode}")
            self.replace(child)

    def wait_ready(self, timeout: float = 180.0) -> None:
        for child in self.workers + self.sinks:
            child.wait_ready(timeout)

    def stop(self) -> None:
        for child in self.workers + self.sinks:
            child.stop()

    def worker_committed(self) -> int:
        return committed(self.settings, self.settings.worker_app_id, self.settings.events_topic)


@contextmanager
def pipeline(settings: Settings, logs: Path, workers: int = 1, sinks: int = 1) -> Iterator[Pipeline]:
    p = Pipeline(settings, logs)
    try:
        for _ in range(workers):
            p.add_worker()
        for _ in range(sinks):
            p.add_sink()
        p.wait_ready()
        yield p
    finally:
        p.stop()


@contextmanager
def streaming(settings: Settings, prefix: str, rate: float = RATE) -> Iterator[Streamer]:
    """Sessions streamed live until the block ends; then every open session is finished and flushed."""
    emitter = Emitter(settings).open()
    streamer = Streamer(emitter, plan(prefix, 100_000), user=settings.user, collection=settings.collection,
                        rate=rate, concurrent=12)
    try:
        yield streamer.start()
    finally:
        streamer.stop()
        emitter.close()


def wait_while_supervising(p: Pipeline, condition: Callable[[], bool], timeout: float, what: str) -> float:
    began = time.monotonic()
    while not condition():
        p.supervise()
        if time.monotonic() - began > timeout:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; {lag_report(p.settings)}")
        time.sleep(0.2)
    return time.monotonic() - began


def lag_report(settings: Settings) -> str:
    """Per partition: end offset and what the worker and sink groups committed (where a stall sits)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.admin import KafkaAdminClient

    lines = []
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, client_id="provstream-faults-probe")
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False,
                             client_id="provstream-faults-probe")
    try:
        for group, topic in ((settings.worker_app_id, settings.events_topic),
                             (settings.sink_group, settings.triples_topic)):
            parts = [TopicPartition(topic, n) for n in sorted(consumer.partitions_for_topic(topic) or ())]
            ends = consumer.end_offsets(parts)
            done = {tp: o.offset for tp, o in admin.list_group_offsets(group).get(group, {}).items()}
            lines.append(f"{group} on {topic}: " + ", ".join(
                f"p{tp.partition} {done.get(tp, -1)}/{ends[tp]}" for tp in parts))
    except Exception as exc:  # a diagnosis must not hide the failure it explains
        lines.append(f"no lag report ({type(exc).__name__}: {exc})")
    finally:
        consumer.close(autocommit=False)
        admin.close()
    history = commit_history(settings, settings.worker_app_id, settings.events_topic)
    return "committed/end per partition: " + "; ".join(lines) + "; worker commits (time partition offset): " + \
        " ".join(f"{t} p{p} {o}" for t, p, o in history[-40:])


def commit_history(settings: Settings, group: str, topic: str) -> list[tuple[str, int, int]]:
    """(UTC time, partition, offset) of every offset commit of ``group`` on ``topic``, oldest first.

    Read from ``__consumer_offsets`` (OffsetCommit key v0/v1: group, topic,
    partition; value: version, offset, ...), for diagnosing a stall or a loss.
    """
    import struct
    from datetime import UTC, datetime

    from kafka import KafkaConsumer, TopicPartition

    def text(b: bytes, i: int) -> tuple[str, int]:
        n = struct.unpack_from(">h", b, i)[0]
        return b[i + 2:i + 2 + n].decode(), i + 2 + n

    rows: list[tuple[int, int, int]] = []
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False, group_id=None,
                             exclude_internal_topics=False, client_id="provstream-faults-probe")
    try:
        parts = [TopicPartition("__consumer_offsets", n) for n in consumer.partitions_for_topic("__consumer_offsets")]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        ends = consumer.end_offsets(parts)
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            for records in consumer.poll(1000).values():
                for r in records:
                    if r.key is None or r.value is None or struct.unpack_from(">h", r.key, 0)[0] > 1:
                        continue
                    g, i = text(r.key, 2)
                    t, i = text(r.key, i)
                    if g == group and t == topic:
                        rows.append((r.timestamp, struct.unpack_from(">i", r.key, i)[0],
                                     struct.unpack_from(">q", r.value, 2)[0]))
    except Exception:  # a diagnosis must not hide the failure it explains
        return []
    finally:
        consumer.close(autocommit=False)
    return [(datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S.%f")[:-3], p, o) for ms, p, o in sorted(rows)]


class Timeline:
    """Samples every second, into ``<logs>/timeline.tsv``: steps emitted, events, triples, commits, graph steps."""

    def __init__(self, settings: Settings, streamer: Streamer, path: Path) -> None:
        self.settings, self.streamer, self.path = settings, streamer, path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="timeline", daemon=True)
        self._began = time.monotonic()

    def __enter__(self) -> Timeline:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def mark(self, text: str) -> None:
        with self.path.open("a") as out:
            out.write(f"{time.monotonic() - self._began:.1f}\t# {text}\n")

    def _run(self) -> None:
        s = self.settings
        with self.path.open("a") as out, Cypher(s) as db:
            out.write("t\temitted\tevents\tworker_committed\ttriples\tsink_committed\tgraph_steps\n")
            while not self._stop.wait(1.0):
                out.write("\t".join(str(x) for x in (
                    f"{time.monotonic() - self._began:.1f}", self.streamer.steps,
                    _safe(lambda: end_offsets(s, s.events_topic)),
                    _safe(lambda: committed(s, s.worker_app_id, s.events_topic)),
                    _safe(lambda: end_offsets(s, s.triples_topic)),
                    _safe(lambda: committed(s, s.sink_group, s.triples_topic)), _steps(db, s))) + "\n")
                out.flush()


def _safe(probe: Callable[[], int]) -> int:
    try:
        return probe()
    except Exception:  # Kafka restarting
        return -1


Inject = Callable[[Pipeline], None]


@dataclass
class CaseOutcome:
    result: FaultResult
    report: GraphReport
    isomorphic: bool
    missing: tuple[str, ...]
    extra: tuple[str, ...]


def run_case(case: str, settings: Settings, logs: Path, prefix: str, inject: Inject, restore: Inject,
             warmup_s: float = 6.0, after_s: float = 6.0, results_file: Path | None = None,
             workers: int = 1, sinks: int = 1) -> CaseOutcome:
    """Stream; ``inject`` the fault; ``restore``; measure the catch-up; finish streaming; check the graph."""
    with ExitStack() as stack:
        p = stack.enter_context(pipeline(settings, logs, workers, sinks))
        db = stack.enter_context(Cypher(settings))
        feed = streaming(settings, prefix)
        st = feed.__enter__()
        timeline = stack.enter_context(Timeline(settings, st, logs / "timeline.tsv"))
        try:
            outage, recovery = _fault(p, db, st, timeline, settings, warmup_s, inject, restore)
            time.sleep(after_s)
        finally:
            feed.__exit__(None, None, None)  # finish the open sessions, flush the emitter
        timeline.mark(f"streaming stopped after {st.steps} steps")
        assert st.error is None, f"the emitter failed: {st.error!r}"
        wait_while_supervising(p, lambda: _steps(db, settings) >= st.steps, CATCH_UP_TIMEOUT, "the last steps")
        time.sleep(2.0)  # anything redelivered late would show up now
        report = check(db, st.started, settings.user, settings.collection)
        restarts = list(p.restarts)
    expected, events = log_triples(settings, settings.user, settings.collection)
    cmp = same_graph(stored_triples(settings, settings.user, settings.collection), expected)
    note = f"{events} events in the log; " + ("; ".join(restarts) or "no unplanned restart")
    result = FaultResult(case, st.steps, report.expected_steps, report.steps_in_graph, len(report.lost),
                         report.duplicated, outage, recovery, note)
    record(result, results_file)
    return CaseOutcome(result, report, cmp.isomorphic, cmp.missing, cmp.extra)


def _fault(p: Pipeline, db: Cypher, st: Streamer, timeline: Timeline, settings: Settings, warmup_s: float,
           inject: Inject, restore: Inject) -> tuple[float, float | None]:
    """(outage: inject + restore seconds, recovery: seconds until the steps sent by then are in the graph)."""
    def steady() -> bool:  # streaming for a while, the worker committing, the graph less than 5 s behind
        return st.steps > warmup_s * RATE * 0.8 and p.worker_committed() > 0 and \
            _steps(db, settings) >= st.steps - 5 * RATE

    wait_while_supervising(p, steady, 180, "a steady state before the fault")
    timeline.mark("inject")
    began = time.monotonic()
    inject(p)
    timeline.mark("restore")
    restore(p)
    outage = time.monotonic() - began
    sent = st.steps
    timeline.mark(f"restored; waiting for {sent} steps")
    recovery = _catch_up(p, db, settings, sent)
    timeline.mark(f"caught up after {recovery} s")
    return outage, recovery


def _steps(db: Cypher, settings: Settings) -> int:
    try:
        return step_count(db, settings.user, settings.collection)
    except Exception:  # Neo4j still restarting
        return -1


def _catch_up(p: Pipeline, db: Cypher, settings: Settings, count: int) -> float | None:
    began = time.monotonic()
    try:
        wait_while_supervising(p, lambda: _steps(db, settings) >= count, CATCH_UP_TIMEOUT, "the catch-up")
    except AssertionError:
        return None
    return time.monotonic() - began


def assert_exactly_once(outcome: CaseOutcome) -> None:
    r = outcome.report
    assert r.ok, r.summary()
    assert outcome.isomorphic, f"graph differs from the fold of the log: missing {outcome.missing}, " \
                               f"extra {outcome.extra}"


# -- bad input ------------------------------------------------------------------

def emit_sessions(settings: Settings, sessions: list[Planned], user: str | None = None,
                  collection: str | None = None) -> int:
    """Emit whole sessions (acknowledged by Kafka on return); the number of steps."""
    steps = 0
    with Emitter(settings) as emitter:
        for p in sessions:
            steps += sum(1 for _ in emit_steps(emitter, p, user or settings.user, collection or settings.collection))
    return steps


@dataclass(frozen=True)
class BadInputOutcome:
    result: FaultResult
    report: GraphReport
    dead_lettered: int
    folded: int
    refused_by_sink: int
    restarts: tuple[str, ...]


SendBad = Callable[[], int]


def run_bad_input(case: str, settings: Settings, logs: Path, prefix: str, send_bad: SendBad,
                  results_file: Path | None = None) -> BadInputOutcome:
    """Good sessions, then ``send_bad()`` (returns how many bad records it put on the events topic), then
    good sessions again: the good ones must all arrive and every bad record must end dead-lettered or folded."""
    good = plan(prefix, 10)
    with pipeline(settings, logs) as p, Cypher(settings) as db:
        good_steps = emit_sessions(settings, good[:5])
        bad = send_bad()
        began = time.monotonic()
        good_steps += emit_sessions(settings, good[5:])
        total = good_steps + bad
        wait_while_supervising(p, lambda: _handled(settings) >= total, CATCH_UP_TIMEOUT, "the worker to handle all")
        expected = sum(len(s.step_iris()) for s in good)
        wait_while_supervising(p, lambda: _steps(db, settings) >= expected, CATCH_UP_TIMEOUT, "the good sessions")
        recovery = time.monotonic() - began
        triples = end_offsets(settings, settings.triples_topic)
        wait_while_supervising(p, lambda: committed(settings, settings.sink_group, settings.triples_topic) >= triples,
                               CATCH_UP_TIMEOUT, "the sink to commit everything")
        report = check(db, good, settings.user, settings.collection)
        restarts = tuple(p.restarts)
    dlq = end_offsets(settings, settings.events_dlq_topic)
    refused = end_offsets(settings, settings.triples_dlq_topic)
    folded = triples - good_steps
    note = (f"{bad} bad records: {dlq} dead-lettered by the worker, {folded} folded as inert data "
            f"({refused} of them refused by the sink); " + ("; ".join(restarts) or "no restart"))
    result = FaultResult(case, total, report.expected_steps, report.steps_in_graph, len(report.lost),
                         report.duplicated, None, recovery, note)
    record(result, results_file)
    return BadInputOutcome(result, report, dlq, folded, refused, restarts)


def _handled(settings: Settings) -> int:
    """Events the worker has turned into a triples message or a dead letter."""
    return _safe(lambda: end_offsets(settings, settings.triples_topic)) + \
        _safe(lambda: end_offsets(settings, settings.events_dlq_topic))
