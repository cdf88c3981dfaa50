"""Emitter benchmark against the real broker (a script, not a test).

Replays the bundled ReAct trajectories (realistic step sizes) through
:class:`Emitter` + :class:`KafkaTransport` into a fresh topic and prints:

* the cost of one emitter call on the calling thread (p50/p99/max, µs), in a
  burst (calls back to back, the sender thread competing for the GIL) and
  paced (a pause between calls, as in an agent that waits for its LLM);
* sustained throughput: events/s from the first call until ``flush()``
  returned (every event acknowledged by Kafka, ``acks=all``).

Usage: ``.venv/bin/python bench/bench_emit.py [--events 200000] [--paced 5000]``.
The topic ``bench.emit.<random>`` is deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import time
import timeit
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from kafka.admin import KafkaAdminClient

from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import KafkaTransport
from provstream.core.trajectories import AgentTrajectory, load
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings
from provstream.topics import topic_specs


def steps(records: list[AgentTrajectory], total: int) -> list[tuple[str, Any]]:
    """A flat list of ``total`` calls cycling through the trajectories: ("q", text), ("i", step), ("c", text)."""
    calls: list[tuple[str, Any]] = []
    while len(calls) < total:
        for r in records:
            calls += [("q", r.question), *(("i", s) for s in r.steps), ("c", r.answer)]
    return calls[:total]


def run(emitter: Emitter, calls: list[tuple[str, Any]], pause_s: float = 0.0) -> list[int]:
    """Make the calls; return each call's duration in ns (sessions opened by "q" calls)."""
    durations: list[int] = []
    clock = time.perf_counter_ns
    session: Any = None
    for kind, item in calls:
        start = clock()
        if kind == "q":
            session = emitter.agent(item)
        elif kind == "i":
            session.iteration(thought=item.thought, action=item.action, arguments=item.arguments,
                              observation=item.observation)
        else:
            session.conclude(item)
        durations.append(clock() - start)
        if pause_s:
            _pause(pause_s)
    return durations


def _pause(seconds: float) -> None:
    time.sleep(seconds)  # as an agent waiting on its LLM or a tool: the GIL is free meanwhile


def quantiles(durations: list[int]) -> str:
    us = sorted(d / 1000 for d in durations)
    p = statistics.quantiles(us, n=100, method="inclusive")
    return f"p50 {p[49]:.1f} µs  p99 {p[98]:.1f} µs  max {us[-1]:.0f} µs  (n={len(us)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events in the throughput run")
    parser.add_argument("--paced", type=int, default=5_000, help="events in the paced latency run")
    parser.add_argument("--pause-us", type=float, default=1000.0, help="pause between paced calls")
    parser.add_argument("--compression", default=None, help="producer compression_type (lz4, zstd, gzip)")
    parser.add_argument("--keep", action="store_true", help="keep the topic")
    parser.add_argument("--switch-interval-us", type=float, default=None,
                        help="sys.setswitchinterval for the run (CPython default 5000 µs)")
    args = parser.parse_args()
    if args.switch_interval_us:
        sys.setswitchinterval(args.switch_interval_us / 1e6)

    settings = Settings.from_env()
    topic = f"bench.emit.{uuid.uuid4().hex[:10]}"
    settings = replace(settings, events_topic=topic)
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, client_id="provstream-bench")
    admin.create_topics([topic_specs(settings)[0]])
    admin.close()  # not kept open: its network thread would share the GIL during the runs
    records = [r for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory)]
    print(f"# bench_emit {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {platform.python_implementation()} "
          f"{platform.python_version()}  cpus={os.cpu_count()}  load={os.getloadavg()[0]:.2f}  topic={topic}  "
          f"partitions={settings.partitions}  compression={args.compression}  "
          f"switch interval={sys.getswitchinterval() * 1e6:.0f} µs")
    try:
        bench(settings, records, args)
    finally:
        if not args.keep:
            admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, client_id="provstream-bench")
            admin.delete_topics([topic])
            admin.close()


def baseline(settings: Settings, records: list[AgentTrajectory], pause_s: float) -> None:
    """What a step costs with no sender thread at all: building, checking and encoding it."""
    from provstream.connectors.transport import MemoryTransport

    reference = min(timeit.repeat("sum(range(10_000))", number=100, repeat=5)) / 100 * 1e6
    print(f"machine reference: sum(range(10_000)) = {reference:.0f} µs")
    with Emitter(settings, transport=MemoryTransport()) as emitter:
        calls = steps(records, 20_000)
        run(emitter, calls)
        print(f"calling thread, memory transport (no sender thread), burst: {quantiles(run(emitter, calls))}")
        paced = run(emitter, calls[:2_000], pause_s)
        print(f"calling thread, memory transport (no sender thread), paced: {quantiles(paced)}")


def bench(settings: Settings, records: list[AgentTrajectory], args: argparse.Namespace) -> None:
    baseline(settings, records, args.pause_us / 1e6)
    transport = KafkaTransport(settings, config={"compression_type": args.compression})
    with Emitter(settings, transport=transport) as emitter:
        transport.wait_connected(30)
        warm = steps(records, 2_000)
        run(emitter, warm)
        emitter.flush()
        size = sum(len(v) for v in _sizes(settings, warm)) / len(warm)
        print(f"mean encoded step: {size:.0f} bytes")

        paced = steps(records, args.paced)
        d = run(emitter, paced, args.pause_us / 1e6)
        emitter.flush()
        print(f"calling thread, paced ({args.pause_us:.0f} µs between calls): {quantiles(d)}")

        calls = steps(records, args.events)
        gc.collect()
        start = time.perf_counter()
        d = run(emitter, calls)
        sent = time.perf_counter()
        emitter.flush()
        end = time.perf_counter()
        print(f"calling thread, burst: {quantiles(d)}")
        print(f"throughput: {len(calls) / (end - start):,.0f} events/s acknowledged "
              f"({len(calls)} events, calls took {sent - start:.2f}s, flush {end - sent:.2f}s)")


def _sizes(settings: Settings, calls: list[tuple[str, Any]]) -> list[bytes]:
    from provstream.connectors.transport import MemoryTransport

    memory = MemoryTransport()
    with Emitter(settings, transport=memory) as emitter:
        run(emitter, calls)
    return [v for _, v in memory.sent]


if __name__ == "__main__":
    main()
