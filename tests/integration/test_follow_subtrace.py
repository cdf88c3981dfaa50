"""provstream follow URI: a trace followed live, an agent sub-trace's steps printed under the step that called it."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import pytest
from kafka import KafkaProducer

from provstream import testing as samples
from provstream.codec import records as wire
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.settings import Settings

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
START = datetime(2025, 3, 6, 9, 0, tzinfo=UTC)
AGENT = v.Mechanism.AGENT


def _pump(stream: IO[str], lines: queue.Queue[str]) -> None:
    for line in stream:
        lines.put(line.rstrip("\n"))


def _next(lines: queue.Queue[str], timeout: float = 60.0) -> str:
    return lines.get(timeout=timeout)


def test_follow_uri_follows_an_agent_subtrace_live_under_its_parent_step(isolated: Settings, unique: str) -> None:
    records = samples.load_trajectories()
    parent, child = f"{unique}-parent", f"{unique}-child"
    scope = {"user": isolated.user, "collection": isolated.collection}
    child_msgs = samples.fold_all(samples.agent_events(records[4], child, start=START + timedelta(seconds=1),
                                                       **scope))
    parent_msgs = samples.fold_all(samples.agent_events(records[3], parent, start=START,
                                                        subtraces={2: ev.SubTrace(AGENT, child)}, **scope))
    other = samples.fold_all(samples.agent_events(records[0], f"{unique}-other", start=START, **scope))
    env = {**os.environ, "PROVSTREAM_TRIPLES_TOPIC": isolated.triples_topic, "COLUMNS": "200"}
    proc = subprocess.Popen([str(BIN / "provstream"), "follow", v.question_iri(AGENT, parent),
                             "-C", isolated.collection], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    out: queue.Queue[str] = queue.Queue()
    err: queue.Queue[str] = queue.Queue()
    for stream, lines in ((proc.stdout, out), (proc.stderr, err)):
        threading.Thread(target=_pump, args=(stream, lines), daemon=True).start()
    producer = KafkaProducer(bootstrap_servers=isolated.kafka_bootstrap)

    def send(msgs: list) -> None:
        for m in msgs:
            producer.send(isolated.triples_topic, key=m.session_id.encode(), value=wire.encode_triples(m))
        producer.flush(timeout=30)

    p_iri, c_iri = v.question_iri(AGENT, parent), v.question_iri(AGENT, child)  # each line starts with its trace
    try:
        assert "and its sub-traces" in _next(err)
        send(parent_msgs[:2])  # question, i1
        assert [_next(out).split()[2] for _ in range(2)] == ["question", "i1"]
        send(child_msgs[:2] + other)  # the sub-agent starts (not yet linked), another session runs
        time.sleep(1.5)
        assert out.empty(), "nothing printed before the parent step links the sub-trace"
        send(parent_msgs[2:3])  # i2 calls the sub-agent: its steps so far print under i2
        assert _next(out).startswith(f"{p_iri}  Agent    i2")
        assert _next(out).startswith(f"  {c_iri}  Agent    question")  # indented under i2
        assert _next(out).startswith(f"  {c_iri}  Agent    i1")
        send(child_msgs[2:])  # the rest of the sub-agent arrives live, indented
        for _ in child_msgs[2:]:
            line = _next(out)
            assert line.startswith(f"  {c_iri}  Agent"), line
        send(parent_msgs[3:])
        rest = [_next(out) for _ in parent_msgs[3:]]
        assert all(line.startswith(f"{p_iri}  Agent") for line in rest) and "[complete]" in rest[-1]
        time.sleep(1.0)
        assert out.empty(), "nothing of the other session"
    finally:
        producer.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
