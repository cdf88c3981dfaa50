"""End-to-end benchmark: emitter -> Kafka -> fold worker -> sink -> Neo4j, on a private stack (a script, not a test).

Sessions are built from the bundled HotpotQA dev questions and ReAct
trajectories (bench/e2e_workload.py: 80 % agent, 10 % DocRAG, 10 % GraphRAG).
Kafka and Neo4j run privately (``.stack/private-bench``, Kafka 127.0.0.1:19192,
Neo4j bolt 127.0.0.1:17787): started here if not running, empty (what earlier
runs stored is deleted first) and with a Neo4j page cache of ``BENCH_PAGECACHE``
and a heap of ``BENCH_HEAP`` (``PROVSTREAM_NEO4J_PAGECACHE`` and ``PROVSTREAM_NEO4J_HEAP``
override them), and stopped at the end if started
here; the shared servers are never touched. It prints:

* **pipeline warm-up**: one unmeasured 1+1 run emitting for ``--warm-seconds``
  (15): on a just-started stack the servers' JVMs have not compiled their hot
  code yet, and the first run paid for it (BENCHMARKS.md, "Throughput, fifth
  pass"); its figure is printed, marked as not a result.
* **sustained**: an emitter process emits as fast as it can for ``--seconds``;
  end-to-end events/s = events / (first emit -> last step committed by the
  sink in Neo4j), and triples/s; when each stage finished, and the CPU
  seconds and peak RSS of every process (worker, sink, Kafka, Neo4j,
  emitter). Run with one worker and one sink, then with two of each
  (``--scale 1 2``; consumer groups share the 4 partitions).
* **latency**: emit-to-queryable at a fixed ``--rate`` (1,000 events/s): for
  every ``--sample``-th step the emitter reports its IRI and emit time, and a
  watcher polls Neo4j (every 20 ms) until the node is there; p50/p95/p99.
  Each sampled latency is then cut in three stages at the create times of the
  step's events record and triples record (the node's offset lineage names
  them): emitter, Kafka + worker, Kafka + sink + Neo4j + watcher.
  ``--scale`` with no value runs the latency run alone.
* **replay**: ``provstream replay --from-beginning --reset-graph`` of the
  one-worker run's events topic.

``--profile DIR`` samples the worker and sink with py-spy during the
one-worker sustained run (py-spy comes with the ``dev`` extra; ``PY_SPY``
may name another binary) and prints their busiest functions.

The last line printed is ``end-to-end: N events/s`` (one worker, one sink).

    .venv/bin/python bench/bench_e2e.py [--seconds 60] [--rate 1000] [--latency-seconds 30] [--scale 1 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from e2e_graph import ARRIVED, Cypher, record_times, step_count, warm_up
from e2e_stack import (
    BENCH_PORTS,
    Child,
    PrivateStack,
    Usage,
    child_env,
    cluster_ports,
    proc_usage,
    start_child,
    start_sink,
    start_worker,
)
from e2e_workload import Streamer, planned
from kafka import KafkaConsumer
from kafka.structs import TopicPartition

from provstream.settings import Settings
from provstream.topics import ensure_topics

EMITTER_READY = "emitter ready"
# The store a full run writes (about 1.5 M nodes, 2 GB) fits in it: a page cache smaller than the store
# turns index lookups into page faults (docs: deploy/README.md "Sizing Neo4j").
BENCH_PAGECACHE = "3g"
# deploy/neo4j.sh's default. 3g cut the collector's share of Neo4j's CPU when the sink drained alone, but the
# end-to-end runs with it were not faster (BENCHMARKS.md, "Throughput, eighth pass")
BENCH_HEAP = "1g"
WATCH_EVERY = 0.02


# -- the emitter child process ------------------------------------------------------

def emit_main(argv: list[str]) -> int:
    """``bench_e2e.py _emit``: emit sessions for ``--seconds`` at ``--rate`` (0: flat out); print a summary."""
    from provstream.connectors.emitter import Emitter
    from provstream.connectors.transport import KafkaTransport

    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--rate", type=float, default=0.0)
    p.add_argument("--sample", type=int, default=0, help="print every n-th step's IRI and emit time")
    p.add_argument("--prefix", required=True)
    args = p.parse_args(argv)
    settings = Settings.from_env()
    transport = KafkaTransport(settings)
    with Emitter(settings, transport=transport) as emitter:
        transport.wait_connected(60)
        sessions = (planned(args.prefix, n) for n in itertools.count())
        on_step = _sampler(args.sample) if args.sample else None
        streamer = Streamer(emitter, sessions, user=settings.user, collection=settings.collection,  # type: ignore[arg-type]
                            rate=args.rate, concurrent=32, on_step=on_step, keep_started=False)
        print(f"{EMITTER_READY} {time.time():.6f}", flush=True)
        streamer.start()
        time.sleep(args.seconds)
        streamer.stop()
        emitter.flush()
    print("DONE " + json.dumps({"steps": streamer.steps, "sessions": streamer.count,
                                "emit_s": streamer.ended - streamer.began, "flushed": time.time(),
                                "error": repr(streamer.error) if streamer.error else None}), flush=True)
    return 0 if streamer.error is None else 1


def _sampler(every: int):  # type: ignore[no-untyped-def]
    count = itertools.count(1)

    def on_step(iri: str, at: float) -> None:
        if next(count) % every == 0:
            print(f"S {iri} {at:.6f}", flush=True)

    return on_step


def start_emitter(settings: Settings, logs: Path, prefix: str, seconds: float, rate: float = 0.0,
                  sample: int = 0) -> Child:
    argv = [sys.executable, str(Path(__file__).resolve()), "_emit", "--seconds", str(seconds), "--rate", str(rate),
            "--sample", str(sample), "--prefix", prefix]
    return start_child("emitter", argv, EMITTER_READY, child_env(settings), logs / f"emitter-{prefix}.log")


def emitter_summary(child: Child, timeout: float) -> dict[str, object]:
    child.proc.wait(timeout)
    time.sleep(0.2)  # the stdout reader thread takes the last line
    done = [line for line in child.lines if line.startswith("DONE ")]
    if child.proc.returncode != 0 or not done:
        raise SystemExit(f"emitter failed (exit {child.proc.returncode}):\n{child.tail()}")
    return json.loads(done[-1][5:])  # type: ignore[no-any-return]


def started_at(child: Child) -> float:
    return float(next(line for line in child.lines if line.startswith(EMITTER_READY)).split()[2])


# -- measuring processes --------------------------------------------------------------

@dataclass
class Meter:
    """CPU seconds used between :meth:`start` and :meth:`stop`, and peak RSS, of named processes."""

    pids: dict[str, int]
    children: dict[str, Child]

    def _now(self) -> dict[str, Usage]:
        out = {name: proc_usage(pid) or Usage() for name, pid in self.pids.items()}
        out.update({name: c.usage() for name, c in self.children.items()})
        return out

    def start(self) -> None:
        self.first = self._now()

    def poll(self) -> None:
        """Read the children's usage while they live (a child that exits keeps its last reading)."""
        for child in self.children.values():
            child.usage()

    def stop(self) -> dict[str, Usage]:
        last = self._now()
        return {n: Usage(last[n].cpu_s - self.first.get(n, Usage()).cpu_s, last[n].peak_rss_mb) for n in last}


