"""OTLP ingest benchmark: spans/s the receiver and the span -> event translation sustain (a script, not a test).

Workload: the 12 bundled ReAct trajectories recorded as GenAI-convention spans with the real OpenTelemetry SDK
(``tests/otlp_support.py``: ``invoke_agent`` > ``chat`` / ``execute_tool`` spans, full message content),
``--traces`` traces in all, exported as OTLP/HTTP protobuf requests of up to 512 spans (the SDK
BatchSpanProcessor's default batch), several traces per request.

* **receiver**: ``provstream otlp`` runs as a child process on free ports against the running Kafka, writing to a
  private topic (deleted at the end); this process posts the requests with ``--concurrency`` connections and
  counts spans whose request was answered 200, i.e. split by trace and acknowledged by Kafka (``acks=all``).
* **translation**: the worker's CPU work per message, in this process: decode each per-trace message
  (``span_records``) and fold it into the trace state (``spans.step``) until every session's events are made.
  Faust's per-message overhead and the changelog are not included.

The two run in different processes in a deployment, so the pipeline sustains the smaller figure; the last line
printed is ``otlp: N spans/s (receiver R, translation T)``.

With ``--encrypt`` (``PROVSTREAM_ENCRYPT=1``: the receiver seals the span texts, docs/security.md) it also prints:

* **sealing**: the receiver's CPU cost per span of :func:`provstream.codec.otlp_seal.seal_request` in this process
  (data keys in memory: one made and wrapped per trace, no Kafka), median of ``--rounds`` rounds;
* the receiver again with encryption on (a private keys topic; each new trace's key found or written there with
  ``acks=all``), and the translation of the sealed requests.

    PROVSTREAM_STACK_DIR=... .venv/bin/python bench/bench_otlp.py [--traces 10000] [--concurrency 4] [--encrypt]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import fields, replace
from pathlib import Path

import aiohttp
from kafka.admin import KafkaAdminClient
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # noqa: E402
from otlp_support import Clock, Collected, emit_run, run_of, sdk_tracer  # noqa: E402

from provstream.codec.otlp import parse_protobuf, span_records, split_by_trace  # noqa: E402
from provstream.codec.otlp_seal import seal_request  # noqa: E402
from provstream.core.trajectories import AgentTrajectory, load  # noqa: E402
from provstream.crypto import KeyRing, MemoryKeyStore  # noqa: E402
from provstream.data import REACT_TRAJECTORIES  # noqa: E402
from provstream.settings import Settings  # noqa: E402
from provstream.streams.spans import step  # noqa: E402
from provstream.topics import ensure_topics  # noqa: E402

BATCH = 512


def workload(traces: int) -> tuple[list[bytes], int]:
    """Requests of up to 512 spans (whole traces), and the span count."""
    runs = [run_of(r) for _, r in load(REACT_TRAJECTORIES) if isinstance(r, AgentTrajectory)]
    collected = Collected()
    with sdk_tracer(collected, Settings()) as tracer:
        for n in range(traces):  # every trace's texts differ (no parse is shared between traces)
            run = runs[n % len(runs)]
            emit_run(tracer, replace(run, question=f"{run.question} [{n}]"), Clock())
    requests, batch = [], []
    for span in collected.spans:
        batch.append(span)
        if len(batch) >= BATCH and span.parent is None:  # cut after a root: whole traces per request
            requests.append(encode_spans(batch).SerializeToString())
            batch = []
    if batch:
        requests.append(encode_spans(batch).SerializeToString())
    return requests, len(collected.spans)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def post_all(url: str, requests: list[bytes], concurrency: int) -> float:
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for r in requests:
        queue.put_nowait(r)

    async def worker(session: aiohttp.ClientSession) -> None:
        while not queue.empty():
            body = queue.get_nowait()
            async with session.post(url, data=body, headers={"Content-Type": "application/x-protobuf"}) as resp:
                if resp.status != 200:
                    raise SystemExit(f"receiver answered {resp.status}: {await resp.text()}")

    async with aiohttp.ClientSession() as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        return time.perf_counter() - t0


def bench_receiver(settings: Settings, requests: list[bytes], spans: int, concurrency: int) -> float:
    env = dict(os.environ)
    for f in fields(settings):
        if f.repr:
            env["PROVSTREAM_" + f.name.upper()] = str(getattr(settings, f.name))
    proc = subprocess.Popen([sys.executable, "-m", "provstream", "otlp"], env=env, stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "provstream otlp ready" not in line:
            raise SystemExit(f"receiver did not start: {line!r}")
        url = f"http://127.0.0.1:{settings.otlp_http_port}/v1/traces"
        asyncio.run(post_all(url, requests[: max(1, len(requests) // 10)], concurrency))  # warm-up
        elapsed = asyncio.run(post_all(url, requests, concurrency))
        return spans / elapsed
    finally:
        proc.terminate()
        proc.wait(30)


def bench_translation(requests: list[bytes], spans: int) -> tuple[float, float, int]:
    """(spans/s wall clock, spans per CPU second of this process, events made)."""
    messages = [value for r in requests for _, value in split_by_trace(parse_protobuf(r))]
    t0, c0 = time.perf_counter(), time.process_time()
    events = 0
    states: dict[str, object] = {}
    for value in messages:
        records = span_records(value)
        trace = records[0]["t"]
        result = step(states.get(trace), records, 0.0)  # type: ignore[arg-type]
        states[trace] = result.state
        events += len(result.events)
    return spans / (time.perf_counter() - t0), spans / (time.process_time() - c0), events


def sealed_requests(requests: list[bytes]) -> tuple[list[bytes], float]:
    """The requests as the receiver seals them, and the seconds ``seal_request`` took (keys in memory)."""
    ring = KeyRing(MemoryKeyStore(), AESGCM(AESGCM.generate_key(bit_length=256)))
    parsed = [parse_protobuf(r) for r in requests]
    t0 = time.perf_counter()
    for request in parsed:
        seal_request(request, lambda scope: ring.shared_sealer(*scope).seal, "trustgraph", "default")
    elapsed = time.perf_counter() - t0
    return [r.SerializeToString() for r in parsed], elapsed


def bench_sealing(requests: list[bytes], spans: int, rounds: int) -> tuple[float, list[bytes]]:
    """(median µs per span of sealing, the sealed requests)."""
    times: list[float] = []
    sealed: list[bytes] = []
    for _ in range(rounds):
        sealed, elapsed = sealed_requests(requests)
        times.append(elapsed / spans * 1e6)
    return sorted(times)[len(times) // 2], sealed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=10000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--encrypt", action="store_true", help="also measure sealing (PROVSTREAM_ENCRYPT=1)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the sealing measurement")
    args = parser.parse_args()
    base = Settings.from_env()
    topic = f"bench.otlp.{uuid.uuid4().hex[:8]}"
    settings = replace(base, otlp_spans_topic=topic, otlp_spans_dlq_topic=topic + ".dlq",
                       otlp_grpc_port=_free_port(), otlp_http_port=_free_port(),
                       events_topic=f"{topic}.events", triples_topic=f"{topic}.triples",
                       events_dlq_topic=f"{topic}.events.dlq", triples_dlq_topic=f"{topic}.triples.dlq",
                       keys_topic=f"{topic}.keys", encrypt=0)
    requests, spans = workload(args.traces)
    print(f"workload: {args.traces} traces, {spans} spans, {len(requests)} requests "
          f"({sum(map(len, requests)) / spans:.0f} bytes/span)")
    ensure_topics(settings)
    try:
        receiver = bench_receiver(settings, requests, spans, args.concurrency)
        print(f"receiver: {receiver:,.0f} spans/s (HTTP protobuf, {args.concurrency} connections, acks=all)")
        translation, per_cpu, events = bench_translation(requests, spans)
        print(f"translation: {translation:,.0f} spans/s wall clock, {per_cpu:,.0f} spans per CPU second "
              f"({events} events; the wall figure drops when other processes share the cores)")
        print(f"otlp: {min(receiver, translation):,.0f} spans/s (receiver {receiver:,.0f}, "
              f"translation {translation:,.0f})")
        if args.encrypt:
            bench_encrypted(settings, requests, spans, args)
    finally:
        admin = KafkaAdminClient(bootstrap_servers=settings.kafka_bootstrap)
        try:
            doomed = [t for t in admin.list_topics() if t.startswith(topic)]
            admin.delete_topics(doomed)
        finally:
            admin.close()


def bench_encrypted(settings: Settings, requests: list[bytes], spans: int, args: argparse.Namespace) -> None:
    per_span, sealed = bench_sealing(requests, spans, args.rounds)
    grown = sum(map(len, sealed)) / sum(map(len, requests))
    print(f"sealing: {per_span:.1f} µs per span on the receiver's CPU (median of {args.rounds} rounds; "
          f"{spans / args.traces:.1f} spans and one data key per trace, keys in memory); requests {grown:.2f}x "
          f"the clear size")
    on = replace(settings, encrypt=1)
    ensure_topics(on)
    receiver = bench_receiver(on, requests, spans, args.concurrency)
    print(f"receiver, encryption on: {receiver:,.0f} spans/s (HTTP protobuf, {args.concurrency} connections, "
          f"acks=all; every new trace's data key looked up and written to {on.keys_topic})")
    translation, per_cpu, events = bench_translation(sealed, spans)
    print(f"translation of sealed spans: {translation:,.0f} spans/s wall clock, {per_cpu:,.0f} spans per CPU "
          f"second ({events} events)")
    print(f"otlp, encryption on: {min(receiver, translation):,.0f} spans/s (receiver {receiver:,.0f}, "
          f"translation {translation:,.0f})")


if __name__ == "__main__":
    main()
