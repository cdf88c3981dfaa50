"""The per-event cost of encryption (``PROVSTREAM_ENCRYPT=1``), a script, not a test.

Replays the bundled ReAct trajectories (realistic step sizes) and prints, per event:

* the emitter call on the calling thread with no Kafka (memory transport, the
  Avro encoding done at the call), encryption off and on, interleaved in
  rounds so both see the same machine load; the difference is what sealing
  the personal text fields (AES-GCM, one fresh nonce per field) costs; the
  "on" figure includes one data key per session (made and wrapped; stored in
  memory here);
* the reader side: opening one folded step's sealed literals (sink, replay,
  follow, as-of), per message;
* with ``--kafka``: the one extra round trip per *session* (the data key
  written to a keys topic with ``acks=all`` before the session's first event),
  against the broker of the settings (a topic ``bench.keys.<random>``,
  deleted at the end).

Usage: ``.venv/bin/python bench/bench_crypto.py [--events 20000] [--rounds 5] [--kafka]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bench_emit import quantiles, run, steps
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from provstream.codec.records import decode_event
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.core.trajectories import AgentTrajectory, load
from provstream.crypto import KeyRing, MemoryKeyStore
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings
from provstream.testing import fold_all


def _calls(calls: list[tuple[str, Any]], ring: KeyRing | None) -> tuple[list[int], list[bytes]]:
    transport = MemoryTransport()  # encodes at the call, so the Avro cost is counted in both
    with Emitter(Settings(), transport=transport, keys=ring) as emitter:
        durations = run(emitter, calls)
    return durations, [v for _, v in transport.sent]


def _median_us(durations: list[int]) -> float:
    return statistics.median(durations) / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000, help="events per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of off/on, interleaved")
    parser.add_argument("--kafka", action="store_true", help="also time the data key's round trip to Kafka")
    args = parser.parse_args()
    records = [r for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory)]
    calls = steps(records, args.events)
    sessions = sum(1 for kind, _ in calls if kind == "q")
    print(f"# bench_crypto {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {platform.python_implementation()} "
          f"{platform.python_version()}  {os.cpu_count()} CPUs  load {os.getloadavg()[0]:.2f}")
    print(f"# {args.events} events ({sessions} sessions) per round, {args.rounds} rounds, no Kafka")
    master = AESGCM(AESGCM.generate_key(bit_length=256))
    off: list[int] = []
    on: list[int] = []
    per_round = []
    sealed: list[bytes] = []
    ring = KeyRing(MemoryKeyStore(), master)
    for _ in range(args.rounds):
        d_off, _ = _calls(calls, None)
        ring = KeyRing(MemoryKeyStore(), master)
        d_on, sealed = _calls(calls, ring)
        off += d_off
        on += d_on
        per_round.append(_median_us(d_on) - _median_us(d_off))
    print(f"emitter call, encryption off: {quantiles(off)}")
    print(f"emitter call, encryption on:  {quantiles(on)}")
    print(f"sealing, per event (median on - median off, per round): "
          f"{statistics.median(per_round):.1f} µs  (rounds: {', '.join(f'{x:.1f}' for x in per_round)})")

    messages = fold_all([decode_event(v) for v in sealed])
    reader = KeyRing(ring.store, master)
    reader.store = type("Replay", (), {"read_new": lambda self: list(ring.store.live().items())})()  # type: ignore[attr-defined]
    reader.refresh()
    began = time.perf_counter_ns()
    for m in messages:
        reader.open_triples(m)
    opened_us = (time.perf_counter_ns() - began) / 1000 / len(messages)
    print(f"opening, per folded step (reader side, keys in memory): {opened_us:.1f} µs  (n={len(messages)})")

    if args.kafka:
        _kafka_round_trip(sessions=min(sessions, 500))


def _kafka_round_trip(sessions: int) -> None:
    from kafka.admin import KafkaAdminClient

    from provstream.keys import KafkaKeyStore, keys_topic_spec

    settings = replace(Settings.from_env(), keys_topic=f"bench.keys.{uuid.uuid4().hex[:10]}")
    admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap, client_id="provstream-bench")
    admin.create_topics([keys_topic_spec(settings)])
    try:
        store = KafkaKeyStore(settings, "emitter")
        ring = KeyRing(store, AESGCM(AESGCM.generate_key(bit_length=256)))
        ring.key_for("warm", "up", "s")
        durations = []
        for i in range(sessions):
            began = time.perf_counter_ns()
            ring.key_for("bench", "c", f"s{i}")
            durations.append(time.perf_counter_ns() - began)
        store.close()
        print(f"data key per session, written to Kafka (acks=all) before the first event: {quantiles(durations)}")
    finally:
        admin.delete_topics([settings.keys_topic])
        admin.close()


if __name__ == "__main__":
    main()