def usage_lines(usage: dict[str, Usage], seconds: float) -> list[str]:
    return [f"  {name:<10} CPU {u.cpu_s:7.1f} s ({100 * u.cpu_s / seconds:5.1f} % of one core)  "
            f"peak RSS {u.peak_rss_mb:7.0f} MB" for name, u in usage.items()]


# -- phases -------------------------------------------------------------------------

def phase_settings(base: Settings, run: str, name: str) -> Settings:
    p = f"bench.{run}.{name}"
    s = replace(base, events_topic=f"{p}.events", triples_topic=f"{p}.triples", events_dlq_topic=f"{p}.events.dlq",
                triples_dlq_topic=f"{p}.triples.dlq", worker_app_id=f"bench-{run}-{name}-fold",
                sink_group=f"bench-{run}-{name}-sink", collection=f"bench-{run}-{name}")
    ensure_topics(s)
    return s


@dataclass
class Running:
    workers: list[Child]
    sinks: list[Child]

    def all(self) -> list[Child]:
        return self.workers + self.sinks

    def stop(self) -> None:
        for c in self.all():
            c.stop()


def start_pipeline(s: Settings, logs: Path, n: int) -> Running:
    r = Running([start_worker(s, logs, f"worker{i + 1}") for i in range(n)],
                [start_sink(s, logs, f"sink{i + 1}") for i in range(n)])
    try:
        for c in r.all():
            c.wait_ready(180)
    except BaseException:
        r.stop()
        raise
    return r


