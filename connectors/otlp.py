"""The OTLP source adapter: OTLP/gRPC and OTLP/HTTP trace exports -> the spans topic.

``provstream otlp`` runs one :class:`Receiver`: OTLP/gRPC
``opentelemetry.proto.collector.trace.v1.TraceService/Export`` on
``settings.otlp_host:otlp_grpc_port`` (4317) and OTLP/HTTP ``POST /v1/traces``
(``application/x-protobuf`` or ``application/json``, optionally gzip) on
``otlp_host:otlp_http_port`` (4318). Each request is checked whole
(:mod:`provstream.codec.otlp`), split by trace id, and every trace's part is
produced to ``settings.otlp_spans_topic`` as one ``ExportTraceServiceRequest``
keyed by the trace id in hex (the Collector's ``otlp_proto`` encoding with
``partition_traces_by_id``). The answer comes only once Kafka acknowledged
every part (``acks=all``, idempotent producer): a success means "on Kafka".

* malformed body, bad ids, a trace's part over ``max_message_bytes``:
  HTTP 400 / gRPC ``INVALID_ARGUMENT`` with the reason, nothing produced;
* Kafka unreachable or refusing: HTTP 503 / gRPC ``UNAVAILABLE`` (OTLP
  exporters retry those). Parts of that request may already be on Kafka; a
  retry re-sends them, and a re-sent span changes nothing downstream.

With ``settings.encrypt`` (``PROVSTREAM_ENCRYPT=1``) the personal texts of
every span are sealed before anything is produced
(:func:`provstream.codec.otlp_seal.seal_request`), each trace under a data key
of its own scope found or made in the keys topic
(:meth:`provstream.crypto.KeyRing.shared_sealer`, deterministic: a re-sent
span is sealed to the same bytes); the spans topic then carries no clear text
of theirs (docs/security.md, "Erase").

Example::

    receiver = Receiver(Settings.from_env())
    await receiver.start()       # both ports bound, producer connected
    ...
    await receiver.stop()
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import web
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from provstream.codec.otlp import (
    MAX_BODY_BYTES,
    OtlpError,
    decompress,
    parse_json,
    parse_protobuf,
    span_count,
    split_by_trace,
)
from provstream.codec.otlp_seal import key_scopes, seal_request
from provstream.crypto import KeyRing, Scope
from provstream.errors import ProvstreamError
from provstream.keys import close_ring, open_ring
from provstream.security import aiokafka_options, check_kafka
from provstream.settings import Settings

log = logging.getLogger("provstream.otlp")
SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
PROTOBUF = "application/x-protobuf"
JSON = "application/json"
_EMPTY_RESPONSE = ExportTraceServiceResponse().SerializeToString()
_EMPTY_JSON = b"{}"


class Unavailable(ProvstreamError):
    """Kafka did not take the request's records."""


@dataclass
class ReceiverStats:
    requests: int = 0
    spans: int = 0
    records: int = 0
    rejected: int = 0
    failed: int = 0


