"""Where the emitter's steps go: the :class:`Transport` port and its adapters.

A step's value is its encoded bytes, or a zero-argument function returning
them (a :class:`Value`): the adapter calls it off the caller's path (the
Kafka adapter on its sender thread), so the agent's thread does not pay for
the Avro encoding. :class:`KafkaTransport` is the production adapter;
:class:`MemoryTransport` keeps ``(key, value bytes)`` pairs in a list for
tests and dry runs.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from queue import Empty, SimpleQueue
from typing import Any, Protocol

from provstream.errors import DeliveryFailed, EmitError, EmitTimeout
from provstream.publish import BatchPublisher
from provstream.security import aiokafka_options
from provstream.settings import Settings
from provstream.topics import KeyPartitioner

# Extra time flush(None) allows past _DELIVERY_S and the buffer's block time.
_FLUSH_MARGIN_S = 5.0
# The longest close() waits for the sender thread after its flush.
_STOP_JOIN_S = 5.0
_RECONNECT_BACKOFF_S = 1.0
# The longest flush(None) waits for Kafka: the idempotent producer itself never gives up on a step.
_DELIVERY_S = 120.0
# The most queued steps the sender turns into record batches at a time.
_CHUNK = 4096
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
    """aiokafka producer settings: idempotent, ``acks=all``, batched for throughput.

    An idempotent producer retries a batch until Kafka takes it (it never
    expires one: no duplicate can result), so a step waits out a Kafka outage
    in the transport's bounded buffer instead of being dropped.
    """
    return {
        **aiokafka_options(settings, "emitter"),  # bootstrap_servers, TLS/SASL (docs/security.md)
        "client_id": "provstream-emitter",
        "enable_idempotence": True,
        "acks": "all",
        "linger_ms": 10,
        # A record batch must stay under the topic's max.message.bytes; one step alone always fits one.
        "max_batch_size": min(256 * 1024, max(settings.max_message_bytes // 2, 16 * 1024)),
        "max_request_size": max(settings.max_message_bytes + 64 * 1024, 1_048_576),
        "request_timeout_ms": max(settings.emit_block_ms, 30_000),
        "compression_type": None,
        "partitioner": KeyPartitioner(),  # aiokafka's default partitioner, its murmur2 in C
    }


class KafkaTransport:
    """Hands steps to Kafka without the caller ever waiting on the network.

    Policy:

    * ``send()`` only appends to an in-process buffer and returns; a single
      background thread runs an asyncio loop that owns an aiokafka
      ``AIOKafkaProducer`` (idempotent, ``acks=all``) and turns whatever is
      buffered into one record batch per partition (partitions chosen exactly
      as the default murmur2 partitioner does, so a session's key maps to the
      partition Java/Faust would pick), in FIFO order, so a session's steps
      reach its partition in the order they were sent. A value given as a
      function is called there, just before its batch is built. Kafka
      acknowledges a batch at a time: the per-step cost is one append.
    * The buffer is bounded by ``settings.emit_buffer`` steps not yet
      acknowledged by Kafka (queued here or in the producer). When it is full
      (Kafka slow or unreachable) ``send()`` blocks up to
      ``settings.emit_block_ms`` and then raises :class:`EmitTimeout`; the
      step was not buffered.
    * Connecting happens in the background thread and is retried until
      :meth:`close`; steps stay buffered meanwhile.
    * Every step Kafka refuses (a non-retriable error; retriable ones are
      retried until Kafka takes the step) is collected and raised as :class:`DeliveryFailed`
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
        # The sender's loop and its wake-up event; _idle: the loop may be asleep, send() must wake it.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken: asyncio.Event | None = None
        self._pumping: asyncio.Future[None] | None = None
        self._idle = False

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
        if self._idle:
            self._idle = False
            self._wake()

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
            timeout = _DELIVERY_S + self._block_s + _FLUSH_MARGIN_S
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
        self._wake(interrupt=True)
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

    # -- sender thread: an asyncio loop that owns the aiokafka producer ----------------

    def _wake(self, interrupt: bool = False) -> None:
        """Wake the sender's loop (it sleeps only when the queue was empty); ``interrupt``: stop its pump."""
        loop, woken = self._loop, self._woken
        if loop is not None and woken is not None:
            try:
                loop.call_soon_threadsafe(self._interrupt if interrupt else woken.set)
            except RuntimeError:  # the loop has closed: nothing left to wake
                pass

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._main(loop))
        finally:
            self._loop = None
            loop.close()
            self._drain_unsent()

    async def _main(self, loop: asyncio.AbstractEventLoop) -> None:
        self._woken = asyncio.Event()
        self._loop = loop
        if self._closing.is_set():
            return
        producer = await self._connect()
        if producer is None:
            return
        self._pumping = asyncio.ensure_future(self._pump(producer))
        try:
            await self._pumping
        except asyncio.CancelledError:  # close() gave up waiting for Kafka: what is left is reported
            pass
        except Exception as exc:  # a bug, not Kafka: stop taking steps and report every buffered one
            self._stopped = f"the Kafka sender stopped: {describe(exc)}"
            _log.exception("provstream emitter: %s", self._stopped)
        finally:
            await self._shutdown(producer)

    def _interrupt(self) -> None:
        """On the loop: stop a pump that waits for Kafka to take a batch (close() is past its flush)."""
        if self._woken is not None:
            self._woken.set()
        if self._pumping is not None:
            self._pumping.cancel()

    async def _connect(self) -> Any:
        from aiokafka import AIOKafkaProducer  # imported here: unit tests never need it loaded

        _quiet_aiokafka()
        while not self._closing.is_set():
            producer = AIOKafkaProducer(**self._config)
            try:
                await producer.start()
            except Exception as exc:  # KafkaConnectionError, a refused TLS handshake or login, ...
                self._connect_error = describe(exc)
                self._attempted.set()
                await _quietly(producer.stop(), self._block_s)
                await self._sleep(_RECONNECT_BACKOFF_S)
                continue
            self._connected.set()
            self._attempted.set()
            return producer
        return None

    async def _sleep(self, seconds: float | None) -> None:
        """Wait up to ``seconds`` (``None``: indefinitely) or until :meth:`_wake`."""
        assert self._woken is not None
        try:
            await asyncio.wait_for(self._woken.wait(), seconds)
        except TimeoutError:
            pass
        self._woken.clear()

    async def _pump(self, producer: Any) -> None:
        """Feed the producer in FIFO order, a record batch per partition for what is queued at once."""
        publisher = BatchPublisher(producer, self.topic)
        linger, last = self._config.get("linger_ms", 0) / 1000, 0.0
        while True:
            items = self._take()
            if not items:
                self._idle = True  # send() wakes the loop from now on; look once more before sleeping
                items = self._take()
                if not items:
                    await self._sleep(None)
                    self._idle = False
                    continue
                self._idle = False
            wait = last + linger - time.monotonic()
            if wait > 0 and items[-1] is not _CLOSE and len(items) < _CHUNK:
                # Steps keep coming: gather them for a linger, as the producer's own linger would (a record
                # batch per partition per linger at most; a step after a quiet spell goes out at once).
                await asyncio.sleep(wait)
                items += self._take(_CHUNK - len(items))
            last = time.monotonic()
            closing = items[-1] is _CLOSE
            steps = items[:-1] if closing else items
            records: list[tuple[bytes, bytes]] = []
            for key, value in steps:
                try:
                    records.append((key, materialise(value)))
                except Exception as exc:  # an encoding bug: that step fails, the others go on
                    self._failed([key], exc)
            if records:
                await self._publish(publisher, records)
            if closing:
                return

    def _take(self, most: int = _CHUNK) -> list[Any]:
        """What is queued now, up to ``most`` items, ending at a close marker if one is among them."""
        items: list[Any] = []
        get = self._queue.get_nowait
        while len(items) < most:
            try:
                item = get()
            except Empty:
                break
            items.append(item)
            if item is _CLOSE:
                break
        return items

    async def _publish(self, publisher: BatchPublisher, records: list[tuple[bytes, bytes]]) -> None:
        """Hand ``records`` to the producer; settle each record batch when Kafka answers for it.

        A batch waits here while its partition's previous batch is still unsent (Kafka away), in
        order, until :meth:`close`; the caller's buffer bound applies meanwhile.
        """
        from aiokafka.errors import KafkaError

        try:
            deliveries = await publisher.publish_keyed(records, keep_going=self._keep_going)
        except KafkaError as exc:  # the topic's metadata: unknown topic, not authorised, timed out
            self._failed([key for key, _ in records], exc)
            return
        for keys, future in deliveries:
            future.add_done_callback(functools.partial(self._settle, keys))

    def _keep_going(self) -> bool:
        return not self._closing.is_set()

    def _settle(self, keys: list[bytes], future: asyncio.Future[Any]) -> None:
        """One record batch answered: count its steps acknowledged, or collect them as failed."""
        if future.cancelled():
            self._failed(keys, EmitError("the producer stopped before Kafka answered"))
            return
        exc = future.exception()
        if exc is not None:
            self._failed(keys, exc)
            return
        with self._cond:
            self._pending -= len(keys)
            self._cond.notify_all()

    def _failed(self, keys: list[bytes], exc: BaseException) -> None:
        reason = describe(exc)
        with self._cond:
            self._failures += [Failure(key, reason) for key in keys]
            self._pending -= len(keys)
            self._cond.notify_all()

    async def _shutdown(self, producer: Any) -> None:
        # What stays unacknowledged is reported by close() via the pending count.
        await _quietly(producer.flush(), self._block_s)
        await _quietly(producer.stop(), self._block_s)

    def _drain_unsent(self) -> None:
        while True:
            try:
                item = self._queue.get_nowait()
            except Empty:
                return
            if item is not _CLOSE:
                self._failed([item[0]], EmitError(f"closed before the step was sent: {self._cause()}"))