class Progress:
    """Samples (seconds since the first emit, events, triples, sink-committed) through one long-lived client."""

    def __init__(self, settings: Settings, t0: float) -> None:
        self.settings, self.t0 = settings, t0
        self.samples: list[tuple[float, int, int, int]] = []
        self._consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, group_id=settings.sink_group,
                                       enable_auto_commit=False, client_id="provstream-bench-progress")
        self._events = self._partitions(settings.events_topic)
        self._triples = self._partitions(settings.triples_topic)

    def _partitions(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in sorted(self._consumer.partitions_for_topic(topic) or ())]

    def close(self) -> None:
        self._consumer.close(autocommit=False)

    def sample(self) -> tuple[float, int, int, int]:
        ends = self._consumer.end_offsets(self._events + self._triples)
        sunk = sum(self._consumer.committed(tp) or 0 for tp in self._triples)
        row = (time.time() - self.t0, sum(ends[tp] for tp in self._events), sum(ends[tp] for tp in self._triples),
               sunk)
        self.samples.append(row)
        return row

    def first_time(self, column: int, value: int) -> float:
        return next(row[0] for row in self.samples if row[column] >= value)


@dataclass(frozen=True)
class Sustained:
    scale: int
    events: int
    triples: int
    seconds: float
    emit_s: float
    stage_done: tuple[float, float, float]
    usage: dict[str, Usage]
    in_graph: int

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds


def sustained(stack: PrivateStack, base: Settings, run: str, logs: Path, scale: int, seconds: float,
              profile: Path | None, name: str = "") -> Sustained:
    """One sustained run: ``scale`` workers and sinks, the emitter flat out for ``seconds``, then the drain.

    Its topics, groups and collection are named after ``name`` (default ``x<scale>``).
    """
    name = name or f"x{scale}"
    s = phase_settings(base, run, name)
    logs = logs / name
    pipeline = start_pipeline(s, logs, scale)
    spies: list[subprocess.Popen[bytes]] = []
    try:
        emitter = start_emitter(s, logs, f"e2e-{name}-{run}", seconds)
        emitter.wait_ready(120)
        meter = Meter(server_pids(stack), {**{c.name: c for c in pipeline.all()}, "emitter": emitter})
        meter.start()
        t0 = started_at(emitter)
        if profile is not None:
            spies = [py_spy(c, profile / f"{c.name}.txt", seconds) for c in pipeline.all()]
        progress = Progress(s, t0)
        try:
            summary = _follow(progress, meter, emitter, pipeline)
            total = int(summary["steps"])  # type: ignore[call-overload]
            done = _wait_drained(progress, meter, pipeline, total)
        finally:
            progress.close()
        usage = meter.stop()
    finally:
        for spy in spies:
            spy.wait(120)
        pipeline.stop()
    with Cypher(s) as db:
        in_graph = step_count(db, s.user, s.collection)
    stages = (float(summary["flushed"]) - t0, progress.first_time(2, total), done)  # type: ignore[arg-type]
    return Sustained(scale, total, sink_triples(pipeline.sinks), done, float(summary["emit_s"]),  # type: ignore[arg-type]
                     stages, usage, in_graph)


