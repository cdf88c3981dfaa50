"""Per-message decode costs of the worker and the sink: the Python and C readers, a script, not a test.

**Events** (what the fold worker decodes): ``--event-sessions`` sessions of the
end-to-end workload (``e2e_workload.plan``: agent, DocRAG and GraphRAG, eight in
ten agent sessions) emitted through an :class:`Emitter` into memory, the
emitted messages timed per event:

* ``fastavro``: fastavro + ``event_from_avro``, what ``decode_event`` did before
  the C reader (and still does for other schema forms, or without it);
* ``C``: ``provstream.codec._events_c.read_event``, filling each value's slots;
* ``C, calls``: the same reader making each value by calling its dataclass;
* ``decode_event``: the public function the worker calls (header check + the C reader).

**Triples messages** (what the sink decodes): ``--sessions`` agent sessions of
the bundled ReAct trajectories (the sink benchmark's data:
``bench_sink.make_data``), their triples messages timed per message:

* ``python``: :func:`provstream.codec.triples_reader.read_step_triples`;
* ``C``: ``provstream.codec._triples_c.read_step_triples``, filling each
  value's slots (what ``decode_triples`` uses);
* ``C, calls``: the same reader making each value by calling its dataclass;
* ``decode_triples``: the public function the sink calls (header check + the
  chosen reader);
* ``fastavro``: fastavro's path (``--no-fastavro`` leaves it out).

Messages are encoded once; before timing, every message is checked to decode
to the same value through each reader; then each reader goes over every
message in interleaved rounds, so every reader sees the same machine load.
Prints the median and the fastest round in µs per message.
Usage: ``.venv/bin/python bench/bench_decode.py [--only events|triples] [--event-sessions 600]
[--sessions 1000] [--rounds 15] [--no-fastavro]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from bench_sink import make_data
from e2e_workload import emit_steps, plan

from provstream.codec import avro as codec
from provstream.codec import records as wire
from provstream.codec import triples_reader
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.settings import Settings

Reader = Callable[[bytes], Any]
# Name -> (reader, the C module whose construction mode to set first, and that mode; or None).
Readers = dict[str, tuple[Reader, tuple[ModuleType, bool] | None]]

triples_c: ModuleType | None
events_c: ModuleType | None
try:
    from provstream.codec import _triples_c as triples_c
except ImportError:
    triples_c = None
try:
    from provstream.codec import _events_c as events_c
except ImportError:
    events_c = None


def c_readers(module: Any, name: str, function: str) -> Readers:
    """A C reader both ways (filling slots, calling the classes), or none if ``module`` was not built."""
    if module is None:
        print(f"# provstream.codec.{name} is not built: the C reader is not timed")
        return {}
    read = getattr(module, function)

    def c(data: bytes) -> Any:
        return read(data, codec.HEADER_LEN)

    return {"C": (c, (module, True)), "C, calls": (c, (module, False))}


def triples_readers(with_fastavro: bool) -> Readers:
    out: Readers = {"python": (lambda data: triples_reader.read_step_triples(data, codec.HEADER_LEN), None)}
    out.update(c_readers(triples_c, "_triples_c", "read_step_triples"))
    out["decode_triples"] = (wire.decode_triples, None if triples_c is None else (triples_c, True))
    if with_fastavro:
        out["fastavro"] = (wire._decode_triples_fastavro, None)
    return out


def event_readers() -> Readers:
    out: Readers = {"fastavro": (wire._decode_event_fastavro, None)}
    out.update(c_readers(events_c, "_events_c", "read_event"))
    out["decode_event"] = (wire.decode_event, None if events_c is None else (events_c, True))
    return out


def emitted_events(sessions: int) -> list[bytes]:
    """The messages an emitter sends for ``sessions`` sessions of the end-to-end workload."""
    transport = MemoryTransport()
    emitter = Emitter(Settings(), transport=transport)
    for planned in plan("bench", sessions):
        for _ in emit_steps(emitter, planned, "u", "c"):
            pass
    emitter.flush()
    return [value for _, value in transport.sent]


def per_message_us(read: Reader, messages: Sequence[bytes]) -> float:
    began = time.perf_counter_ns()
    for data in messages:
        read(data)
    return (time.perf_counter_ns() - began) / 1000 / len(messages)


def set_mode(mode: tuple[ModuleType, bool] | None) -> None:
    if mode is not None:
        mode[0].direct_construction(mode[1])


def run(timed: Readers, messages: Sequence[bytes], expected: Sequence[Any], rounds: int, baseline: str) -> None:
    for name, (read, mode) in timed.items():
        set_mode(mode)
        assert all(read(data) == value for data, value in zip(messages, expected, strict=True)), name
    figures: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(rounds):
        for name, (read, mode) in timed.items():
            set_mode(mode)
            figures[name].append(per_message_us(read, messages))
    for module in (triples_c, events_c):
        if module is not None:
            module.direct_construction(True)
    base = statistics.median(figures[baseline])
    for name, times in figures.items():
        median = statistics.median(times)
        print(f"{name:>15}: median {median:7.2f} µs/message  fastest round {min(times):7.2f}  "
              f"{baseline} / this {base / median:5.1f}x")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["events", "triples"], help="time one kind of message only")
    parser.add_argument("--event-sessions", type=int, default=600, help="workload sessions emitted as events")
    parser.add_argument("--sessions", type=int, default=1000, help="agent sessions folded into triples messages")
    parser.add_argument("--rounds", type=int, default=15, help="timed passes over the messages per reader")
    parser.add_argument("--no-fastavro", action="store_true", help="leave fastavro's (slow) triples path out")
    args = parser.parse_args()
    print(f"# bench_decode {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {platform.python_implementation()} "
          f"{platform.python_version()}  {os.cpu_count()} CPUs  load {load()}")
    if args.only != "triples":
        messages = emitted_events(args.event_sessions)
        events = [wire._decode_event_fastavro(data) for data in messages]
        kinds = sorted({type(e.payload).__name__ for e in events})
        print(f"## events: {len(messages)} from {args.event_sessions} sessions, "
              f"{sum(map(len, messages)) / len(messages):.0f} bytes per event on average, "
              f"{len(kinds)} payload types; {args.rounds} rounds")
        run(event_readers(), messages, events, args.rounds, "fastavro")
    if args.only != "events":
        _, steps = make_data(Settings(), args.sessions)
        triples_messages = [wire.encode_triples(step) for step in steps]
        triples = sum(len(step.triples) for step in steps)
        print(f"## triples messages: {len(triples_messages)} from {args.sessions} sessions: "
              f"{sum(map(len, triples_messages)) / len(triples_messages):.0f} bytes and "
              f"{triples / len(triples_messages):.2f} triples per message on average; {args.rounds} rounds")
        run(triples_readers(not args.no_fastavro), triples_messages, steps, args.rounds, "python")
    print(f"# load at the end {load()}")


if __name__ == "__main__":
    main()