class Receiver:
    """OTLP/gRPC + OTLP/HTTP endpoints writing to the spans topic (see the module docstring).

    :param settings: Kafka, ``otlp_spans_topic``, ``otlp_host``, ``otlp_grpc_port``, ``otlp_http_port``,
        ``max_message_bytes``; a port 0 picks a free one (see :attr:`grpc_port` / :attr:`http_port` after start)
    """

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.stats = ReceiverStats()
        self.grpc_port = settings.otlp_grpc_port
        self.http_port = settings.otlp_http_port
        self._producer: AIOKafkaProducer | None = None
        self._grpc: grpc.aio.Server | None = None
        self._http: web.AppRunner | None = None
        self._ring: KeyRing | None = None  # PROVSTREAM_ENCRYPT=1: the data keys the spans are sealed with
        self._limit = settings.max_message_bytes - 512  # record batch framing, as the emitter leaves

    async def start(self) -> None:
        """Connect the producer, then bind both ports.

        :raises ProvstreamError: Kafka unreachable, or a port in use
        """
        s = self.settings
        check_kafka(s, "otlp")
        self._ring = open_ring(s, "otlp", create_master=True)
        self._producer = AIOKafkaProducer(
            **aiokafka_options(s, "otlp"), acks="all", enable_idempotence=True, linger_ms=5,
            # a trace's part is several KB: aiokafka's 16 KB default batch holds two (3.7x slower here); a batch
            # must stay under the topic's max.message.bytes (settings.max_message_bytes)
            max_batch_size=min(256 * 1024, s.max_message_bytes // 2),
            max_request_size=max(s.max_message_bytes + 64 * 1024, 1_048_576), client_id="provstream-otlp",
        )
        try:
            await self._producer.start()
        except KafkaError as exc:
            await self._producer.stop()
            raise ProvstreamError(f"cannot reach Kafka at {s.kafka_bootstrap}: {exc}") from exc
        try:
            self._grpc = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_BODY_BYTES)])
            handler = grpc.method_handlers_generic_handler(SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(
                self._grpc_export, request_deserializer=None, response_serializer=None)})
            self._grpc.add_generic_rpc_handlers((handler,))
            self.grpc_port = self._grpc.add_insecure_port(f"{s.otlp_host}:{s.otlp_grpc_port}")
            if not self.grpc_port:
                raise ProvstreamError(f"cannot listen on {s.otlp_host}:{s.otlp_grpc_port} (gRPC)")
            await self._grpc.start()
            app = web.Application(client_max_size=MAX_BODY_BYTES)
            app.router.add_post("/v1/traces", self._http_export)
            self._http = web.AppRunner(app, access_log=None)
            await self._http.setup()
            site = web.TCPSite(self._http, s.otlp_host, s.otlp_http_port)
            await site.start()
            sockets = site._server.sockets if site._server is not None else ()  # type: ignore[union-attr,attr-defined]
            self.http_port = sockets[0].getsockname()[1] if sockets else s.otlp_http_port
        except (OSError, RuntimeError) as exc:
            await self.stop()
            raise ProvstreamError(f"cannot listen on {s.otlp_host}: {exc}") from exc
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Stop accepting, finish the requests in hand (up to 5 s), flush and close the producer."""
        if self._grpc is not None:
            await self._grpc.stop(5)
            self._grpc = None
        if self._http is not None:
            await self._http.cleanup()
            self._http = None
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None
        close_ring(self._ring)
        self._ring = None

    # -- the one operation --------------------------------------------------------

    async def export(self, parse: Callable[[bytes], Any], body: bytes) -> int:
        """Check ``body``, split it by trace and produce every part; return the number of spans.

        :param parse: :func:`~provstream.codec.otlp.parse_protobuf` or :func:`~provstream.codec.otlp.parse_json`
        :param body: the (decompressed) request body
        :returns: how many spans are now on the spans topic
        :raises OtlpError: the request is malformed (nothing was produced)
        :raises Unavailable: Kafka did not acknowledge every part
        """
        request = parse(body)
        if self._ring is not None:
            await self._seal(request)
        records = split_by_trace(request)
        for key, value in records:
            if len(key) + len(value) > self._limit:
                raise OtlpError(f"the spans of trace {key.decode()} are {len(value)} bytes encoded; the limit is "
                                f"{self._limit} (max_message_bytes less 512): export them in smaller batches")
        producer = self._producer
        if producer is None:
            raise Unavailable("the receiver is stopping")
        try:
            sent = [await producer.send(self.settings.otlp_spans_topic, value=v, key=k) for k, v in records]
            if sent:
                await asyncio.gather(*sent)
        except KafkaError as exc:
            self.stats.failed += 1
            raise Unavailable(f"Kafka did not take the spans: {exc}") from exc
        n = span_count(request)
        self.stats.requests += 1
        self.stats.spans += n
        self.stats.records += len(records)
        return n

    async def _seal(self, request: Any) -> None:
        """Seal the request's personal texts in place, on a thread (a new trace's key is a keys-topic round trip).

        :raises Unavailable: the keys topic could not be read or written
        """
        ring, s = self._ring, self.settings
        assert ring is not None

        def seal() -> None:
            sealers = ring.shared_sealers(Scope(*k) for k in key_scopes(request, s.user, s.collection))
            seal_request(request, lambda scope: sealers[Scope(*scope)].seal, s.user, s.collection)

        try:
            await asyncio.to_thread(seal)
        except ProvstreamError as exc:
            self.stats.failed += 1
            log.warning("cannot seal the spans: %s", exc)
            raise Unavailable(f"cannot seal the spans: {exc}") from exc

    async def _grpc_export(self, request: bytes, context: grpc.aio.ServicerContext) -> bytes:
        try:
            await self.export(parse_protobuf, request)
        except OtlpError as exc:
            self.stats.rejected += 1
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except Unavailable as exc:
            await context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
        return _EMPTY_RESPONSE

    async def _http_export(self, request: web.Request) -> web.Response:
        content_type = request.content_type
        if content_type not in (PROTOBUF, JSON):
            return _status(415, f"unsupported Content-Type {content_type!r}: use {PROTOBUF} or {JSON}", PROTOBUF)
        try:
            body = decompress(await request.read(), request.headers.get("Content-Encoding", ""))
            await self.export(parse_protobuf if content_type == PROTOBUF else parse_json, body)
        except web.HTTPRequestEntityTooLarge:
            return _status(413, f"body over {MAX_BODY_BYTES} bytes", content_type)
        except OtlpError as exc:
            self.stats.rejected += 1
            return _status(400, str(exc), content_type)
        except Unavailable as exc:
            return _status(503, str(exc), content_type)
        if content_type == PROTOBUF:
            return web.Response(body=_EMPTY_RESPONSE, content_type=PROTOBUF)
        return web.Response(body=_EMPTY_JSON, content_type=JSON)


def _status(http_status: int, message: str, content_type: str) -> web.Response:
    """An OTLP/HTTP error: a ``google.rpc.Status`` (code 3 INVALID_ARGUMENT or 14 UNAVAILABLE) with ``message``."""
    code = 14 if http_status == 503 else 3
    if content_type == JSON:
        import json

        return web.Response(status=http_status, body=json.dumps({"code": code, "message": message}).encode(),
                            content_type=JSON)
    text = message.encode()
    body = bytes([0x08, code, 0x12]) + _varint(len(text)) + text  # Status{code = 1; message = 2}
    return web.Response(status=http_status, body=body, content_type=PROTOBUF)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


async def serve(settings: Settings, stop: asyncio.Event, on_ready: Callable[[Receiver], None] | None = None) -> \
        ReceiverStats:
    """Run a :class:`Receiver` until ``stop`` is set; return its counters.

    :param settings: see :class:`Receiver`
    :param stop: set it to stop (the command sets it on SIGTERM/SIGINT)
    :param on_ready: called once both ports listen
    """
    receiver = Receiver(settings)
    await receiver.start()
    try:
        if on_ready is not None:
            on_ready(receiver)
        await stop.wait()
    finally:
        await receiver.stop()
    return receiver.stats