def _follow(progress: Progress, meter: Meter, emitter: Child, pipeline: Running) -> dict[str, object]:
    """Sample every second while the emitter runs (CPU every 0.25 s, so its last second is not lost)."""
    for tick in itertools.count():
        if not emitter.alive():
            break
        meter.poll()
        if tick % 4 == 0:
            progress.sample()
            _check_alive(pipeline)
        time.sleep(0.25)
    return emitter_summary(emitter, 60)


def _wait_drained(progress: Progress, meter: Meter, pipeline: Running, total: int, timeout: float = 1800) -> float:
    while True:
        meter.poll()
        t, _events, triples, sunk = progress.sample()
        if triples >= total and sunk >= total:
            return t
        _check_alive(pipeline)
        if t > timeout:
            raise SystemExit(f"not drained after {timeout:.0f} s: {progress.samples[-1]}")
        time.sleep(0.5)


def _check_alive(pipeline: Running) -> None:
    for c in pipeline.all():
        if not c.alive():
            raise SystemExit(f"{c.name} exited ({c.proc.returncode}):\n{c.tail()}")


def sink_triples(sinks: list[Child]) -> int:
    """Triples the sinks wrote, from their ``provstream sink stopped: ...`` lines (after they stopped)."""
    total = 0
    for sink in sinks:
        found = re.findall(r"sink stopped: \d+ messages, (\d+) triples", sink.tail(20_000))
        total += int(found[-1]) if found else 0
    return total


def server_pids(stack: PrivateStack) -> dict[str, int]:
    return {name: pid for name in ("kafka", "neo4j") if (pid := stack.server_pid(name)) is not None}


def show_sustained(r: Sustained) -> None:
    emit, fold, sink = r.stage_done
    print(f"sustained, {r.scale} worker(s) + {r.scale} sink(s): {r.events} events ({r.in_graph} steps in Neo4j), "
          f"{r.triples} triples")
    print(f"  emitter: {r.events / r.emit_s:,.0f} events/s while emitting ({r.emit_s:.1f} s; all acknowledged at "
          f"{emit:.1f} s)")
    print(f"  worker:  last triples message at {fold:.1f} s ({r.events / fold:,.0f} events/s)")
    print(f"  sink:    last step committed in Neo4j at {sink:.1f} s")
    print(f"  end to end: {r.events_per_s:,.0f} events/s, {r.triples / r.seconds:,.0f} triples/s")
    for line in usage_lines(r.usage, r.seconds):
        print(line)


# -- latency -------------------------------------------------------------------------

def latency(stack: PrivateStack, base: Settings, run: str, logs: Path, seconds: float, rate: float,
            sample: int) -> tuple[list[Arrival], int, dict[str, Usage], float, Settings]:
    """The sampled steps' arrivals, how many never showed up within 60 s after the end, the processes'
    usage over the measured window (and its length in seconds), and the phase's settings."""
    s = phase_settings(base, run, "latency")
    logs = logs / "latency"
    pipeline = start_pipeline(s, logs, 1)
    try:
        # The watcher connects and plans its query before the first step: a Bolt log-in and a plan
        # made while steps are waiting would be counted as their latency.
        with Cypher(s) as db:
            db.rows(ARRIVED, watch={"iris": []})
            emitter = start_emitter(s, logs, f"e2e-lat-{run}", seconds, rate, sample)
            emitter.wait_ready(120)
            meter = Meter(server_pids(stack), {**{c.name: c for c in pipeline.all()}, "emitter": emitter})
            meter.start()
            began = time.monotonic()
            found, missing = watch(db, emitter, meter)
        emitter_summary(emitter, 60)
        return found, missing, meter.stop(), time.monotonic() - began, s
    finally:
        pipeline.stop()


