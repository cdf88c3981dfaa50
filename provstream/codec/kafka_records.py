"""kafka-python's consumer path, faster: every kafka-python consumer of provstream reads with it.

kafka-python 3.0 parses each record of a fetched batch (message format v2) in
Python, a varint at a time, makes a ``DefaultRecord`` of it and then a
``ConsumerRecord`` of that, and reads its sockets 4 KiB at a time, ending each
read with an exception. Three replacements, each chosen once at import of this
module (:mod:`provstream.security` imports it, so every kafka-python client the
project opens uses them); figures in BENCHMARKS.md ("Throughput, thirteenth
pass"):

- ``DefaultRecordBatch._read_msg``: ``_kafka_c.read_record`` (an optional
  extension built from ``_kafka_c.c``) reads one record of a data batch the
  same way; control batches (transaction markers) keep kafka-python's reader.
- ``Fetcher.PartitionRecords._unpack_records``: :func:`_unpack_records_c` is
  kafka-python's loop with each data batch read whole by
  ``_kafka_c.read_records``, straight into the ``ConsumerRecord`` tuples the
  fetcher would make (consumers with deserializers keep kafka-python's loop).
- ``KafkaTCPTransport._sock_recv``: :func:`_sock_recv` reads 64 KiB at a
  time and stops at a short read instead of at ``BlockingIOError`` (TLS
  connections keep kafka-python's).
- ``NetworkSelector.register_event``: :func:`_register_event` registers a
  socket the selector does not hold yet without first asking for its key:
  the standard library answers that question with a ``KeyError`` whose
  message holds the socket's ``repr`` (two system calls, twice), and
  kafka-python asks it on every wait for a response.

The C readers are not used when the extension was not built, with
``PROVSTREAM_NO_C_EXTENSIONS=1``, or when kafka-python is not the 3.0 release
they were written against; the receive and the registration are kept for any
kafka-python 3.0.

Example::

    >>> from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    >>> b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    >>> _ = b.append(0, timestamp=1000, key=b"k", value=b"v", headers=[("h", b"1")])
    >>> [(r.offset, r.key, r.value, r.headers) for r in DefaultRecordBatch(bytes(b.build()))]
    [(0, b'k', b'v', [('h', b'1')])]
"""

from __future__ import annotations

import selectors
from collections.abc import Callable
from typing import Any

import kafka
from kafka import errors as _errors
from kafka.consumer import fetcher as _fetcher
from kafka.net import selector as _selector
from kafka.net import transport as _transport
from kafka.record import default_records as _records

from provstream.native import c_extensions_off

_Batch = _records.DefaultRecordBatch
_read_msg_py: Callable[[Any], Any] = _Batch._read_msg
_PartitionRecords = _fetcher.Fetcher.PartitionRecords
_unpack_records_py: Callable[..., Any] = _PartitionRecords._unpack_records
_sock_recv_py: Callable[[Any], Any] = _transport.KafkaTCPTransport._sock_recv
_register_event_py: Callable[..., None] = _selector.NetworkSelector.register_event
_KAFKA_30 = kafka.__version__.startswith("3.0.")


def _load() -> tuple[Callable[..., tuple[Any, int]], Callable[..., tuple[list[Any], list[int], int, Any]]] | None:
    if c_extensions_off() or not _KAFKA_30:
        return None
    try:
        from provstream.codec._kafka_c import read_record, read_records
    except ImportError:
        return None
    # What the readers rely on, as kafka-python 3.0 defines it.
    expected = ("_buffer", "_header_data", "_pos", "_num_records", "_next_record_index")
    if not all(name in _Batch.__slots__ for name in expected) or _Batch.LOG_APPEND_TIME != 1:
        return None
    if _fetcher.ConsumerRecord._fields != _CONSUMER_RECORD_FIELDS:
        return None
    return read_record, read_records


_CONSUMER_RECORD_FIELDS = ("topic", "partition", "leader_epoch", "offset", "timestamp", "timestamp_type", "key",
                           "value", "headers", "checksum", "serialized_key_size", "serialized_value_size",
                           "serialized_header_size")
_readers = _load()
_read_record, _read_records = _readers if _readers is not None else (None, None)
_CONTROL, _LOG_APPEND = _Batch.CONTROL_MASK, _Batch.TIMESTAMP_TYPE_MASK


def _read_msg_c(self: Any) -> Any:
    header = self._header_data  # base offset 0, attributes 5, first timestamp 7, max timestamp 8
    attributes = header[5]
    if attributes & _CONTROL:
        return _read_msg_py(self)
    log_append = bool(attributes & _LOG_APPEND)
    assert _read_record is not None
    record, self._pos = _read_record(self._buffer, self._pos, header[0], header[8] if log_append else header[7],
                                     log_append, _records.DefaultRecord)
    return record


def _batch_records(self: Any, tp: Any, batch: Any) -> Any:
    """The records of one data batch, as kafka-python's fetcher yields them without deserializers."""
    batch._maybe_uncompress()
    header = batch._header_data
    log_append = bool(header[5] & _LOG_APPEND)
    start = batch._next_record_index
    assert _read_records is not None
    records, sizes, batch._pos, error = _read_records(
        batch._buffer, batch._pos, batch._num_records - start, header[0], header[8] if log_append else header[7],
        log_append, tp.topic, tp.partition, self.leader_epoch, _fetcher.ConsumerRecord)
    batch._next_record_index = start + len(records)
    for record, size in zip(records, sizes, strict=True):
        self.records_read += 1
        self.bytes_read += size
        self.next_fetch_offset = record[3] + 1
        yield record
    if error is not None:
        raise _errors.CorruptRecordError(f"Found invalid record structure: {error!r}")
    if batch._pos != len(batch._buffer):
        raise _errors.CorruptRecordError(f"{len(batch._buffer) - batch._pos} unconsumed bytes after all records "
                                         "consumed")


