"""Helpers for the worker's integration tests and benchmark: run the worker, feed it, read what it wrote."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from provstream.codec import records as wire
from provstream.core import events as ev
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings
from provstream.streams.runner import READY

REPO = Path(__file__).resolve().parents[2]
TRAJECTORIES = REACT_TRAJECTORIES


def worker_env(settings: Settings) -> dict[str, str]:
    names = ("kafka_bootstrap", "events_topic", "triples_topic", "events_dlq_topic", "triples_dlq_topic",
             "worker_app_id", "partitions", "stack_dir", "max_message_bytes", "session_retention_s",
             "worker_fold_process")
    return {**os.environ, **{f"PROVSTREAM_{n.upper()}": str(getattr(settings, n)) for n in names}}


@dataclass
class WorkerProcess:
    """``provstream worker`` as a child process; its stdout is collected by a thread."""

    proc: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith(READY):
                self.ready.set()

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"worker not ready (exit {self.proc.poll()}):\n{''.join(self.lines)}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def descendants(self) -> set[int]:
        """The worker's child processes and theirs (its helper process, ...), from ``/proc``."""
        return descendants(self.proc.pid)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then SIGKILL if it does not exit in time; the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    pending = [pid]
    while pending:
        try:
            children = Path(f"/proc/{pending.pop()}/task").glob("*/children")
            pids = {int(c) for f in children for c in f.read_text().split()}
        except (OSError, ValueError):
            continue
        pending.extend(pids - found)
        found |= pids
    return found


def alive(pids: set[int], timeout: float = 0.0) -> set[int]:
    """Those of ``pids`` still running (not zombies) after waiting up to ``timeout`` for them to go."""
    deadline = time.monotonic() + timeout
    while True:
        running = set()
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                running.add(pid)
        if not running or time.monotonic() >= deadline:
            return running
        time.sleep(0.1)


def start_worker(settings: Settings, *args: str, log: Path | None = None, own_group: bool = False) -> WorkerProcess:
    """``provstream worker ARGS``; ``own_group``: in a process group of its own, as ``provstream stack`` runs it."""
    stderr = log.open("ab") if log else subprocess.DEVNULL
    level = os.environ.get("PROVSTREAM_TEST_WORKER_LOG_LEVEL")  # e.g. INFO, to see a failure's worker side
    proc = subprocess.Popen(
        [sys.executable, "-m", "provstream", "worker", *args, *(["--log-level", level] if level else [])],
        env=worker_env(settings), cwd=settings.stack_dir,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr, text=True, start_new_session=own_group,
    )
    w = WorkerProcess(proc)
    threading.Thread(target=w._read, daemon=True).start()
    return w


@contextmanager
def running_worker(settings: Settings, *args: str, log: Path | None = None) -> Iterator[WorkerProcess]:
    """A ready worker, always stopped afterwards."""
    w = start_worker(settings, *args, log=log)
    try:
        w.wait_ready()
        yield w
    finally:
        w.stop()


def producer(settings: Settings) -> KafkaProducer:
    return KafkaProducer(bootstrap_servers=settings.kafka_bootstrap, linger_ms=5)


def send_events(settings: Settings, events: Iterable[ev.Event], p: KafkaProducer | None = None) -> int:
    own = p is None
    p = p or producer(settings)
    n = 0
    for e in events:
        p.send(settings.events_topic, key=e.session_id.encode(), value=wire.encode_event(e))
        n += 1
    p.flush()
    if own:
        p.close()
    return n


def read_topic(settings: Settings, topic: str, until: int, timeout: float = 60.0) -> list[object]:
    """All records of ``topic`` from the start, waiting until there are at least ``until`` (or timeout)."""
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        records: list[object] = []
        deadline = time.monotonic() + timeout
        while len(records) < until and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=300).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def end_offsets(settings: Settings, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=settings.kafka_bootstrap, enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        return sum(consumer.end_offsets(parts).values())
    finally:
        consumer.close()


def missing_report(settings: Settings, missing: set[str]) -> str:
    """Where the events without triples sit in the events topic, next to the worker group's commits."""
    from kafka.admin import KafkaAdminClient

    where: dict[int, list[int]] = {}
    for record in read_topic(settings, settings.events_topic, end_offsets(settings, settings.events_topic), 30):
        if wire.decode_event(record.value).event_id in missing:  # type: ignore[attr-defined]
            where.setdefault(record.partition, []).append(record.offset)  # type: ignore[attr-defined]
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
    try:
        commits = admin.list_group_offsets(settings.worker_app_id).get(settings.worker_app_id, {})
    finally:
        admin.close()
    committed = {tp.partition: o.offset for tp, o in commits.items() if tp.topic == settings.events_topic}
    return "; ".join(f"p{p}: {len(o)} missing at offsets {min(o)}..{max(o)}, committed {committed.get(p)}"
                     for p, o in sorted(where.items()))
