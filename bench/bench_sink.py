"""Neo4j sink and replay benchmark against the real stack (a script, not a test).

Builds ``--sessions`` agent sessions from the bundled ReAct trajectories,
folds them offline and prints, in one run:

* **sink**: triples/s through ``provstream sink`` (a child process): the
  triples messages are pre-loaded into a fresh topic, then the time from the
  sink's ready line until it has committed every offset (Kafka consume, Avro
  decode, Neo4j write, commit);
* **replay**: events/s and triples/s of ``replay`` from a fresh events topic
  into an emptied scope;
* **batched writer vs naive writer**: the same ``--naive`` messages written
  with :meth:`Neo4jStore.write` in batches of ``sink_batch_size`` and one
  message per transaction; and the ratios.

Each phase writes into an emptied scope (its own collection) so MERGE always
creates. Before measuring, ``--warmup`` sessions are written once through the
store and deleted: a Neo4j server that has just started compiles its Cypher
and warms its JIT on the first ~100k triples (measured: the first sink run
after a restart 7,770 triples/s with Neo4j using 22.6 CPU-s, the same run
warm 20,552 triples/s with 5.1 CPU-s). The sink phase runs ``--repeat`` times
(a fresh consumer group each time) and the median is reported. Usage:
``.venv/bin/python bench/bench_sink.py [--sessions 4000] [--naive 2000] [--warmup 1000] [--repeat 3]``.
Topics ``bench.sink.<id>.*`` and the scope are deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition

from provstream.codec import records as wire
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.connectors.replay import StartAt, replay
from provstream.core import events as ev
from provstream.core.triples import StepTriples
from provstream.settings import Settings
from provstream.testing import fold_all, load_trajectories, sessions
from provstream.topics import ensure_topics, topic_specs

START = datetime(2025, 3, 1, tzinfo=UTC)
STALL_SECONDS = 120
SINK_COMMAND = ["-m", "provstream", "sink", "-v"]


def bench_settings(base: Settings, run_id: str) -> Settings:
    return replace(
        base, events_topic=f"bench.sink.{run_id}.events", triples_topic=f"bench.sink.{run_id}.triples",
        events_dlq_topic=f"bench.sink.{run_id}.events.dlq", triples_dlq_topic=f"bench.sink.{run_id}.triples.dlq",
        sink_group=f"bench-sink-{run_id}", worker_app_id=f"bench-sink-{run_id}-fold",
        collection=f"bench-sink-{run_id}",
    )


def make_data(settings: Settings, count: int) -> tuple[list[ev.Event], list[StepTriples]]:
    """Events of ``count`` sessions (interleaved as live agents would emit them) and their triples messages."""
    per_session = list(sessions(load_trajectories(), f"bench-{settings.collection}", START, count, settings.user,
                                settings.collection))
    events = [s[i] for i in range(max(map(len, per_session))) for s in per_session if i < len(s)]
    return events, fold_all(events)


def produce(settings: Settings, topic: str, items: Sequence[tuple[str, bytes]]) -> float:
    began = time.perf_counter()
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, acks="all", linger_ms=20,
                             batch_size=256 * 1024, max_request_size=settings.max_message_bytes + 65536)
    try:
        for key, value in items:
            producer.send(topic, key=key.encode(), value=value)
        producer.flush()
    finally:
        producer.close(timeout=30)
    return time.perf_counter() - began


def committed(settings: Settings, consumer: KafkaConsumer, parts: list[TopicPartition]) -> int:
    return sum(consumer.committed(tp) or 0 for tp in parts)


def child_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"PROVSTREAM_" + f.name.upper(): str(getattr(settings, f.name)) for f in fields(settings) if f.repr})
    return env


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds of a process so far (0 if unknown)."""
    if pid is None:
        return 0.0
    try:
        fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields_[11]) + int(fields_[12])) / os.sysconf("SC_CLK_TCK")


def neo4j_pid(settings: Settings) -> int | None:
    """The Neo4j server of this stack (its java process names the stack's Neo4j home)."""
    home = f"--home-dir={settings.stack_dir / 'neo4j'}".encode()
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and home in (proc / "cmdline").read_bytes().split(b"\0"):
                return int(proc.name)
        except OSError:
            continue
    return None


def run_sink(settings: Settings, total: int) -> tuple[float, float, int, float, float]:
    """For ``total`` pre-loaded records: seconds from the sink's ready line to its last commit,
    seconds from its first commit to its last, records committed by the first commit, and the
    CPU seconds the sink and the Neo4j server used between first and last commit."""
    log = Path(tempfile.gettempdir()) / f"bench-sink-{settings.sink_group}.log"
    proc = subprocess.Popen([sys.executable, *SINK_COMMAND], env=child_env(settings),
                            stdout=subprocess.PIPE, stderr=log.open("w"), text=True)
    watcher = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, group_id=settings.sink_group,
                            enable_auto_commit=False)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "provstream sink ready" not in line:
            raise SystemExit(f"sink did not start: {line!r}")
        began = time.perf_counter()
        parts = [TopicPartition(settings.triples_topic, p)
                 for p in watcher.partitions_for_topic(settings.triples_topic) or ()]
        server = neo4j_pid(settings)
        first: tuple[float, int] | None = None
        cpu_first = (0.0, 0.0)
        progress = (time.perf_counter(), 0)
        while (done := committed(settings, watcher, parts)) < total:
            if proc.poll() is not None:
                raise SystemExit(f"sink exited with {proc.returncode} (log: {log})")
            if done and first is None:
                first = (time.perf_counter(), done)
                cpu_first = (cpu_seconds(proc.pid), cpu_seconds(server))
            if done > progress[1]:
                progress = (time.perf_counter(), done)
            elif time.perf_counter() - progress[0] > STALL_SECONDS:
                raise SystemExit(f"sink made no progress for {STALL_SECONDS} s at {done}/{total} (log: {log})")
            time.sleep(0.25)
        end = time.perf_counter()
        sink_cpu, server_cpu = cpu_seconds(proc.pid) - cpu_first[0], cpu_seconds(server) - cpu_first[1]
        first = first or (end, total)
        log.unlink(missing_ok=True)
        return end - began, end - first[0], first[1], sink_cpu, server_cpu
    finally:
        watcher.close(autocommit=False)
        proc.terminate()
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()