def _unpack_records_c(self: Any, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any) -> Any:
    """kafka-python 3.0's ``Fetcher.PartitionRecords._unpack_records`` with each data batch read by
    :func:`_batch_records`; consumers with deserializers keep kafka-python's own."""
    if key_deserializer is not None or value_deserializer is not None:
        yield from _unpack_records_py(self, tp, records, key_deserializer, value_deserializer)
        return
    try:
        batch = records.next_batch()
        last_batch = None
        while batch is not None:
            last_batch = batch
            if self.check_crcs and not batch.validate_crc():
                raise _errors.CorruptRecordError(
                    f"Record batch for partition {self.topic_partition} at offset {batch.base_offset} failed "
                    "crc check")
            if batch.magic == 2:
                self.leader_epoch = batch.leader_epoch
                if self.isolation_level == _fetcher.IsolationLevel.READ_COMMITTED and batch.has_producer_id():
                    self._consume_aborted_transactions_up_to(batch.last_offset)
                    producer_id = batch.producer_id
                    if self._contains_abort_marker(batch):
                        self.aborted_producer_ids.discard(producer_id)
                    elif self._is_batch_aborted(batch):
                        self.next_fetch_offset = batch.next_offset
                        batch = records.next_batch()
                        continue
                if batch.is_control_batch:
                    self.next_fetch_offset = batch.next_offset
                    batch = records.next_batch()
                    continue
                yield from _batch_records(self, tp, batch)
            else:
                # Message formats v0/v1 (brokers before 0.11): kafka-python's own loop, one batch of them.
                for record in batch:
                    if self.check_crcs and not record.validate_crc():
                        raise _errors.CorruptRecordError(
                            f"Record for partition {self.topic_partition} at offset {record.offset} failed crc check")
                    self.records_read += 1
                    self.bytes_read += record.size_in_bytes
                    self.next_fetch_offset = record.offset + 1
                    key, value, headers = record.key, record.value, record.headers
                    yield _fetcher.ConsumerRecord(
                        tp.topic, tp.partition, self.leader_epoch, record.offset, record.timestamp,
                        record.timestamp_type, key, value, headers, record.checksum,
                        len(key) if key is not None else -1, len(value) if value is not None else -1,
                        sum(len(k.encode("utf-8")) + (len(v) if v is not None else 0) for k, v in headers)
                        if headers else -1)
            batch = records.next_batch()
        else:
            # Format v2 keeps a batch's last offset even when compaction removed its last record: fetch on
            # from the batch's end, not from the last record's.
            if last_batch and last_batch.magic == 2:
                self.next_fetch_offset = last_batch.next_offset
            self.drain()
    except StopIteration:
        raise RuntimeError("StopIteration raised unpacking messageset") from None


_RECV_BYTES = 64 * 1024


def _sock_recv(self: Any) -> tuple[bytes, Exception | None]:
    """kafka-python 3.0's ``KafkaTCPTransport._sock_recv``, 64 KiB a read; a short read ends it (the selector
    is level-triggered: bytes that arrive after it wake the reader again)."""
    chunks: list[bytes] = []
    err: Exception | None = None
    while True:
        try:
            data = self._sock.recv(_RECV_BYTES)
        except (BlockingIOError, InterruptedError):
            break
        except BaseException as e:  # noqa: BLE001 - as kafka-python: the connection closes with it
            _transport.log.exception("%s: Error receiving network data closing socket", self)
            err = _errors.KafkaConnectionError(e)
            break
        if not data:
            _transport.log.error("%s: socket disconnected", self)
            err = _errors.KafkaConnectionError("socket disconnected")
            break
        chunks.append(data)
        if len(data) < _RECV_BYTES:
            break
    return (chunks[0] if len(chunks) == 1 else b"".join(chunks)), err


def _register_event(self: Any, fileobj: Any, event: int, task: Any) -> None:
    """kafka-python 3.0's ``NetworkSelector.register_event``; a socket the selector does not hold yet is
    registered without the ``KeyError`` (and the socket's ``repr``) of ``get_key``. A socket it holds, a
    closed selector and a selector without the standard library's key map take kafka-python's own path."""
    selector = self._selector
    keys = getattr(selector, "_fd_to_key", None)
    if keys is None or selector.get_map() is None or selector._fileobj_lookup(fileobj) in keys:
        _register_event_py(self, fileobj, event, task)
        return
    _selector.log_trace("net.register_event: %s, %s, %s", fileobj, event, task)
    if not isinstance(task, _selector.Task):
        task = _selector.Task(task)
    selector.register(fileobj, event, (task, None) if event == selectors.EVENT_READ else (None, task))


def install() -> bool:
    """Read kafka-python's records in C from now on, and its sockets with :func:`_sock_recv` and
    :func:`_register_event` (idempotent).

    :returns: whether the C readers are in place (``False``: kafka-python's own record reader stays).
    """
    if _KAFKA_30:
        _transport.KafkaTCPTransport._sock_recv = _sock_recv
        _selector.NetworkSelector.register_event = _register_event
    if _read_record is None:
        return False
    _Batch._read_msg = _read_msg_c
    _PartitionRecords._unpack_records = _unpack_records_c
    return True


def uninstall() -> None:
    """kafka-python's own readers again (tests compare the two)."""
    _Batch._read_msg = _read_msg_py
    _PartitionRecords._unpack_records = _unpack_records_py
    _transport.KafkaTCPTransport._sock_recv = _sock_recv_py
    _selector.NetworkSelector.register_event = _register_event_py


INSTALLED = install()
