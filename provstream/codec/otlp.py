"""OTLP trace payloads: parse, check, split by trace id, and reduce spans to what the translation reads.

Pure (no I/O). Used by the receiver (:mod:`provstream.connectors.otlp`) to
check a request and split it into one ``ExportTraceServiceRequest`` per trace
(the OpenTelemetry Collector's ``otlp_proto`` Kafka encoding, keyed by the
trace id in lower-case hex as the Collector's ``partition_traces_by_id``
does), and by the worker (:mod:`provstream.streams.spans_agent`) to turn one
such message into compact span records for :mod:`provstream.streams.spans`.

A malformed payload raises :class:`OtlpError` with the reason; nothing is
returned for part of it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf.json_format import ParseDict
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans

from provstream.core.events import SEALED_PREFIX
from provstream.crypto import TRACE_SCOPE_PREFIX
from provstream.errors import ProvstreamError

# Span attributes the translation reads (exact names or prefixes); the rest are dropped from the state.
KEPT_PREFIXES = ("gen_ai.", "openinference.", "llm.input_messages.", "llm.output_messages.", "tool.", "tool_call.",
                 "retrieval.documents.", "input.value", "output.value", "session.id", "agent.name")
USER_ATTRIBUTE = "provstream.user"
COLLECTION_ATTRIBUTE = "provstream.collection"
CHAT_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
MAX_BODY_BYTES = 64 * 1024 * 1024


class OtlpError(ProvstreamError, ValueError):
    """A payload that is not a valid OTLP trace export; the message says why."""


# -- parsing ------------------------------------------------------------------

def parse_protobuf(body: bytes) -> ExportTraceServiceRequest:
    """Decode a binary ``ExportTraceServiceRequest`` and check its ids.

    :param body: the serialized request (an OTLP/gRPC message or an OTLP/HTTP ``application/x-protobuf`` body)
    :returns: the request
    :raises OtlpError: not decodable, or a span with a bad trace/span id

    >>> parse_protobuf(b"").resource_spans
    []
    """
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise OtlpError(f"not an OTLP ExportTraceServiceRequest: {exc or 'protobuf decode error'}") from exc
    check(request)
    return request


def parse_json(body: bytes) -> ExportTraceServiceRequest:
    """Decode an OTLP/JSON request (ids in hex, as the OTLP/JSON encoding says) and check it.

    :param body: UTF-8 JSON text of an ``ExportTraceServiceRequest``
    :returns: the request
    :raises OtlpError: not JSON, not the OTLP shape, or a bad id

    >>> len(parse_json(b'{"resourceSpans": []}').resource_spans)
    0
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OtlpError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise OtlpError("an OTLP/JSON request must be a JSON object")
    try:
        for rs in _list(data, "resourceSpans", "resource_spans"):
            for ss in _list(rs, "scopeSpans", "scope_spans"):
                for span in _list(ss, "spans"):
                    for key in ("traceId", "trace_id", "spanId", "span_id", "parentSpanId", "parent_span_id"):
                        if isinstance(span, dict) and isinstance(span.get(key), str):
                            span[key] = _hex_to_b64(span[key], key)
                    for link in _list(span, "links") if isinstance(span, dict) else ():
                        for key in ("traceId", "trace_id", "spanId", "span_id"):
                            if isinstance(link, dict) and isinstance(link.get(key), str):
                                link[key] = _hex_to_b64(link[key], key)
        request = ParseDict(data, ExportTraceServiceRequest(), ignore_unknown_fields=True)
    except OtlpError:
        raise
    except Exception as exc:  # json_format raises ParseError and friends
        raise OtlpError(f"not an OTLP/JSON ExportTraceServiceRequest: {exc}") from exc
    check(request)
    return request


def _list(obj: Any, *names: str) -> list[Any]:
    if not isinstance(obj, dict):
        return []
    for name in names:
        value = obj.get(name)
        if isinstance(value, list):
            return value
    return []


