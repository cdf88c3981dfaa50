"""kafka-python's record reader, in C: every kafka-python consumer of provstream reads records with it.

kafka-python parses each record of a fetched batch (message format v2) in
Python, a varint at a time: about 4 µs per record, a third of what the sink's
consumer spends on a record (BENCHMARKS.md, "Throughput, twelfth pass").
``_kafka_c.read_record`` (an optional extension built from ``_kafka_c.c``)
reads one record the same way, and :func:`install` puts it in place of
``DefaultRecordBatch._read_msg`` for data batches; control batches
(transaction markers) keep kafka-python's own reader. It is chosen once, at
import of this module (:mod:`provstream.security` imports it, so every
kafka-python client the project opens uses it), and not used when the
extension was not built, with ``PROVSTREAM_NO_C_EXTENSIONS=1``, or when
kafka-python's batch class is not the one it was written for.

Example::

    >>> from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    >>> b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 20)
    >>> _ = b.append(0, timestamp=1000, key=b"k", value=b"v", headers=[("h", b"1")])
    >>> [(r.offset, r.key, r.value, r.headers) for r in DefaultRecordBatch(bytes(b.build()))]
    [(0, b'k', b'v', [('h', b'1')])]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kafka.record import default_records as _records

from provstream.native import c_extensions_off

_Batch = _records.DefaultRecordBatch
_read_msg_py: Callable[[Any], Any] = _Batch._read_msg


def _load() -> Callable[..., tuple[Any, int]] | None:
    if c_extensions_off():
        return None
    try:
        from provstream.codec._kafka_c import read_record
    except ImportError:
        return None
    # The attributes the reader relies on, as kafka-python 3.0 defines them.
    expected = ("_buffer", "_header_data", "_pos")
    if not all(name in _Batch.__slots__ for name in expected) or _Batch.LOG_APPEND_TIME != 1:
        return None
    return read_record


_read_record = _load()
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


def install() -> bool:
    """Read kafka-python's records in C from now on (idempotent).

    :returns: whether the C reader is in place (``False``: kafka-python's own reader stays).
    """
    if _read_record is None:
        return False
    _Batch._read_msg = _read_msg_c
    return True


def uninstall() -> None:
    """kafka-python's own reader again (tests compare the two)."""
    _Batch._read_msg = _read_msg_py


INSTALLED = install()