@dataclass(frozen=True)
class Arrival:
    """A sampled step: when it was emitted and first seen in Neo4j (s since the epoch), and where its
    node's first events and triples records are (partition, offset; ``None`` if the node has no lineage)."""

    emitted: float
    seen: float
    event: tuple[int, int] | None
    triples: tuple[int, int] | None

    @property
    def latency(self) -> float:
        return self.seen - self.emitted


def watch(db: Cypher, emitter: Child, meter: Meter, grace: float = 60.0) -> tuple[list[Arrival], int]:
    """Poll Neo4j for the sampled IRIs the emitter prints; their arrivals, and how many never arrived."""
    pending: dict[str, float] = {}
    seen, gone_at = 0, None
    found: list[Arrival] = []
    while gone_at is None or (pending and time.time() - gone_at < grace):
        meter.poll()
        if gone_at is None and not emitter.alive():
            gone_at = time.time()
        lines = emitter.lines[seen:]
        seen += len(lines)
        pending.update((p[1], float(p[2])) for p in (line.split() for line in lines) if p and p[0] == "S")
        if pending:
            rows = db.rows(ARRIVED, watch={"iris": list(pending)})
            now = time.time()
            found += [Arrival(pending.pop(r["iri"]), now,
                              (r["ep"], r["eo"]) if r["eo"] is not None else None,
                              (r["tp"], r["to"]) if r["to"] is not None else None) for r in rows]
        time.sleep(WATCH_EVERY)
    return found, len(pending)


