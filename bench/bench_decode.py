"""The sink's per-message decode cost: the Python and C StepTriples readers, a script, not a test.

Folds ``--sessions`` agent sessions of the bundled ReAct trajectories (the sink
benchmark's data: ``bench_sink.make_data``), encodes their triples messages
once and times, per message, in interleaved rounds so every reader sees the
same machine load:

* ``python``: :func:`provstream.codec.triples_reader.read_step_triples`;
* ``C``: ``provstream.codec._triples_c.read_step_triples``, filling each
  value's slots (what ``decode_triples`` uses);
* ``C, calls``: the same reader making each value by calling its dataclass;
* ``decode_triples``: the public function the sink calls (header check + the
  chosen reader);
* ``fastavro``: fastavro's path (``--no-fastavro`` leaves it out).

Before timing, every message is checked to decode to the same value through
each reader. Prints the median and the fastest round in µs per message.
Usage: ``.venv/bin/python bench/bench_decode.py [--sessions 1000] [--rounds 15] [--no-fastavro]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType

from bench_sink import make_data

from provstream.codec import avro as codec
from provstream.codec import records as wire
from provstream.codec import triples_reader
from provstream.core.triples import StepTriples
from provstream.settings import Settings

Reader = Callable[[bytes], StepTriples]

c_module: ModuleType | None
try:
    from provstream.codec import _triples_c as c_module
except ImportError:
    c_module = None


def readers(with_fastavro: bool) -> dict[str, tuple[Reader, bool | None]]:
    """Name -> (reader, the C reader's construction mode to set first, or None)."""
    out: dict[str, tuple[Reader, bool | None]] = {
        "python": (lambda data: triples_reader.read_step_triples(data, codec.HEADER_LEN), None)}
    if c_module is None:
        print("# provstream.codec._triples_c is not built: the C reader is not timed")
    else:
        read = c_module.read_step_triples

        def c(data: bytes) -> StepTriples:
            return read(data, codec.HEADER_LEN)

        out["C"] = (c, True)
        out["C, calls"] = (c, False)
    out["decode_triples"] = (wire.decode_triples, True if c_module is not None else None)
    if with_fastavro:
        out["fastavro"] = (wire._decode_triples_fastavro, None)
    return out


def per_message_us(read: Reader, messages: list[bytes]) -> float:
    began = time.perf_counter_ns()
    for data in messages:
        read(data)
    return (time.perf_counter_ns() - began) / 1000 / len(messages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000, help="agent sessions folded into messages")
    parser.add_argument("--rounds", type=int, default=15, help="timed passes over the messages per reader")
    parser.add_argument("--no-fastavro", action="store_true", help="leave fastavro's (slow) path out")
    args = parser.parse_args()
    _, steps = make_data(Settings(), args.sessions)
    messages = [wire.encode_triples(step) for step in steps]
    triples = sum(len(step.triples) for step in steps)
    load = os.getloadavg()
    print(f"# bench_decode {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  {platform.python_implementation()} "
          f"{platform.python_version()}  {os.cpu_count()} CPUs  load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"# {len(messages)} messages from {args.sessions} sessions: {sum(map(len, messages)) / len(messages):.0f} "
          f"bytes and {triples / len(messages):.2f} triples per message on average; {args.rounds} rounds")
    timed = readers(not args.no_fastavro)
    for name, (read, direct) in timed.items():
        if c_module is not None and direct is not None:
            c_module.direct_construction(direct)
        assert all(read(data) == step for data, step in zip(messages, steps, strict=True)), name
    rounds: dict[str, list[float]] = {name: [] for name in timed}
    for _ in range(args.rounds):
        for name, (read, direct) in timed.items():
            if c_module is not None and direct is not None:
                c_module.direct_construction(direct)
            rounds[name].append(per_message_us(read, messages))
    if c_module is not None:
        c_module.direct_construction(True)
    python = statistics.median(rounds["python"])
    for name, figures in rounds.items():
        median = statistics.median(figures)
        print(f"{name:>15}: median {median:7.2f} µs/message  fastest round {min(figures):7.2f}  "
              f"python / this {python / median:5.1f}x")
    load = os.getloadavg()
    print(f"# load at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
