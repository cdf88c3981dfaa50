"""kafka-python's record reader in C (``provstream.codec.kafka_records``) against kafka-python's own."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from typing import Any

import pytest
from kafka.errors import CorruptRecordError
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

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
