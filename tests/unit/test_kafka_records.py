"""kafka-python's record reader in C (``provstream.codec.kafka_records``) against kafka-python's own."""

from __future__ import annotations

import os
import selectors
import socket
import struct
import subprocess
import sys
import types
from typing import Any

import pytest
from kafka.consumer.fetcher import ConsumerRecord, Fetcher
from kafka.errors import CorruptRecordError, KafkaConnectionError
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.structs import TopicPartition

from provstream.codec import kafka_records

NO_C = os.environ.get("PROVSTREAM_NO_C_EXTENSIONS", "") not in ("", "0")
needs_c = pytest.mark.skipif(not kafka_records.INSTALLED, reason="the C record reader is not built or switched off")

# DefaultRecordBatch header: baseOffset int64, length int32, leaderEpoch int32, magic int8, crc uint32, attributes int16
_ATTRIBUTES_AT = 8 + 4 + 4 + 1 + 4
_RECORDS_AT = DefaultRecordBatch.HEADER_STRUCT.size


def build(records: list[tuple[int, int | None, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
          compression: int = 0) -> bytes:
    """One v2 batch of (offset, timestamp, key, value, headers)."""
    b = DefaultRecordBatchBuilder(2, compression, False, -1, -1, -1, 1 << 24)
    for offset, timestamp, key, value, headers in records:
        b.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(b.build())


def fields(buffer: bytes, one_batch: bool = False) -> list[tuple[Any, ...]]:
    """Every record of every batch in ``buffer`` (``one_batch``: of the one batch it starts, however cut), as
    plain values."""
    out: list[tuple[Any, ...]] = []
    records = MemoryRecords(buffer)
    batch = DefaultRecordBatch(buffer) if one_batch else records.next_batch()
    while batch is not None:
        out += [(type(r).__name__, r.offset, r.timestamp, r.timestamp_type, r.key, r.value, r.headers,
                 r.size_in_bytes) for r in batch]
        batch = None if one_batch else records.next_batch()
    return out


def both(buffer: bytes, one_batch: bool = False) -> tuple[Any, Any]:
    """What the C reader and kafka-python's own make of ``buffer`` (each a list of records, or the error type)."""
    def read() -> Any:
        try:
            return fields(buffer, one_batch)
        except CorruptRecordError as exc:
            return CorruptRecordError, type(exc).__name__
    c = read()
    kafka_records.uninstall()
    try:
        py = read()
    finally:
        kafka_records.install()
    return c, py


SAMPLE = [
    (0, 1_700_000_000_000, b"session-1", b"\x00" * 900, [("provstream.source.topic", b"provstream.events"),
                                                        ("provstream.source.offset", b"41")]),
    (1, 1_700_000_000_005, None, b"value without a key", []),
    (2, 1_699_999_999_000, b"a tombstone", None, [("h", None), ("ключ", b"\xff\xfe")]),
    (7, 1_700_000_100_000, b"", b"", [("", b"")]),
    (9, 1_700_000_000_001, b"k" * 300, b"v" * 70_000, [("x" * 200, b"y" * 200)] * 20),
]


def test_the_c_reader_is_built_and_chosen() -> None:
    if NO_C:
        assert not kafka_records.INSTALLED
    else:
        assert kafka_records.INSTALLED
        assert DefaultRecordBatch._read_msg is kafka_records._read_msg_c


def test_provstream_no_c_extensions_keeps_kafka_pythons_reader() -> None:
    check = ("from kafka.record.default_records import DefaultRecordBatch as B; "
             "from provstream.codec import kafka_records as k; "
             "assert not k.INSTALLED and B._read_msg is k._read_msg_py")
    subprocess.run([sys.executable, "-c", check], check=True, env={**os.environ, "PROVSTREAM_NO_C_EXTENSIONS": "1"})


@needs_c
def test_same_records_as_kafka_python_for_keys_values_headers_and_offsets() -> None:
    buffer = build(SAMPLE) + build([(0, 5, b"k", b"v", [])]) + build([(i, 10 + i, b"%d" % i, b"v", [])
                                                                       for i in range(500)])
    c, py = both(buffer)
    assert c == py
    assert len(c) == len(SAMPLE) + 1 + 500
    late = bytearray(build(SAMPLE))
    struct.pack_into(">q", late, 0, 2**40)  # a batch far into its partition (the broker sets the base offset)
    c, py = both(bytes(late))
    assert c == py and [r[1] for r in c] == [2**40 + offset for offset, *_ in SAMPLE]
    assert c[2][4:7] == (b"a tombstone", None, [("h", None), ("ключ", b"\xff\xfe")])


@needs_c
def test_same_records_in_a_compressed_batch() -> None:
    c, py = both(build(SAMPLE, compression=DefaultRecordBatch.CODEC_GZIP))
    assert c == py and len(c) == len(SAMPLE)


@needs_c
def test_log_append_time_takes_the_batch_max_timestamp() -> None:
    buffer = bytearray(build(SAMPLE[:3]))
    (attributes,) = struct.unpack_from(">h", buffer, _ATTRIBUTES_AT)
    struct.pack_into(">h", buffer, _ATTRIBUTES_AT, attributes | DefaultRecordBatch.TIMESTAMP_TYPE_MASK)
    c, py = both(bytes(buffer))
    assert c == py
    assert {r[2] for r in c} == {max(t for _, t, *_ in SAMPLE[:3])} and {r[3] for r in c} == {1}


@needs_c
def test_control_batches_keep_kafka_pythons_reader() -> None:
    buffer = bytearray(build([(0, 5, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [])]))
    (attributes,) = struct.unpack_from(">h", buffer, _ATTRIBUTES_AT)
    struct.pack_into(">h", buffer, _ATTRIBUTES_AT, attributes | DefaultRecordBatch.CONTROL_MASK)
    c, py = both(bytes(buffer))
    assert c == py and c[0][0] == "ControlRecord"


def corrupt_variants() -> list[bytes]:
    good = build(SAMPLE[:2])
    first = _RECORDS_AT  # the first record's length varint
    out = [good[:-1], good[:first + 3], good[:first + 40]]  # truncated at its end, in a varint, in a value
    longer = bytearray(good)
    longer[first] += 2  # the record claims two bytes more than it holds
    out.append(bytes(longer))
    bad_key = build([(0, 5, b"k", b"v", [("h\u00e9", b"1")])])
    at = bad_key.index("h\u00e9".encode())
    out.append(bad_key[:at + 1] + b"\xff" + bad_key[at + 2:])  # a header key that is not UTF-8
    negative = build([(0, 5, b"k", b"v", [])])
    out.append(negative[:-1] + b"\x01")  # header count -1 (zig-zag 1)
    out.append(negative[:-1] + b"\xff" * 11)  # a varint past 64 bits
    return out


@needs_c
@pytest.mark.parametrize("buffer", corrupt_variants())
def test_corrupt_records_raise_corrupt_record_error_as_kafka_pythons_reader_does(buffer: bytes) -> None:
    c, py = both(buffer, one_batch=True)
    assert c == py == (CorruptRecordError, "CorruptRecordError")


@needs_c
def test_records_read_through_the_reader_are_kafka_pythons_record_class() -> None:
    record = next(iter(DefaultRecordBatch(build(SAMPLE[:1]))))
    assert type(record).__name__ == "DefaultRecord" and record.checksum is None


# -- the fetcher's loop: Fetcher.PartitionRecords._unpack_records --------------------------------------------------

TP = TopicPartition("provstream.triples", 3)


def partition_records(buffer: bytes, fetch_offset: int = 0, **options: Any) -> Any:
    return Fetcher.PartitionRecords(fetch_offset, TP, MemoryRecords(buffer), **options)


def drain(buffer: bytes, fetch_offset: int = 0, take: int | None = None, **options: Any) -> tuple[Any, ...]:
    """What a fetcher's partition records yield for ``buffer``, ``take`` at a time, and their state after (an
    error as its type: the two readers word some differently, as ``both`` finds)."""
    parts = partition_records(buffer, fetch_offset, **options)
    taken: list[Any] = []
    error = None
    while parts.record_iterator is not None and error is None:
        try:
            got = parts.take(take)
        except CorruptRecordError as exc:
            error = type(exc).__name__
        else:
            taken.append(got)
            if not got:
                break
    return taken, error, parts.next_fetch_offset, parts.records_read, parts.bytes_read, parts.leader_epoch


def fetch_both(buffer: bytes, **options: Any) -> tuple[Any, Any]:
    c = drain(buffer, **options)
    kafka_records.uninstall()
    try:
        py = drain(buffer, **options)
    finally:
        kafka_records.install()
    return c, py


@needs_c
def test_the_fetchers_loop_is_replaced() -> None:
    assert Fetcher.PartitionRecords._unpack_records is kafka_records._unpack_records_c


@needs_c
@pytest.mark.parametrize("take", [None, 1, 7, 500])
def test_the_fetcher_yields_the_consumer_records_kafka_python_does(take: int | None) -> None:
    buffer = build(SAMPLE) + build([(0, 5, b"k", b"v", [])]) + build([(i, 10 + i, b"%d" % i, b"v", [("h", b"%d" % i)])
                                                                       for i in range(500)])
    c, py = fetch_both(buffer, take=take)
    assert c == py
    records = [r for got in c[0] for r in got]
    assert len(records) == len(SAMPLE) + 1 + 500 and all(type(r) is ConsumerRecord for r in records)
    assert records[0].serialized_header_size == len("provstream.source.topic") + len(b"provstream.events") + \
        len("provstream.source.offset") + 2
    assert records[1].serialized_header_size == -1 and records[1].serialized_key_size == -1
    assert records[2].serialized_value_size == -1 and records[2].checksum is None
    assert c[2] == 500 and c[3] == len(records) and c[4] > 70_000


@needs_c
def test_the_fetcher_skips_records_before_the_fetch_offset_in_a_batch() -> None:
    c, py = fetch_both(build([(i, 10 + i, None, b"v%d" % i, []) for i in range(10)]), fetch_offset=6)
    assert c == py and [r.offset for got in c[0] for r in got] == [6, 7, 8, 9]


@needs_c
def test_the_fetcher_on_compressed_log_append_and_control_batches() -> None:
    log_append = bytearray(build(SAMPLE[:3]))
    (attributes,) = struct.unpack_from(">h", log_append, _ATTRIBUTES_AT)
    struct.pack_into(">h", log_append, _ATTRIBUTES_AT, attributes | DefaultRecordBatch.TIMESTAMP_TYPE_MASK)
    control = bytearray(build([(3, 5, b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", [])]))
    struct.pack_into(">h", control, _ATTRIBUTES_AT, attributes | DefaultRecordBatch.CONTROL_MASK)
    later = bytearray(build([(0, 7, b"k", b"after the marker", [])]))
    struct.pack_into(">q", later, 0, 4)
    buffer = build(SAMPLE, compression=DefaultRecordBatch.CODEC_GZIP) + bytes(log_append) + bytes(control) + \
        bytes(later)
    c, py = fetch_both(buffer, check_crcs=False)  # the edited attributes no longer match the batches' CRCs
    assert c == py
    records = [r for got in c[0] for r in got]
    assert [r.value for r in records][-1] == b"after the marker" and len(records) == len(SAMPLE) + 3 + 1
    assert {r.timestamp_type for r in records[len(SAMPLE):-1]} == {1}


@needs_c
def test_the_fetcher_checks_batch_crcs() -> None:
    buffer = bytearray(build(SAMPLE[:2]))
    buffer[-1] ^= 0xFF
    c, py = fetch_both(bytes(buffer))
    assert c == py and c[1] == "CorruptRecordError"
    with pytest.raises(CorruptRecordError, match="failed crc check"):
        partition_records(bytes(buffer)).take()


@needs_c
def test_the_fetcher_on_a_legacy_batch() -> None:
    b = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    for i in range(5):
        b.append(i, timestamp=1000 + i, key=b"k%d" % i, value=b"v" * i)
    c, py = fetch_both(bytes(b.build()))
    assert c == py and [r.value for got in c[0] for r in got] == [b"v" * i for i in range(5)]


@needs_c
@pytest.mark.parametrize("buffer", corrupt_variants())
def test_the_fetcher_yields_the_records_before_a_corrupt_one_then_raises(buffer: bytes) -> None:
    good = build([(i, 10 + i, b"k", b"v%d" % i, []) for i in range(3)])
    c, py = fetch_both(good + buffer, check_crcs=False, take=2)
    assert c == py  # a batch cut short is no batch to MemoryRecords: no error, as in kafka-python
    assert [r.value for got in c[0] for r in got][:3] == [b"v0", b"v1", b"v2"]


@needs_c
@pytest.mark.parametrize("take", [None, 1])
def test_the_fetcher_yields_a_batchs_records_before_its_corrupt_one(take: int | None) -> None:
    batch = build([(i, 10 + i, b"k", b"v%d" % i, []) for i in range(3)])
    c, py = fetch_both(batch[:-1] + b"\x01", check_crcs=False, take=take)  # the third record: -1 headers
    assert c == py and c[1] == "CorruptRecordError"
    assert [r.value for got in c[0] for r in got] == [b"v0", b"v1"] and c[2] == 2


@needs_c
def test_consumers_with_deserializers_keep_kafka_pythons_loop() -> None:
    class Upper:
        def deserialize(self, topic: str, headers: Any, data: bytes | None) -> Any:
            return data.upper() if data is not None else None

    c, py = fetch_both(build(SAMPLE[:2]), key_deserializer=Upper(), value_deserializer=Upper())
    assert c == py and c[0][0][1].value == b"VALUE WITHOUT A KEY"


@needs_c
def test_read_records_rejects_a_class_that_is_not_a_namedtuple() -> None:
    from provstream.codec import _kafka_c  # type: ignore[attr-defined]

    with pytest.raises(TypeError, match="namedtuple"):
        _kafka_c.read_records(build(SAMPLE[:1]), _RECORDS_AT, 1, 0, 0, False, "t", 0, -1, dict)


@needs_c
def test_read_records_does_not_leak() -> None:
    from provstream.codec import _kafka_c  # type: ignore[attr-defined]

    buffer = build(SAMPLE[:3])
    bad = corrupt_variants()[4]

    def rounds(n: int) -> None:
        for _ in range(n):
            _kafka_c.read_records(buffer, _RECORDS_AT, 3, 0, 0, False, "t", 0, -1, ConsumerRecord)
            _kafka_c.read_records(bad, _RECORDS_AT, 1, 0, 0, False, "t", 0, -1, ConsumerRecord)

    rounds(3_000)
    sizes = []
    for _ in range(3):
        rounds(3_000)
        with open("/proc/self/statm") as statm:
            sizes.append(int(statm.read().split()[1]))
    assert sizes[2] - sizes[0] < 256  # pages: a leak of one record a round would be thousands


# -- the socket reads: KafkaTCPTransport._sock_recv -------------------------------------------------------------

def receive_all(recv: Any, sock: socket.socket, expected: int) -> bytes:
    """What ``recv`` reads from ``sock`` over as many calls as ``expected`` bytes take."""
    transport = types.SimpleNamespace(_sock=sock)
    got = b""
    while len(got) < expected:
        data, err = recv(transport)
        assert err is None
        got += data
    return got


@pytest.mark.parametrize("size", [1, 4096, 65_536, 150_000])
def test_the_socket_read_returns_what_kafka_pythons_does(size: int) -> None:
    payload = bytes(range(256)) * (size // 256 + 1)
    payload = payload[:size]
    for recv in (kafka_records._sock_recv, kafka_records._sock_recv_py):
        reader, writer = socket.socketpair()
        with reader, writer:
            reader.setblocking(False)
            writer.sendall(payload)
            assert receive_all(recv, reader, size) == payload
            assert recv(types.SimpleNamespace(_sock=reader)) == (b"", None)  # nothing left: no error
            writer.close()
            data, err = recv(types.SimpleNamespace(_sock=reader))
            assert data == b"" and isinstance(err, KafkaConnectionError)


# -- the selector: NetworkSelector.register_event ----------------------------------------------------------------

class _CountedSocket(socket.socket):
    """A socket that counts its ``repr`` calls (each is a getsockname and a getpeername)."""

    reprs = 0

    def __repr__(self) -> str:
        type(self).reprs += 1
        return super().__repr__()


def _state(net: Any) -> list[tuple[int, int, tuple[Any, Any]]]:
    return sorted((k.fd, k.events, tuple(type(t).__name__ if t is not None else None for t in k.data))
                  for k in net._selector.get_map().values())


def _register_both_ways(steps: list[tuple[str, int]]) -> tuple[Any, Any]:
    """The selector's keys (or the error) after ``steps`` of (socket name, event), with each implementation."""
    from kafka.net.selector import NetworkSelector

    out = []
    for register in (kafka_records._register_event, kafka_records._register_event_py):
        net = NetworkSelector()
        a, b = socket.socketpair()
        try:
            socks = {"a": a, "b": b}
            try:
                for name, event in steps:
                    register(net, socks[name], event, lambda: None)
                result: Any = [(fd - a.fileno(), ev, data) for fd, ev, data in _state(net)]
            except Exception as exc:  # noqa: BLE001 - the outcome compared
                result = (type(exc), str(exc).split(" for fileobj")[0])
            out.append(result)
        finally:
            net.close()
            a.close()
            b.close()
    return out[0], out[1]


@pytest.mark.parametrize("steps", [
    [("a", 1)],
    [("a", 2)],
    [("a", 1), ("a", 2)],
    [("a", 2), ("a", 1)],
    [("a", 1), ("b", 1), ("b", 2)],
    [("a", 1), ("a", 1)],
    [("a", 2), ("a", 2)],
])
def test_registering_a_wait_leaves_the_selector_as_kafka_pythons_does(steps: list[tuple[str, int]]) -> None:
    new, old = _register_both_ways(steps)
    assert new == old


def test_registering_an_unregistered_socket_does_not_format_it() -> None:
    from kafka.net.selector import NetworkSelector

    net = NetworkSelector()
    a = _CountedSocket()
    try:
        _CountedSocket.reprs = 0
        kafka_records._register_event(net, a, selectors.EVENT_READ, lambda: None)
        assert _CountedSocket.reprs == 0
        assert net._selector.get_key(a).events == selectors.EVENT_READ
        net.unregister_event(a, selectors.EVENT_READ)
        kafka_records._register_event_py(net, a, selectors.EVENT_READ, lambda: None)
        assert _CountedSocket.reprs == 2  # kafka-python's: the KeyError message, twice
    finally:
        net.close()
        a.close()


def test_registering_on_a_closed_selector_or_a_closed_socket_fails_as_kafka_pythons_does() -> None:
    from kafka.net.selector import NetworkSelector

    for register in (kafka_records._register_event, kafka_records._register_event_py):
        net = NetworkSelector()
        a, b = socket.socketpair()
        net._selector.close()
        with pytest.raises(RuntimeError, match="Selector is closed"):
            register(net, a, selectors.EVENT_READ, lambda: None)
        net = NetworkSelector()
        a.close()
        with pytest.raises(ValueError):
            register(net, a, selectors.EVENT_READ, lambda: None)
        net.close()
        b.close()


def test_the_registration_is_replaced_with_kafka_python_3_0() -> None:
    from kafka.net.selector import NetworkSelector

    assert NetworkSelector.register_event is kafka_records._register_event
