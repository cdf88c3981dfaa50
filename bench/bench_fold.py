"""Benchmark: events/s through one fold worker on the real broker.

Pre-loads N events (the bundled ReAct trajectories, cycled into N/5 sessions)
on a fresh events topic, then starts one ``provstream worker`` and times how
long it takes until every triples message is on the triples topic.

    .venv/bin/python bench/bench_fold.py [--events 100000] [--batch-size 1000 ...] [--mode helper in-process]
        [--repeat N] [--profile DIR]

Prints one line per run: events, seconds (from "ready" to the last triples
message), events/s, and the workers' CPU time per event over the same span
(less sensitive than events/s to other load on a shared box; the worker's
helper process included). ``--batch-size 1`` is per-event processing;
``--mode in-process`` folds in the worker's own process. With ``--profile
DIR`` the worker runs under cProfile and the top functions are printed.
``--workers N`` runs N workers in one group. Topics are named ``bench.<id>.*``
and deleted after the run.

Figures and what bounds the worker: BENCHMARKS.md, "Fold worker".
"""

from __future__ import annotations

import argparse
import os
import pstats
import signal
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from provstream import testing
from provstream.codec import records as wire
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings
from provstream.streams.app import TABLE
from provstream.streams.runner import READY
from provstream.topics import ensure_topics

REPO = Path(__file__).resolve().parents[1]


def bench_settings(base: Settings, run_id: str, workdir: Path) -> Settings:
    return replace(
        base, events_topic=f"bench.{run_id}.events", triples_topic=f"bench.{run_id}.triples",
        events_dlq_topic=f"bench.{run_id}.events.dlq", triples_dlq_topic=f"bench.{run_id}.triples.dlq",
        worker_app_id=f"bench-{run_id}-fold", stack_dir=workdir,
    )


def preload(s: Settings, count: int) -> int:
    """Encode and send at least ``count`` events; the number sent."""
    records = testing.load_trajectories(REACT_TRAJECTORIES)
    p = KafkaProducer(bootstrap_servers=s.kafka_bootstrap, linger_ms=20, batch_size=256 * 1024)
    sent, n = 0, 0
    start = datetime(2025, 1, 1, tzinfo=UTC)
    while sent < count:
        for e in testing.trajectory_events(records[n % len(records)], f"b{n}", start):
            p.send(s.events_topic, key=e.session_id.encode(), value=wire.encode_event(e))
            sent += 1
        n += 1
    p.flush()
    p.close()
    return sent


def total_end_offset(consumer: KafkaConsumer, topic: str) -> int:
    parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
    return sum(consumer.end_offsets(parts).values())


def env(s: Settings) -> dict[str, str]:
    names = ("kafka_bootstrap", "events_topic", "triples_topic", "events_dlq_topic", "triples_dlq_topic",
             "worker_app_id", "partitions", "stack_dir")
    return {**os.environ, **{f"PROVSTREAM_{n.upper()}": str(getattr(s, n)) for n in names}}


def start_worker(s: Settings, batch_size: int, profile: Path | None, n: int, mode: str) -> subprocess.Popen[str]:
    prof = ["-m", "cProfile", "-o", str(profile / f"worker-{batch_size}-{n}.prof")] if profile else []
    extra = ["--fold-in-process"] if mode == "in-process" else []
    cmd = [sys.executable, *prof, "-m", "provstream", "worker", "--batch-size", str(batch_size), *extra]
    return subprocess.Popen(cmd, env=env(s), cwd=s.stack_dir, stdout=subprocess.PIPE, text=True,
                            stderr=(s.stack_dir / f"worker-{n}.log").open("w"))


def wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(READY):
            return
    raise SystemExit(f"worker exited with {proc.wait()} before it was ready")


def cpu_seconds(proc: subprocess.Popen[str]) -> float:
    """User + system CPU time so far of a running worker and its helper processes (Linux ``/proc``)."""
    return sum(_cpu(pid) for pid in {proc.pid, *descendants(proc.pid)})


