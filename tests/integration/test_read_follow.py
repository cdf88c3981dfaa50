"""provstream follow / tg-show-explain-trace --follow: real-time consumers of the triples topic."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import pytest
from kafka import KafkaProducer

from provstream import testing as samples
from provstream.codec import records as wire
from provstream.core import vocab as v
from provstream.core.triples import StepTriples
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TRAJECTORIES = samples.load_trajectories(REACT_TRAJECTORIES)
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
BIN = Path(sys.executable).parent
TIMEOUT = 60.0
AGENT, GRAPHRAG = v.question_iri(v.Mechanism.AGENT, ""), v.question_iri(v.Mechanism.GRAPHRAG, "")  # IRI prefixes


def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))


@contextmanager
def _running(args: Sequence[str], settings: Settings) -> Iterator[tuple[subprocess.Popen[str], queue.Queue[str],
                                                                         queue.Queue[str]]]:
    """The command with the test's triples topic; always interrupted and reaped."""
    env = {**os.environ, "PROVSTREAM_TRIPLES_TOPIC": settings.triples_topic, "COLUMNS": "200"}
    proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    out: queue.Queue[str] = queue.Queue()
    err: queue.Queue[str] = queue.Queue()
    for stream, lines in ((proc.stdout, out), (proc.stderr, err)):
        threading.Thread(target=_pump, args=(stream, lines), daemon=True).start()
    try:
        yield proc, out, err
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def _wait_for(lines: queue.Queue[str], needle: str) -> list[str]:
    seen: list[str] = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            seen.append(lines.get(timeout=0.5))
        except queue.Empty:
            continue
        if needle in seen[-1]:
            return seen
    raise AssertionError(f"{needle!r} never appeared; got {seen}")


def _collect(lines: queue.Queue[str], count: int) -> list[str]:
    """``count`` lines, then a short grace period to show nothing else arrives."""
    seen: list[str] = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < count and time.monotonic() < deadline:
        try:
            seen.append(lines.get(timeout=0.5))
        except queue.Empty:
            continue
    time.sleep(1.0)
    while not lines.empty():
        seen.append(lines.get())
    return seen


def _produce(settings: Settings, msgs: Sequence[StepTriples]) -> None:
    producer = KafkaProducer(bootstrap_servers=settings.kafka_bootstrap)
    try:
        for m in msgs:
            producer.send(settings.triples_topic, key=m.session_id.encode(), value=wire.encode_triples(m))
        producer.flush(timeout=30)
    finally:
        producer.close()


def _interrupt(proc: subprocess.Popen[str], signum: int = signal.SIGINT) -> int:
    proc.send_signal(signum)
    return proc.wait(timeout=30)


def _messages(settings: Settings, prefix: str, **scope: str) -> list[StepTriples]:
    events = samples.scenario(TRAJECTORIES, prefix, start=START, user=scope.get("user", settings.user),
                              collection=scope.get("collection", settings.collection))
    return samples.fold_all(events)


def test_follow_prints_steps_of_its_scope_as_they_arrive(isolated: Settings, unique: str) -> None:
    with _running([BIN / "provstream", "follow", "-C", isolated.collection], isolated) as (proc, out, err):
        _wait_for(err, "following")
        other = _messages(isolated, unique + "x", collection=isolated.collection + "-other")
        other += _messages(isolated, unique + "y", user="someone-else")
        mine = _messages(isolated, unique)
        _produce(isolated, other + mine)
        lines = _collect(out, len(mine))
        assert _interrupt(proc) == 0
    assert len(lines) == len(mine)
    assert all(line.split()[0].rsplit(":", 1)[1].startswith(unique + "-") for line in lines)  # full trace IRIs
    assert any(line.startswith(f"{AGENT}{unique}-dag  Agent    question    What is the elevation range")
               for line in lines)
    assert any(line.startswith(f"{GRAPHRAG}{unique}-rag  GraphRAG focus       2 edges selected")
               for line in lines)
    assert any(f"{unique}-dag  Agent    conclusion  1,800 to 7,000 ft  [complete]" in line for line in lines)


def test_follow_from_beginning_replays_what_is_already_there(isolated: Settings, unique: str) -> None:
    mine = _messages(isolated, unique)
    _produce(isolated, mine)
    with _running([BIN / "provstream", "follow", "-C", isolated.collection, "--from-beginning"],
                  isolated) as (proc, out, _):
        lines = _collect(out, len(mine))
        assert _interrupt(proc, signal.SIGTERM) == 0  # a service manager's stop is as clean as Ctrl-C
    assert len(lines) == len(mine)


def test_show_follow_waits_for_and_prints_only_its_trace(isolated: Settings, unique: str) -> None:
    question = v.question_iri(v.Mechanism.GRAPHRAG, f"{unique}-rag")
    args = [BIN / "tg-show-explain-trace", question, "-C", isolated.collection, "--follow"]
    with _running(args, isolated) as (proc, out, err):
        _wait_for(err, "following")  # after "not recorded yet; waiting"
        _produce(isolated, _messages(isolated, unique))
        lines = _collect(out, 4)
        assert _interrupt(proc) == 0
    assert [line.split()[2] for line in lines] == ["question", "exploration", "focus", "synthesis"]  # one partition
    assert all(line.startswith(f"urn:trustgraph:question:{unique}-rag  GraphRAG") for line in lines)


def test_show_follow_of_an_agent_trace_follows_the_subtrace_its_iteration_called(
        isolated: Settings, unique: str) -> None:
    question = v.question_iri(v.Mechanism.AGENT, f"{unique}-parent")
    args = [BIN / "tg-show-explain-trace", question, "-C", isolated.collection, "--follow"]
    msgs = _messages(isolated, unique)
    parent = [m for m in msgs if m.question == question]
    sub = [m for m in msgs if m.session_id == f"{unique}-sub"]
    with _running(args, isolated) as (proc, out, err):
        _wait_for(err, "following")
        _produce(isolated, msgs)
        lines = _collect(out, len(parent) + len(sub))
        assert _interrupt(proc) == 0
    assert len([line for line in lines if line.startswith(f"{AGENT}{unique}-parent  Agent")]) == len(parent)
    assert [line.split()[2] for line in lines if line.startswith(f"  urn:trustgraph:docrag:{unique}-sub  DocRAG")] == [
        "question", "exploration", "synthesis"]
    assert len(lines) == len(parent) + len(sub), "nothing of the other sessions"