def _quiet_aiokafka() -> None:
    """One of each repeated aiokafka warning or error per 30 s (it logs a failed connect on every retry);
    the transport reports the cause itself. Idempotent."""
    from provstream.streams.quiet import RepeatLimit

    for name in _AIOKAFKA_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RepeatLimit) for f in logger.filters):
            logger.addFilter(RepeatLimit())


_AIOKAFKA_LOGGERS = ("aiokafka", "aiokafka.conn", "aiokafka.cluster", "aiokafka.producer.sender",
                     "aiokafka.producer.producer")


async def _quietly(awaitable: Any, timeout: float) -> None:
    """Await ``awaitable`` for at most ``timeout`` seconds; whatever it raises is ignored."""
    try:
        await asyncio.wait_for(awaitable, timeout)
    except Exception:  # a stop or flush that fails or times out leaves the pending count to report
        pass


_OPEN: set[KafkaTransport] = set()  # started and not closed: closed at interpreter exit


def _close_at_exit() -> None:
    """Close every transport the program left open; report on stderr what could not be delivered."""
    for transport in list(_OPEN):
        try:
            transport.close()
        except EmitError as exc:
            print(f"provstream: at exit: {' '.join(str(exc).split())}", file=sys.stderr, flush=True)


atexit.register(_close_at_exit)