def _hex_to_b64(value: str, key: str) -> str:
    if value == "":
        return ""
    try:
        return base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError as exc:
        raise OtlpError(f"{key} {value[:40]!r} is not hex") from exc


def decompress(body: bytes, encoding: str) -> bytes:
    """Undo an HTTP ``Content-Encoding`` (``gzip``, ``deflate`` or none).

    :param body: the raw request body
    :param encoding: the header value ("" for none)
    :returns: the decoded body
    :raises OtlpError: unknown encoding, corrupt data, or over :data:`MAX_BODY_BYTES`

    >>> decompress(b"x", "identity")
    b'x'
    """
    encoding = encoding.strip().lower()
    try:
        if encoding in ("", "identity"):
            return body
        if encoding == "gzip":
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            d = zlib.decompressobj()
        else:
            raise OtlpError(f"unsupported Content-Encoding {encoding!r} (use gzip, deflate or none)")
        out = d.decompress(body, MAX_BODY_BYTES + 1)
    except zlib.error as exc:
        raise OtlpError(f"corrupt {encoding} body: {exc}") from exc
    if len(out) > MAX_BODY_BYTES:
        raise OtlpError(f"body larger than {MAX_BODY_BYTES} bytes once decompressed")
    return out


def check(request: ExportTraceServiceRequest) -> None:
    """Refuse spans whose ids the translation cannot key on (the whole request, so nothing is half-written).

    :param request: a decoded request
    :raises OtlpError: a trace id that is not 16 bytes (or all zero), a span id that is not 8 bytes,
        a parent span id that is neither empty nor 8 bytes
    """
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                if len(span.trace_id) != 16 or not any(span.trace_id):
                    raise OtlpError(f"span {span.name!r}: trace id must be 16 bytes, not all zero "
                                    f"(got {span.trace_id.hex() or 'none'})")
                if len(span.span_id) != 8 or not any(span.span_id):
                    raise OtlpError(f"span {span.name!r}: span id must be 8 bytes, not all zero "
                                    f"(got {span.span_id.hex() or 'none'})")
                if span.parent_span_id and len(span.parent_span_id) != 8:
                    raise OtlpError(f"span {span.name!r}: parent span id must be empty or 8 bytes")


# -- splitting ----------------------------------------------------------------

def split_by_trace(request: ExportTraceServiceRequest) -> list[tuple[bytes, bytes]]:
    """One ``(key, value)`` Kafka record per trace: key = trace id in lower-case hex, value = the
    serialized ``ExportTraceServiceRequest`` holding that trace's spans (resource and scope kept).

    :param request: a checked request (:func:`parse_protobuf` / :func:`parse_json`)
    :returns: the records, in order of each trace's first span
    """
    per_trace: dict[bytes, ExportTraceServiceRequest] = {}
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            groups: dict[bytes, list[Any]] = {}
            for span in ss.spans:
                groups.setdefault(span.trace_id, []).append(span)
            if len(groups) == 1 and len(request.resource_spans) == 1 and len(rs.scope_spans) == 1:
                (trace_id,) = groups
                return [(trace_id.hex().encode(), request.SerializeToString())]
            for trace_id, spans in groups.items():
                out = per_trace.get(trace_id)
                if out is None:
                    out = per_trace[trace_id] = ExportTraceServiceRequest()
                target = _resource_in(out, rs)
                scope = ScopeSpans(scope=ss.scope, schema_url=ss.schema_url)
                scope.spans.extend(spans)
                target.scope_spans.append(scope)
    return [(trace_id.hex().encode(), r.SerializeToString()) for trace_id, r in per_trace.items()]