def batched_and_naive(settings: Settings, store: Neo4jStore, messages: list[StepTriples]) -> tuple[float, float]:
    """Seconds to write ``messages`` batched (sink_batch_size) and naively (one transaction each)."""
    size = settings.sink_batch_size
    began = time.perf_counter()
    for i in range(0, len(messages), size):
        store.write(messages[i:i + size])
    batched = time.perf_counter() - began
    store.reset_graph(user=settings.user, collection=settings.collection)
    began = time.perf_counter()
    for msg in messages:
        store.write([msg])
    naive = time.perf_counter() - began
    return batched, naive


def warm_up(settings: Settings, store: Neo4jStore, count: int) -> None:
    """Write ``count`` sessions through the store into a scope of their own, then delete them."""
    if count <= 0:
        return
    warm = replace(settings, collection=f"{settings.collection}-warmup")
    _, messages = make_data(warm, count)
    for i in range(0, len(messages), settings.sink_batch_size):
        store.write(messages[i:i + settings.sink_batch_size])
    store.reset_graph(user=warm.user, collection=warm.collection)


def cleanup(settings: Settings) -> None:
    with Neo4jStore(settings) as store:
        store.reset_graph(user=settings.user, collection=settings.collection)
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    try:
        admin.delete_topics([t.name for t in topic_specs(settings)])
    finally:
        admin.close()


def rate(n: float, seconds: float) -> str:
    return f"{n / seconds:,.0f}/s" if seconds > 0 else "n/a"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=4000)
    parser.add_argument("--naive", type=int, default=2000, help="messages for the batched/naive comparison")
    parser.add_argument("--warmup", type=int, default=1000, help="sessions written and deleted before measuring")
    parser.add_argument("--repeat", type=int, default=3, help="sink runs; the median is reported")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    settings = bench_settings(Settings.from_env(), uuid.uuid4().hex[:8])
    ensure_topics(settings)
    print(f"machine: {platform.node()} {os.cpu_count()} cpus, python {platform.python_version()}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; batch {settings.sink_batch_size} messages / "
          f"{settings.sink_batch_ms} ms")
    try:
        events, messages = make_data(settings, args.sessions)
        n_triples = sum(len(m.triples) for m in messages)
        print(f"data: {args.sessions} sessions, {len(events)} events/messages, {n_triples} triples")
        produce(settings, settings.triples_topic, [(m.session_id, wire.encode_triples(m)) for m in messages])
        produce(settings, settings.events_topic, [(e.session_id, wire.encode_event(e)) for e in events])

        with Neo4jStore(settings) as store:
            store.setup()
            warm_up(settings, store, args.warmup)
        runs = []
        for n in range(args.repeat):
            with Neo4jStore(settings) as store:
                store.reset_graph(user=settings.user, collection=settings.collection)
            run = run_sink(replace(settings, sink_group=f"{settings.sink_group}-{n}"), len(messages))
            runs.append(run)
            sink_s, steady_s, first_done, sink_cpu, server_cpu = run
            steady_triples = n_triples * (len(messages) - first_done) // len(messages)
            print(f"sink #{n + 1}: {len(messages)} messages, {n_triples} triples in {sink_s:.2f} s from ready "
                  f"(incl. group join): {rate(n_triples, sink_s)} triples, {rate(len(messages), sink_s)} messages")
            print(f"         sustained, first to last commit: {rate(steady_triples, steady_s)} triples "
                  f"({len(messages) - first_done} messages in {steady_s:.2f} s); CPU meanwhile: sink process "
                  f"{sink_cpu:.1f} s, Neo4j server {server_cpu:.1f} s (2 cores = {2 * steady_s:.1f} core-s)")
        steady = statistics.median(n_triples * (len(messages) - r[2]) / len(messages) / r[1] for r in runs)
        print(f"sink:    median of {len(runs)}: sustained {steady:,.0f}/s triples, from ready "
              f"{statistics.median(n_triples / r[0] for r in runs):,.0f}/s triples")

        with Neo4jStore(settings) as store:
            store.reset_graph(user=settings.user, collection=settings.collection)
        stats = replay(settings, StartAt.beginning())
        print(f"replay:  {stats.summary()}")

        sample = messages[: args.naive]
        sample_triples = sum(len(m.triples) for m in sample)
        with Neo4jStore(settings) as store:
            store.reset_graph(user=settings.user, collection=settings.collection)
            batched_s, naive_s = batched_and_naive(settings, store, sample)
        print(f"writer:  {len(sample)} messages, {sample_triples} triples: batched {batched_s:.2f} s "
              f"({rate(sample_triples, batched_s)}), naive one-transaction-per-message {naive_s:.2f} s "
              f"({rate(sample_triples, naive_s)})")
        print(f"ratio:   sustained sink (median) / naive = {steady / (sample_triples / naive_s):.1f}x, "
              f"batched writer / naive = {naive_s / batched_s:.1f}x")
    finally:
        if not args.keep:
            cleanup(settings)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