def stage_report(s: Settings, found: list[Arrival]) -> list[str]:
    """Each sampled step's latency cut at its events record's and its triples record's timestamps.

    The timestamps are the producers' create times (ms): the emitter's send for the events record,
    the worker's for the triples record; the last stage ends when the watcher saw the node, so it
    includes half a polling interval on average.
    """
    with_lineage = [a for a in found if a.event is not None and a.triples is not None]
    if len(with_lineage) < 100:
        return ["  (too few samples with offset lineage for a stage report)"]
    events = record_times(s, s.events_topic, {a.event for a in with_lineage if a.event is not None})
    triples = record_times(s, s.triples_topic, {a.triples for a in with_lineage if a.triples is not None})
    cuts = [(a.emitted, events[a.event], triples[a.triples], a.seen) for a in with_lineage
            if a.event in events and a.triples in triples]
    names = ("emit call -> events record (emitter)", "events record -> triples record (Kafka, worker)",
             "triples record -> seen in Neo4j (Kafka, sink, Neo4j, watcher)")
    lines = [f"  {name}: {quantiles([c[i + 1] - c[i] for c in cuts])}" for i, name in enumerate(names)]
    # Where the slowest 1 % spent their time: the same three stages, medians over those steps only.
    slowest = sorted(cuts, key=lambda c: c[3] - c[0])[-max(1, len(cuts) // 100):]
    start = min(c[0] for c in cuts)
    lines.append("  slowest 1 %, median ms per stage (emitter / worker / sink): " + " / ".join(
        f"{statistics.median(c[i + 1] - c[i] for c in slowest) * 1000:.0f}" for i in range(3))
        + f"; emitted {min(c[0] for c in slowest) - start:.1f}-{max(c[0] for c in slowest) - start:.1f} s in")
    return lines


def tail_report(found: list[Arrival], settle: float = 5.0) -> str:
    """When the slowest 1 % of the sampled steps were emitted, and the quantiles after the first ``settle`` s."""
    if len(found) < 100:
        return "  (too few samples for a tail report)"
    start = min(a.emitted for a in found)
    slowest = sorted(found, key=lambda a: a.latency)[-max(1, len(found) // 100):]
    at = sorted(a.emitted - start for a in slowest)
    later = [a.latency for a in found if a.emitted - start >= settle]
    windows = []  # p99 per 15-s window of emission: does the tail shrink as the servers' JIT settles?
    for lo in range(0, int(max(a.emitted for a in found) - start) + 1, 15):
        inside = sorted(a.latency for a in found if lo <= a.emitted - start < lo + 15)
        if len(inside) >= 100:
            windows.append(f"{lo}-{lo + 15} s {inside[int(len(inside) * 0.99)] * 1000:.0f}")
    return (f"  slowest 1 % emitted {at[0]:.1f}-{at[-1]:.1f} s into the run (median {at[len(at) // 2]:.1f} s); "
            f"after the first {settle:.0f} s: {quantiles(later) if len(later) >= 100 else 'too few'}\n"
            f"  p99 by window of emission (ms): {', '.join(windows)}")


def quantiles(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return f"p50 {q[49]:.0f} ms  p95 {q[94]:.0f} ms  p99 {q[98]:.0f} ms  max {ms[-1]:.0f} ms  (n={len(ms)})"


# -- replay --------------------------------------------------------------------------

def replay(s: Settings, logs: Path) -> tuple[str, Usage, float]:
    """``provstream replay --from-beginning --reset-graph`` of ``s``'s events topic: summary, usage, seconds."""
    argv = [sys.executable, "-m", "provstream", "replay", "--from-beginning", "--reset-graph"]
    began = time.monotonic()
    child = start_child("replay", argv, "replayed", child_env(s), logs / "replay.log")
    while child.alive():
        child.usage()
        time.sleep(0.2)
    if child.proc.returncode != 0:
        raise SystemExit(f"replay failed ({child.proc.returncode}):\n{child.tail()}")
    time.sleep(0.2)
    deleted = re.findall(r"deleted \d+ nodes", child.tail())
    summary = "".join(child.lines).strip().splitlines()[-1] + (f" (after it {deleted[-1]})" if deleted else "")
    return summary, child.last_usage, time.monotonic() - began


# -- profiling -------------------------------------------------------------------------

def py_spy(child: Child, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    beside = Path(sys.executable).with_name("py-spy")  # the dev extra installs it into .venv/bin
    binary = os.environ.get("PY_SPY") or shutil.which("py-spy") or (str(beside) if beside.exists() else None)
    if binary is None:
        raise SystemExit("--profile needs py-spy (make installs it with the dev extra; PY_SPY may name it)")
    return subprocess.Popen([binary, "record", "--pid", str(child.pid), "--duration", str(int(seconds)), "--rate", "50",
                             "--format", "raw", "--output", str(out), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def top_functions(path: Path, n: int = 12) -> list[str]:
    """Self time per function from py-spy's collapsed stacks (``frame;frame;... count``)."""
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            own[stack.split(";")[-1]] += int(count)
            total += int(count)
    return [f"    {100 * c / total:5.1f} %  {frame}" for frame, c in own.most_common(n)] if total else []


# -- main ------------------------------------------------------------------------------

def machine() -> str:
    return (f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs, "
            f"load average {os.getloadavg()[0]:.1f}, Python {platform.python_version()}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    pagecache = os.environ.get("PROVSTREAM_NEO4J_PAGECACHE") or BENCH_PAGECACHE
    heap = os.environ.get("PROVSTREAM_NEO4J_HEAP") or BENCH_HEAP
    stack = PrivateStack("bench", BENCH_PORTS, pagecache=pagecache, heap=heap) if args.brokers == 1 else \
        PrivateStack("bench-cluster", cluster_ports(100), brokers=args.brokers, pagecache=pagecache, heap=heap)
    was_running = stack.script("kafka", "status").endswith("running") and \
        stack.script("neo4j", "status").endswith("running")
    print(f"# bench_e2e {machine()}; Kafka brokers: {args.brokers}", flush=True)
    try:
        if not was_running:
            print(f"starting the private stack ({stack.dir.name}, empty, Neo4j page cache {pagecache}, "
                  f"heap {heap}) ...", flush=True)
            stack.up(fresh=True)
        return run(stack, args)
    finally:
        if not was_running and not args.keep_stack:
            stack.down()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60.0, help="sustained emission per run (default 60)")
    p.add_argument("--scale", type=int, nargs="*", default=[1, 2],
                   help="workers = sinks per run (default 1 2; none: the latency run only)")
    p.add_argument("--rate", type=float, default=1000.0, help="events/s in the latency run (default 1000)")
    p.add_argument("--latency-seconds", type=float, default=30.0)
    p.add_argument("--sample", type=int, default=5, help="watch every n-th step in the latency run (default 5)")
    p.add_argument("--warm-seconds", type=float, default=15.0,
                   help="emission of an unmeasured 1+1 run first, to warm the servers' JIT (default 15; 0: none)")
    p.add_argument("--no-replay", action="store_true")
    p.add_argument("--profile", type=Path, default=None, help="py-spy the one-worker sustained run into DIR")
    p.add_argument("--keep-stack", action="store_true", help="leave the private stack running")
    p.add_argument("--brokers", type=int, default=1,
                   help="Kafka brokers of the private stack (default 1; 3: RF 3, min ISR 2)")
    return p.parse_args(argv)


def run(stack: PrivateStack, args: argparse.Namespace) -> int:
    base = stack.settings()
    run_id = uuid.uuid4().hex[:8]
    logs = stack.dir / "logs" / f"bench-{run_id}"
    logs.mkdir(parents=True, exist_ok=True)
    print(f"Neo4j warm-up: {warm_up(base):.1f} s; logs in {logs}", flush=True)
    if args.warm_seconds > 0:
        warm = sustained(stack, base, run_id, logs, 1, args.warm_seconds, None, name="warm")
        print(f"pipeline warm-up, 1 worker + 1 sink emitting for {args.warm_seconds:.0f} s on the just-started stack "
              f"(not a result): {warm.events_per_s:,.0f} events/s end to end", flush=True)
    results = []
    for scale in args.scale:
        profile = args.profile if scale == 1 else None
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
        results.append(sustained(stack, base, run_id, logs, scale, args.seconds, profile))
        show_sustained(results[-1])
        if profile is not None:
            show_profiles(profile)
    found, missing, usage, window, lat_settings = latency(stack, base, run_id, logs, args.latency_seconds,
                                                          args.rate, args.sample)
    print(f"latency at {args.rate:.0f} events/s for {args.latency_seconds:.0f} s, emit call -> node queryable in "
          f"Neo4j (every {args.sample}th step, polled every {WATCH_EVERY * 1000:.0f} ms): "
          f"{quantiles([a.latency for a in found]) if found else 'nothing arrived'}; {missing} never arrived")
    print(tail_report(found))
    for line in stage_report(lat_settings, found):
        print(line)
    for line in usage_lines(usage, window):
        print(line)
    if not args.no_replay and results:
        summary, use, took = replay(replace(base, events_topic=phase_topic(run_id, results[0].scale)), logs)
        print(f"replay --from-beginning --reset-graph: {summary}")
        print(f"  replay     CPU {use.cpu_s:7.1f} s in {took:.1f} s, peak RSS {use.peak_rss_mb:.0f} MB")
    for r in results:
        print(f"scale-out: {r.scale} worker(s) + {r.scale} sink(s): {r.events_per_s:,.0f} events/s end to end")
    headline = next((r for r in results if r.scale == 1), results[0] if results else None)
    print(f"end-to-end: {headline.events_per_s:.0f} events/s" if headline else "end-to-end: n/a")
    return 0


def phase_topic(run_id: str, scale: int) -> str:
    return f"bench.{run_id}.x{scale}.events"


def show_profiles(folder: Path) -> None:
    for path in sorted(folder.glob("*.txt")):
        print(f"  profile {path.stem} (py-spy, self time of on-CPU samples):")
        for line in top_functions(path):
            print(line)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_emit":
        raise SystemExit(emit_main(sys.argv[2:]))
    raise SystemExit(main())