def _cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    pending = [pid]
    while pending:
        try:
            files = Path(f"/proc/{pending.pop()}/task").glob("*/children")
            pids = {int(c) for f in files for c in f.read_text().split()}
        except (OSError, ValueError):
            continue
        pending.extend(pids - found)
        found |= pids
    return found


def run_once(
    base: Settings, events: int, batch_size: int, workers: int, profile: Path | None, mode: str = "helper"
) -> tuple[int, float, float]:
    run_id = uuid.uuid4().hex[:8]
    workdir = Path(os.environ.get("TMPDIR", "/tmp")) / f"provstream-bench-{run_id}"
    workdir.mkdir(parents=True)
    s = bench_settings(base, run_id, workdir)
    ensure_topics(s)
    t0 = time.monotonic()
    sent = preload(s, events)
    print(f"  preloaded {sent} events in {time.monotonic() - t0:.1f}s", flush=True)
    procs = [start_worker(s, batch_size, profile, n, mode) for n in range(workers)]
    consumer = KafkaConsumer(bootstrap_servers=s.kafka_bootstrap)
    try:
        for proc in procs:
            wait_ready(proc)
        ready = time.monotonic()
        cpu_ready = sum(cpu_seconds(p) for p in procs)
        while (done := total_end_offset(consumer, s.triples_topic)) < sent:
            if any(p.poll() is not None for p in procs) or time.monotonic() - ready > 900:
                raise SystemExit(f"a worker stopped or stalled at {done}/{sent} (logs in {workdir})")
            time.sleep(0.05)
        return sent, time.monotonic() - ready, sum(cpu_seconds(p) for p in procs) - cpu_ready
    finally:
        consumer.close()
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(60)
        delete_topics(s)


def delete_topics(s: Settings) -> None:
    """Best effort: the run's topics, its changelog included."""
    names = [s.events_topic, s.triples_topic, s.events_dlq_topic, s.triples_dlq_topic,
             f"{s.worker_app_id}-{TABLE}-changelog"]
    admin = KafkaAdminClient(bootstrap_servers=s.kafka_bootstrap)
    try:
        admin.delete_topics(names)
    except KafkaError as exc:
        print(f"  could not delete the run's topics: {exc}", flush=True)
    finally:
        admin.close()


def show_profile(path: Path) -> None:
    stats = pstats.Stats(str(path))
    stats.sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, nargs="+", default=[1000])
    parser.add_argument("--workers", type=int, default=1, help="worker processes in the group (default 1)")
    parser.add_argument("--profile", type=Path, default=None, help="run the worker under cProfile, stats here")
    parser.add_argument("--mode", nargs="+", choices=("helper", "in-process"), default=["helper"],
                        help="fold in the worker's helper process (default) and/or in its own process")
    parser.add_argument("--repeat", type=int, default=1, help="runs per setting; the median is printed too")
    args = parser.parse_args()
    base = Settings.from_env()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    for batch in args.batch_size:
        for mode in args.mode:
            rates = []
            for _ in range(args.repeat):
                print(f"batch size {batch}, {mode}:", flush=True)
                sent, seconds, cpu = run_once(base, args.events, batch, args.workers, args.profile, mode)
                rates.append(sent / seconds)
                print(f"batch size {batch}, {mode}, {args.workers} worker(s): {sent} events in {seconds:.2f}s "
                      f"= {sent / seconds:,.0f} events/s; worker CPU {cpu:.2f}s = {cpu / sent * 1e6:.0f} µs/event "
                      f"(load average {os.getloadavg()[0]:.2f})", flush=True)
                if args.profile:
                    show_profile(args.profile / f"worker-{batch}-0.prof")
            if args.repeat > 1:
                print(f"median batch size {batch}, {mode}: {statistics.median(rates):,.0f} events/s "
                      f"(runs: {', '.join(f'{r:,.0f}' for r in rates)})", flush=True)

if __name__ == "__main__":
    main()