def _resource_in(out: ExportTraceServiceRequest, rs: ResourceSpans) -> ResourceSpans:
    """The entry of ``out`` for ``rs``'s resource (the last one, if it is the same), else a new one."""
    if out.resource_spans and out.resource_spans[-1].resource == rs.resource \
            and out.resource_spans[-1].schema_url == rs.schema_url:
        return out.resource_spans[-1]
    return out.resource_spans.add(resource=rs.resource, schema_url=rs.schema_url)


def span_count(request: ExportTraceServiceRequest) -> int:
    return sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)


# -- compact span records for the translation ------------------------------------

def value_of(v: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as plain Python (arrays as lists, kvlists as dicts, bytes as hex).

    >>> value_of(AnyValue(string_value="x"))
    'x'
    """
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "double_value":
        return v.double_value
    if kind == "array_value":
        return [value_of(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: value_of(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return None


# -- what the receiver (sealing) and the translation both derive -------------------
# One place, so the receiver seals under the scope the worker later gives the session, and the texts it
# seals are exactly the ones the translation would have made of the clear values.

def resource_scope(attributes: Iterable[Any]) -> tuple[str, str]:
    """The ``provstream.user`` / ``provstream.collection`` resource attributes ("" when absent).

    :param attributes: the resource's ``KeyValue`` s
    :returns: ``(user, collection)``

    >>> from opentelemetry.proto.common.v1.common_pb2 import KeyValue
    >>> resource_scope([KeyValue(key="provstream.user", value=AnyValue(string_value="alice"))])
    ('alice', '')
    """
    user = collection = ""
    for kv in attributes:
        if kv.key == USER_ATTRIBUTE:
            user = str(value_of(kv.value) or "")
        elif kv.key == COLLECTION_ATTRIBUTE:
            collection = str(value_of(kv.value) or "")
    return user, collection


def scope_names(user: str, collection: str, default_user: str, default_collection: str) -> tuple[str, str]:
    """The user and collection of a span's sessions: the resource's, else the defaults (the settings').

    >>> scope_names("", "c", "trustgraph", "default")
    ('trustgraph', 'c')
    """
    return user or default_user, collection or default_collection


def key_scope(trace_id: str, user: str, collection: str, default_user: str, default_collection: str) \
        -> tuple[str, str, str]:
    """The scope of the data key the receiver seals a span's texts with: its sessions' user and collection,
    and ``otlp-trace-<trace id>`` (one key per trace and scope: a span's agent session is often unknown
    when the span arrives, children being exported before their parents).

    :param trace_id: the trace id in lower-case hex
    :param user: the resource's ``provstream.user`` ("" when absent); ``collection`` likewise
    :param default_user: the settings' user; ``default_collection`` likewise
    :returns: ``(user, collection, session)`` for :meth:`provstream.crypto.KeyRing.shared_sealer`

    >>> key_scope("0af7651916cd43dd8448eb211c80319c", "alice", "", "trustgraph", "default")
    ('alice', 'default', 'otlp-trace-0af7651916cd43dd8448eb211c80319c')
    """
    return (*scope_names(user, collection, default_user, default_collection), TRACE_SCOPE_PREFIX + trace_id)


def kind_of(attributes: Mapping[str, Any]) -> str:
    """``agent``, ``chat``, ``tool``, ``retrieval`` or ``other``, from ``gen_ai.operation.name`` or
    ``openinference.span.kind``.

    >>> kind_of({"gen_ai.operation.name": "execute_tool"}), kind_of({"openinference.span.kind": "LLM"})
    ('tool', 'chat')
    """
    op = attributes.get("gen_ai.operation.name")
    oi = attributes.get("openinference.span.kind")
    if op == "invoke_agent" or oi == "AGENT":
        return "agent"
    if op in CHAT_OPERATIONS or oi == "LLM":
        return "chat"
    if op == "execute_tool" or oi == "TOOL":
        return "tool"
    if op == "retrieval" or oi == "RETRIEVER":
        return "retrieval"
    return "other"


def text_of(value: Any) -> str:
    """An attribute value as the text the translation records: strings as they are, others as JSON.

    >>> text_of(None), text_of("x"), text_of({"b": 1})
    ('', 'x', '{"b": 1}')
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def arguments_text(value: Any) -> str:
    """Tool call arguments as the emitter's canonical JSON text (sorted keys, Unicode kept); JSON text is
    parsed first, anything but an object becomes ``{"value": ...}``, nothing is ``{}``. Arguments sealed by
    the receiver (already canonical before sealing) are returned as they are.

    >>> arguments_text('{"b": 1, "a": "é"}'), arguments_text("6*7"), arguments_text(None)
    ('{"a": "é", "b": 1}', '{"value": "6*7"}', '{}')
    >>> json.loads(arguments_text('{"x": NaN}'))
    {'value': '{"x": NaN}'}
    """
    if isinstance(value, str) and value.startswith(SEALED_PREFIX):
        return value
    if value is None or value == "":
        value = {}
    elif isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = {"value": value}
    if not isinstance(value, dict):
        value = {"value": value}
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False)
    except ValueError:  # NaN or Infinity (Python's JSON reader takes them; JSON has none): the text as a value
        return json.dumps({"value": text_of(value)}, ensure_ascii=False, sort_keys=True)


def chunk_id(document: Mapping[str, Any]) -> str:
    """A retrieved document's chunk id: its ``id``, else ``sha256:<hex>`` of its text.

    >>> chunk_id({"id": "d#1"}), chunk_id({"content": ""})[:14]
    ('d#1', 'sha256:e3b0c44')
    """
    if document.get("id") not in (None, ""):
        return text_of(document["id"])
    return "sha256:" + hashlib.sha256(text_of(document.get("content")).encode()).hexdigest()


def _kept(key: str) -> bool:
    return key.startswith(KEPT_PREFIXES)


def span_records(payload: bytes) -> list[dict[str, Any]]:
    """The spans of one spans-topic message as compact, JSON-serialisable records.

    Each record: ``t`` trace id (hex), ``id`` span id, ``p`` parent span id ("" for a root),
    ``n`` name, ``s``/``e`` start/end (ns since the epoch), ``a`` the attributes the
    translation reads, ``u``/``c`` the ``provstream.user``/``provstream.collection`` resource
    attributes ("" when absent).

    :param payload: a serialized ``ExportTraceServiceRequest`` (any number of traces)
    :returns: the records, in payload order
    :raises OtlpError: undecodable, or bad ids

    >>> span_records(b"")
    []
    """
    request = parse_protobuf(payload)
    out: list[dict[str, Any]] = []
    for rs in request.resource_spans:
        user, collection = resource_scope(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                out.append({
                    "t": span.trace_id.hex(), "id": span.span_id.hex(), "p": span.parent_span_id.hex(),
                    "n": span.name, "s": span.start_time_unix_nano, "e": span.end_time_unix_nano,
                    "a": {kv.key: value_of(kv.value) for kv in span.attributes if _kept(kv.key)},
                    "u": user, "c": collection,
                })
    return out


def request_of(spans: Iterable[Any], resource_attributes: dict[str, str] | None = None) -> bytes:
    """Serialize protobuf ``Span`` messages as one request (for tests and the benchmark).

    :param spans: ``opentelemetry.proto.trace.v1.trace_pb2.Span`` messages
    :param resource_attributes: string resource attributes
    :returns: the serialized ``ExportTraceServiceRequest``
    """
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    for k, v in (resource_attributes or {}).items():
        rs.resource.attributes.add(key=k, value=AnyValue(string_value=v))
    rs.scope_spans.add().spans.extend(spans)
    return request.SerializeToString()


__all__ = ["OtlpError", "arguments_text", "check", "chunk_id", "decompress", "key_scope", "kind_of", "parse_json",
           "parse_protobuf", "request_of", "resource_scope", "scope_names", "span_count", "span_records",
           "split_by_trace", "text_of", "value_of"]
