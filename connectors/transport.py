"""Where the emitter's steps go: the :class:`Transport` port and its adapters.

A step's value is its encoded bytes, or a zero-argument function returning
them (a :class:`Value`): the adapter calls it off the caller's path (the
Kafka adapter on its sender thread), so the agent's thread does not pay for
the Avro encoding. :class:`KafkaTransport` is the production adapter;
:class:`MemoryTransport` keeps ``(key, value bytes)`` pairs in a list for
tests and dry runs.
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import Any, Protocol

from provstream.errors import DeliveryFailed, EmitError, EmitTimeout
from provstream.security import kafka_python_options
from provstream.settings import Settings
from provstream.topics import PartitionMemo

# Extra time flush(None) allows past the producer's own delivery timeout.
_FLUSH_MARGIN_S = 5.0
# The longest close() waits for the sender thread after its flush.
_STOP_JOIN_S = 5.0
_RECONNECT_BACKOFF_S = 1.0
# The sender settles acknowledged steps every _REAP_EVERY sends, or after
# _REAP_S without a new step while some are in flight.
_REAP_EVERY = 256
_REAP_S = 0.002
_CLOSE = object()
_log = logging.getLogger(__name__)


Value = bytes | Callable[[], bytes]


def materialise(value: Value) -> bytes:
    """The bytes of a :class:`Value`."""
    return value if isinstance(value, bytes) else value()


class Transport(Protocol):
    """The port the emitter writes to: one call per step, never batched by the caller."""

    def send(self, key: bytes, value: Value) -> None: ...

    def flush(self, timeout: float | None = None) -> None: ...

    def close(self) -> None: ...


class MemoryTransport:
    """Keeps every ``(key, value)`` in :attr:`sent`, in call order."""

    def __init__(self) -> None:
        self.sent: list[tuple[bytes, bytes]] = []
        self.closed = False

    def send(self, key: bytes, value: Value) -> None:
        if self.closed:
            raise EmitError("transport is closed")
        self.sent.append((key, materialise(value)))

    def flush(self, timeout: float | None = None) -> None:
        return None

    def close(self) -> None:
        self.closed = True


@dataclass(frozen=True)
class Failure:
    """One step Kafka did not take: its key (the session id) and why."""

    key: bytes
    reason: str


def delivery_failed(failures: list[Failure], topic: str) -> DeliveryFailed:
    sessions = sorted({f.key.decode("utf-8", "replace") for f in failures})
    reasons = sorted({f.reason for f in failures})
    exc = DeliveryFailed(
        f"{len(failures)} step(s) not delivered to topic {topic!r} "
        f"(sessions: {', '.join(sessions[:5])}{', ...' if len(sessions) > 5 else ''}): {'; '.join(reasons[:3])}"
    )
    exc.failures = list(failures)  # type: ignore[attr-defined]
    return exc


def describe(exc: BaseException) -> str:
    """``Type: message`` once (kafka-python's messages often start with the type already)."""
    text = str(exc)
    name = type(exc).__name__
    return text if text.startswith(name) else f"{name}: {text}" if text else name


def producer_config(settings: Settings) -> dict[str, Any]:
    """kafka-python producer settings: idempotent, ``acks=all``, batched for throughput."""
    return {
        **kafka_python_options(settings, "emitter"),  # bootstrap_servers, TLS/SASL (docs/security.md)
        "client_id": "provstream-emitter",
        "enable_idempotence": True,
        "acks": "all",
        "linger_ms": 10,
        "batch_size": 256 * 1024,
        "max_request_size": max(settings.max_message_bytes, 1_048_576),
        "max_block_ms": settings.emit_block_ms,
        "bootstrap_timeout_ms": settings.emit_block_ms,
        "compression_type": None,
    }


class KafkaTransport:
    """Hands steps to Kafka without the caller ever waiting on the network.

    Policy:

    * ``send()`` only appends to an in-process buffer and returns; a single
      background thread owns the kafka-python ``KafkaProducer`` (idempotent,
      ``acks=all``; partitions chosen exactly as the default murmur2
      partitioner does, so a session's key maps to the partition Java/Faust
      would pick) and feeds it in FIFO order, so a session's steps reach its
      partition in the order they were sent. A value given as a function is
      called there, just before the producer gets it.
    * The buffer is bounded by ``settings.emit_buffer`` steps not yet
      acknowledged by Kafka (queued here or in the producer). When it is full
      (Kafka slow or unreachable) ``send()`` blocks up to
      ``settings.emit_block_ms`` and then raises :class:`EmitTimeout`; the
      step was not buffered.
    * Connecting happens in the background thread and is retried until
      :meth:`close`; steps stay buffered meanwhile.
    * Every step Kafka refuses or never acknowledges (after the producer's
      delivery timeout) is collected and raised as :class:`DeliveryFailed`
      from the next ``send()`` (before that step is buffered) or from
      :meth:`flush` / :meth:`close`; none is dropped silently.
    * ``flush()`` waits until everything buffered is acknowledged;
      ``close()`` flushes for at most ``settings.emit_close_ms``, then stops
      the producer. Steps still undelivered at close are reported as
      :class:`DeliveryFailed`, naming the bootstrap address and the cause.
    * A transport still open when the interpreter exits is closed then (same
      bound), so a script that never calls ``close()`` loses nothing that
      Kafka could take; what could not be delivered is reported on stderr.
    """

    def __init__(self, settings: Settings, *, topic: str | None = None,
                 config: Mapping[str, Any] | None = None) -> None:
        self.topic = topic or settings.events_topic
        self._config = {**producer_config(settings), **(config or {})}
        self._limit = max(1, settings.emit_buffer)
        self._block_s = settings.emit_block_ms / 1000
        self._close_s = max(0, settings.emit_close_ms) / 1000
        self._cond = threading.Condition(threading.Lock())
        self._pending = 0
        self._failures: list[Failure] = []
        self._queue: SimpleQueue[Any] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._connected = threading.Event()
        self._attempted = threading.Event()
        self._connect_error = ""
        self._closing = threading.Event()
        self._closed = False
        self._stopped = ""

    # -- caller side -----------------------------------------------------

    def send(self, key: bytes, value: Value) -> None:
        if self._failures:
            self._raise_failures()
        if self._closed or self._stopped:
            raise EmitError(self._stopped or "the Kafka transport is closed")
        if self._thread is None:
            self.start()
        with self._cond:
            if self._pending >= self._limit and not self._cond.wait_for(self._has_room, self._block_s):
                raise EmitTimeout(self._full_message())
            self._pending += 1
        self._queue.put((key, value))

    def start(self) -> None:
        """Start the background sender (idempotent); the first ``send()`` does it too."""
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="provstream-emitter", daemon=True)
                self._thread.start()
                _OPEN.add(self)

    def wait_connected(self, timeout: float) -> None:
        """Block until the producer has bootstrapped; :class:`EmitError` naming the broker if not in time."""
        self.start()
        self._attempted.wait(timeout)
        if not self._connected.is_set():
            detail = self._connect_error or "no answer"
            raise EmitError(f"cannot reach Kafka at {self._config['bootstrap_servers']}: {detail}")

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every buffered step is acknowledged; raise what failed."""
        if timeout is None:
            timeout = self._config.get("delivery_timeout_ms", 120_000) / 1000 + self._block_s + _FLUSH_MARGIN_S
        with self._cond:
            done = self._cond.wait_for(lambda: self._pending == 0, timeout)
            pending = self._pending
        self._raise_failures()
        if not done:
            raise EmitTimeout(f"{pending} step(s) still not acknowledged after {timeout:.1f}s: {self._cause()}")

    def close(self, timeout: float | None = None) -> None:
        """Flush, then stop the sender thread and the producer; raise what was not delivered.

        :param timeout: the longest wait for Kafka to acknowledge what is
            buffered, in seconds; default ``settings.emit_close_ms``.
        :raises DeliveryFailed: steps not delivered, with the bootstrap address and the cause.
        """
        if self._closed:
            return
        self._closed = True
        _OPEN.discard(self)
        if timeout is None:
            timeout = self._close_s
        first: EmitError | None = None
        try:
            if self._thread is not None:
                self.flush(timeout)
        except DeliveryFailed as exc:
            first = exc
        except EmitTimeout:
            pass  # what is still undelivered after the stop is reported below
        self._stop()
        try:
            self._raise_failures()
        except DeliveryFailed as exc:
            first = first or exc
        if first is None and self._pending:
            first = DeliveryFailed(
                f"{self._pending} step(s) not delivered to topic {self.topic!r} within {timeout:.1f}s "
                f"(PROVSTREAM_EMIT_CLOSE_MS): {self._cause()}"
            )
        if first is not None:
            raise first

    def _stop(self) -> None:
        self._closing.set()
        self._queue.put(_CLOSE)
        if self._thread is not None:
            self._thread.join(timeout=min(self._block_s + _FLUSH_MARGIN_S, _STOP_JOIN_S))

    def _has_room(self) -> bool:
        return self._pending < self._limit

    def _cause(self) -> str:
        """Why steps are not acknowledged: Kafka unreachable (with the error) or slow; names the setting."""
        addr = self._config["bootstrap_servers"]
        if not self._connected.is_set():
            detail = self._connect_error or f"no answer within {self._block_s:.1f}s"
            return f"Kafka at {addr} unreachable ({detail}); check PROVSTREAM_KAFKA_BOOTSTRAP"
        return f"Kafka at {addr} is not keeping up"

    def _full_message(self) -> str:
        return f"emit buffer full ({self._limit} steps) for {self._block_s:.1f}s: {self._cause()}"

    def _raise_failures(self) -> None:
        with self._cond:
            failures, self._failures = self._failures, []
        if failures:
            raise delivery_failed(failures, self.topic)

    # -- sender thread ---------------------------------------------------

    def _run(self) -> None:
        producer = self._connect()
        inflight: deque[tuple[bytes, Any]] = deque()
        try:
            if producer is not None:
                self._pump(producer, inflight)
        except Exception as exc:  # a bug, not Kafka: stop taking steps and report every buffered one
            self._stopped = f"the Kafka sender stopped: {describe(exc)}"
            _log.exception("provstream emitter: %s", self._stopped)
        finally:
            if producer is not None:
                self._shutdown(producer, inflight)
            self._drain_unsent()

    def _connect(self) -> Any:
        from kafka import KafkaProducer  # imported here: unit tests never need kafka-python loaded

        while not self._closing.is_set():
            try:
                producer = KafkaProducer(**self._config)
            except Exception as exc:  # kafka-python raises KafkaTimeoutError, NoBrokersAvailable, ...
                self._connect_error = describe(exc)
                self._attempted.set()
                self._closing.wait(_RECONNECT_BACKOFF_S)
                continue
            self._connected.set()
            self._attempted.set()
            # kafka-python registered its own atexit close just now; ours must run
            # first (atexit is last-in first-out) so the steps still queued here reach it.
            atexit.unregister(_close_at_exit)
            atexit.register(_close_at_exit)
            return producer
        return None

    def _pump(self, producer: Any, inflight: deque[tuple[bytes, Any]]) -> None:
        """Feed the producer in FIFO order; account for acknowledgements in batches (cheaper than callbacks)."""
        get, send, topic = self._queue.get, producer.send, self.topic
        partition = _Partitioner(producer, topic)
        while True:
            try:
                item = get(timeout=_REAP_S) if inflight else get()
            except Empty:
                self._reap(inflight)
                continue
            if item is _CLOSE:
                return
            key, value = item
            try:
                inflight.append((key, send(topic, value=materialise(value), key=key, partition=partition(key))))
            except Exception as exc:  # metadata timeout, record too large, an encoding bug, ...
                self._failed(key, exc)
            if len(inflight) >= _REAP_EVERY:
                self._reap(inflight)

    def _reap(self, inflight: deque[tuple[bytes, Any]]) -> None:
        """Settle the leading completed sends: count acknowledgements, collect failures."""
        done: list[tuple[bytes, Any]] = []
        while inflight and inflight[0][1].is_done:
            done.append(inflight.popleft())
        if not done:
            return
        failures = [Failure(key, describe(f.exception)) for key, f in done if f.exception is not None]
        with self._cond:
            self._failures += failures
            self._pending -= len(done)
            self._cond.notify_all()

    def _failed(self, key: bytes, exc: BaseException) -> None:
        with self._cond:
            self._failures.append(Failure(key, describe(exc)))
            self._pending -= 1
            self._cond.notify_all()

    def _shutdown(self, producer: Any, inflight: deque[tuple[bytes, Any]]) -> None:
        try:
            producer.flush(timeout=self._block_s)
        except Exception:  # what stays unacknowledged is reported by close() via the pending count
            pass
        producer.close(timeout=self._block_s)
        self._reap(inflight)

    def _drain_unsent(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except Empty:
                return
            if item is not _CLOSE:
                self._failed(item[0], EmitError(f"closed before the step was sent: {self._cause()}"))


_OPEN: set[KafkaTransport] = set()  # started and not closed: closed at interpreter exit


def _close_at_exit() -> None:
    """Close every transport the program left open; report on stderr what could not be delivered."""
    for transport in list(_OPEN):
        try:
            transport.close()
        except EmitError as exc:
            print(f"provstream: at exit: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)


atexit.register(_close_at_exit)


class _Partitioner:
    """kafka-python's default partitioner (Java's murmur2), memoised per key.

    ``murmur2`` is pure Python; a session's key repeats for each of its steps,
    so the sender computes it once per session. The partition count is re-read
    from the producer's metadata on every new key; if it changes the memo is
    dropped, as the default partitioner would re-map keys too.
    """

    def __init__(self, producer: Any, topic: str) -> None:
        from kafka.partitioner.default import murmur2

        self._murmur2 = murmur2
        self._producer = producer
        self._topic = topic
        self._memo = PartitionMemo()

    def __call__(self, key: bytes) -> int:
        partition = self._memo.get(key)
        if partition is None:
            count = len(self._producer.partitions_for(self._topic))  # waits for metadata up to max_block_ms
            self._memo.refresh(count)
            partition = self._memo[key] = (self._murmur2(key) & 0x7FFFFFFF) % count
        return partition
