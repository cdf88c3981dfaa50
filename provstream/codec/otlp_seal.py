"""Seal the personal texts of OTLP spans before they reach Kafka (``PROVSTREAM_ENCRYPT=1``, docs/security.md).

Pure (no I/O): the receiver (:mod:`provstream.connectors.otlp`) calls
:func:`seal_request` on each checked request with a function that gives the
deterministic sealer of a key scope (:meth:`provstream.crypto.KeyRing.shared_sealer`).
Every span is sealed under the data key of :func:`provstream.codec.otlp.key_scope`
(its resource's user and collection, its trace), in its attributes and in its
events' attributes.

What is sealed, and how, so that the translation (:mod:`provstream.streams.spans`)
still works on the sealed values without opening them:

* texts (question, thought, observation, answer, DocRAG query and synthesis,
  prompts, completions, system instructions): the attribute becomes one sealed
  string of the text the translation would have read (:func:`~provstream.codec.otlp.text_of`);
* tool call arguments (``gen_ai.tool.call.arguments``, an OpenInference TOOL
  span's ``input.value``, the ``arguments`` of a message's tool call): the
  canonical JSON text the translation would have made
  (:func:`~provstream.codec.otlp.arguments_text`), sealed; the translation
  passes sealed arguments through as the step's arguments;
* messages (``gen_ai.input.messages`` / ``gen_ai.output.messages``, OpenInference
  ``llm.*_messages.*``): the structure stays in clear (roles, part types, tool
  call ids and tool names, finish reasons), every other string is sealed; a
  message's text parts are first joined into one (with ``\\n``, as the
  translation joins them), so its text is one sealed string;
* retrieved documents: a document without an id gets the id the translation
  would give it (``sha256:`` of its clear text), then its texts are sealed.

Sealing is deterministic (:func:`provstream.crypto.seal_text_siv`): the same
text of the same trace seals to the same string, so a re-sent span is the same
bytes and the translation's comparisons (is the last chat's text the agent's
answer?) hold. Everything else stays in clear: span names, ids, timings,
status, resource attributes, model names, and any attribute not listed here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue

from provstream.codec.otlp import arguments_text, chunk_id, key_scope, resource_scope, text_of, value_of

Seal = Callable[[str], str]
SealerOf = Callable[[tuple[str, str, str]], Seal]

TEXT_ATTRIBUTES = frozenset({
    "gen_ai.tool.call.result", "gen_ai.retrieval.query.text", "gen_ai.system_instructions", "gen_ai.prompt",
    "gen_ai.completion", "input.value", "output.value", "llm.prompt_template.template",
    "llm.prompt_template.variables", "reranker.query",
})
"""Attributes sealed whole as one text (``input.value`` of an OpenInference TOOL span is arguments instead)."""
TEXT_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.prompts", "embedding.embeddings.",
                 "reranker.input_documents.", "reranker.output_documents.")
"""Attribute name prefixes sealed whole as texts (older and other conventions' prompts and documents)."""
MESSAGE_ATTRIBUTES = frozenset({"gen_ai.input.messages", "gen_ai.output.messages"})
ARGUMENT_ATTRIBUTES = frozenset({"gen_ai.tool.call.arguments"})
DOCUMENT_ATTRIBUTES = frozenset({"gen_ai.retrieval.documents"})
CLEAR_MESSAGE_KEYS = frozenset({"role", "finish_reason"})
TOOL_PARTS = frozenset({"tool_call", "tool_call_response"})
CLEAR_TOOL_PART_KEYS = frozenset({"type", "id", "name"})  # a tool call's id and tool name; other parts: type only
_OI_MESSAGE = re.compile(r"^llm\.(input|output)_messages\.(\d+)\.message\.(.+)$")
_OI_CLEAR = re.compile(r"^(role|name|function_call_name|tool_call_id|tool_calls\.\d+\.tool_call\.(id|function\.name)"
                       r"|contents\.\d+\.message_content\.type)$")
_OI_ARGUMENTS = re.compile(r"^tool_calls\.\d+\.tool_call\.function\.arguments$")
_OI_TEXT = re.compile(r"^contents\.(\d+)\.message_content\.text$")
_OI_DOCUMENT = re.compile(r"^retrieval\.documents\.(\d+)\.document\.(.+)$")


def seal_request(request: ExportTraceServiceRequest, sealer_of: SealerOf, default_user: str,
                 default_collection: str) -> int:
    """Seal, in place, the personal texts of every span of a checked request.

    :param request: a request from :func:`provstream.codec.otlp.parse_protobuf` / ``parse_json``
    :param sealer_of: ``(user, collection, session)`` -> the function sealing a text under that scope's key
    :param default_user: the settings' user (spans whose resource names none); ``default_collection`` likewise
    :returns: how many spans were sealed

    >>> from opentelemetry.proto.trace.v1.trace_pb2 import Span
    >>> r = ExportTraceServiceRequest(); span = r.resource_spans.add().scope_spans.add().spans.add(trace_id=b"1" * 16)
    >>> span.attributes.add(key="gen_ai.tool.call.result", value=AnyValue(string_value="42"))
    key: "gen_ai.tool.call.result"
    value {
      string_value: "42"
    }
    <BLANKLINE>
    >>> seal_request(r, lambda scope: lambda text: f"<{scope[2][:12]}:{text}>", "u", "c")
    1
    >>> span.attributes[0].value.string_value
    '<otlp-trace-3:42>'
    """
    n = 0
    sealers: dict[tuple[str, str, str], Seal] = {}
    for scope, span in _scoped_spans(request, default_user, default_collection):
        seal = sealers.get(scope)
        if seal is None:
            seal = sealers[scope] = _memoized(sealer_of(scope))
        tool_input = _tool_input(span.attributes)
        seal_attributes(span.attributes, seal, tool_input)
        for event in span.events:
            seal_attributes(event.attributes, seal, tool_input)
        n += 1
    return n


def _memoized(seal: Seal) -> Seal:
    """``seal`` remembering its results for one request: a chat span's input repeats the trace's history, and
    sealing is deterministic, so each text is sealed once."""
    done: dict[str, str] = {}

    def memo(text: str) -> str:
        out = done.get(text)
        if out is None:
            out = done[text] = seal(text)
        return out

    return memo


def key_scopes(request: ExportTraceServiceRequest, default_user: str, default_collection: str) \
        -> set[tuple[str, str, str]]:
    """The key scopes :func:`seal_request` will ask for (the receiver gets their keys in one go first).

    >>> r = ExportTraceServiceRequest(); _ = r.resource_spans.add().scope_spans.add().spans.add(trace_id=b"1" * 16)
    >>> key_scopes(r, "u", "c")
    {('u', 'c', 'otlp-trace-31313131313131313131313131313131')}
    """
    return {scope for scope, _ in _scoped_spans(request, default_user, default_collection)}


def _scoped_spans(request: ExportTraceServiceRequest, default_user: str, default_collection: str) \
        -> Iterator[tuple[tuple[str, str, str], Any]]:
    for rs in request.resource_spans:
        user, collection = resource_scope(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                yield key_scope(span.trace_id.hex(), user, collection, default_user, default_collection), span


def _tool_input(attributes: Iterable[KeyValue]) -> bool:
    """Whether ``input.value`` holds tool arguments (an OpenInference TOOL span, as the translation reads it)."""
    return any(kv.key == "openinference.span.kind" and value_of(kv.value) == "TOOL" for kv in attributes)


def seal_attributes(attributes: Any, seal: Seal, tool_input: bool = False) -> None:
    """Seal the personal attributes of one span (or span event), in place.

    :param attributes: the repeated ``KeyValue`` field of a ``Span`` or ``Span.Event``
    :param seal: text -> sealed text (the span's data key)
    :param tool_input: ``input.value`` holds tool arguments (an OpenInference TOOL span)

    >>> from opentelemetry.proto.trace.v1.trace_pb2 import Span
    >>> s = Span(attributes=[KeyValue(key="input.value", value=AnyValue(string_value='{"q": 1}')),
    ...                      KeyValue(key="gen_ai.tool.name", value=AnyValue(string_value="search"))])
    >>> seal_attributes(s.attributes, lambda t: f"<{t}>", tool_input=True)
    >>> [(kv.key, kv.value.string_value) for kv in s.attributes]
    [('input.value', '<{"q": 1}>'), ('gen_ai.tool.name', 'search')]
    """
    oi_messages: dict[tuple[str, int], dict[str, KeyValue]] = {}
    oi_documents: dict[int, dict[str, KeyValue]] = {}
    for kv in attributes:
        key = kv.key
        if key in MESSAGE_ATTRIBUTES:
            _set(kv, seal_messages(value_of(kv.value), seal))
        elif key in ARGUMENT_ATTRIBUTES or (key == "input.value" and tool_input):
            _set(kv, seal(arguments_text(value_of(kv.value))))
        elif key in DOCUMENT_ATTRIBUTES:
            _set(kv, seal_documents(value_of(kv.value), seal))
        elif key in TEXT_ATTRIBUTES or key.startswith(TEXT_PREFIXES):
            _seal_text(kv, seal)
        elif m := _OI_MESSAGE.match(key):
            oi_messages.setdefault((m.group(1), int(m.group(2))), {})[m.group(3)] = kv
        elif m := _OI_DOCUMENT.match(key):
            oi_documents.setdefault(int(m.group(1)), {})[m.group(2)] = kv
    removed: set[str] = set()
    added: list[KeyValue] = []
    for fields in oi_messages.values():
        _seal_oi_message(fields, seal, removed, added)
    for fields in oi_documents.values():
        _seal_oi_document(fields, seal, added)
    if removed or added:  # rebuilt from copies: no reference into the container outlives a removal
        kept = [KeyValue(key=kv.key, value=kv.value) for kv in attributes if kv.key not in removed]
        del attributes[:]
        attributes.extend(kept + added)


def _set(kv: KeyValue, text: str) -> None:
    kv.value.CopyFrom(AnyValue(string_value=text))


def _seal_text(kv: KeyValue, seal: Seal) -> None:
    """A text attribute as one sealed string; numbers and booleans stay (they hold no text)."""
    if kv.value.WhichOneof("value") in ("string_value", "array_value", "kvlist_value", "bytes_value"):
        _set(kv, seal(text_of(value_of(kv.value))))


def seal_messages(value: Any, seal: Seal) -> str:
    """GenAI messages (JSON text or a list) with their structure in clear and their texts sealed.

    :param value: the attribute's value
    :param seal: text -> sealed text
    :returns: the messages as JSON text (not a JSON list: the whole value sealed as one text)

    >>> seal_messages('[{"role": "user", "parts": [{"type": "text", "content": "a"}, '
    ...               '{"type": "text", "content": "b"}, {"type": "tool_call", "id": "c1", "name": "f", '
    ...               '"arguments": {"x": 1}}]}]', lambda t: f"<{t}>")
    '[{"role": "user", "parts": [{"type": "text", "content": "<a\\\\nb>"}, {"type": "tool_call", "id": "c1", \
"name": "f", "arguments": "<{\\\\"x\\\\": 1}>"}]}]'
    """
    messages = _json_list(value)
    if messages is None:
        return seal(text_of(value))
    return json.dumps([_seal_message(m, seal) if isinstance(m, dict) else seal(text_of(m)) for m in messages])


def _json_list(value: Any) -> list[Any] | None:
    """``value`` as a list: itself, or the JSON text of one; ``None`` when it is neither."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, list) else None


def _seal_message(message: dict[str, Any], seal: Seal) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in message.items():
        if key in CLEAR_MESSAGE_KEYS:
            out[key] = value
        elif key == "parts" and isinstance(value, list):
            out[key] = _seal_parts(value, seal, merge=not isinstance(message.get("content"), str))
        else:
            out[key] = _seal_value(value, seal)
    return out


def _seal_parts(parts: list[Any], seal: Seal, merge: bool) -> list[Any]:
    """A message's parts: with ``merge``, its text parts joined into the first one (the translation reads
    the message's text as their ``\\n``-joined contents)."""
    texts = [p["content"] for p in parts if _is_text(p)] if merge else []
    out: list[Any] = []
    for p in parts:
        if not isinstance(p, dict):
            out.append(_seal_value(p, seal))
        elif merge and _is_text(p):
            if texts:
                out.append(_seal_part({**p, "content": "\n".join(texts)}, seal))
                texts = []
        else:
            out.append(_seal_part(p, seal))
    return out


def _seal_part(part: dict[str, Any], seal: Seal) -> dict[str, Any]:
    """One part: its type (and a tool call's id and tool name) in clear, a tool call's arguments sealed as
    canonical JSON text, the rest sealed.

    >>> _seal_part({"type": "tool_call", "id": "c1", "name": "f", "arguments": '{"b":1}'}, lambda t: f"<{t}>")
    {'type': 'tool_call', 'id': 'c1', 'name': 'f', 'arguments': '<{"b": 1}>'}
    >>> _seal_part({"type": "file", "name": "alice.pdf"}, lambda t: "<>")
    {'type': 'file', 'name': '<>'}
    """
    kind = part.get("type")
    clear = CLEAR_TOOL_PART_KEYS if kind in TOOL_PARTS else {"type"}
    out: dict[str, Any] = {}
    for key, value in part.items():
        if key in clear:
            out[key] = value
        elif key == "arguments" and kind == "tool_call":
            out[key] = seal(arguments_text(value))
        else:
            out[key] = _seal_value(value, seal)
    return out


def _is_text(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("content"), str)


def _seal_value(value: Any, seal: Seal) -> Any:
    """A value that is not structure: a string sealed; a list or object sealed as its JSON text inside a
    one-element list (still not a string, so the translation, which reads only strings there, skips it as it
    skips the clear value); numbers, booleans, null kept.

    >>> _seal_value("a", lambda t: f"<{t}>"), _seal_value([{"text": "a"}], lambda t: f"<{t}>"), _seal_value(3, str)
    ('<a>', ['<[{"text": "a"}]>'], 3)
    """
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return seal(value)
    return [seal(text_of(value))]


def seal_documents(value: Any, seal: Seal) -> str:
    """``gen_ai.retrieval.documents``: each document keeps (or gets) its chunk id in clear, its texts sealed.

    >>> seal_documents('[{"id": "d1", "content": "x"}, {"content": "y"}]', lambda t: "<>")[:59]
    '[{"id": "d1", "content": "<>"}, {"id": "sha256:a1fce4363854'
    """
    documents = _json_list(value)
    if documents is None:
        return seal(text_of(value))
    out = []
    for d in documents:
        d = d if isinstance(d, dict) else {"content": text_of(d)}
        out.append({"id": chunk_id(d), **{k: _seal_value(v, seal) for k, v in d.items() if k != "id"}})
    return json.dumps(out)


def _seal_oi_message(fields: dict[str, KeyValue], seal: Seal, removed: set[str], added: list[KeyValue]) -> None:
    """One OpenInference flattened message: texts joined into ``message.content`` (as the translation joins
    them) and sealed, tool call arguments sealed canonical, the structure kept; the attributes to remove
    and to add are put in ``removed`` / ``added``."""
    texts: list[tuple[int, KeyValue]] = []
    for name, kv in fields.items():
        if _OI_CLEAR.match(name):
            continue
        if _OI_ARGUMENTS.match(name):
            _set(kv, seal(arguments_text(value_of(kv.value))))
        elif m := _OI_TEXT.match(name):
            texts.append((int(m.group(1)), kv))
        elif name != "content":
            _seal_text(kv, seal)
    content = fields.get("content")
    joined = [content.value.string_value] if content is not None and content.value.HasField("string_value") else []
    joined += [text_of(value_of(kv.value)) for _, kv in sorted(texts, key=lambda t: t[0])]
    if content is not None and not content.value.HasField("string_value") and content.value.WhichOneof("value") \
            in ("array_value", "kvlist_value", "bytes_value"):  # not a string: the translation does not read it
        text = seal(text_of(value_of(content.value)))
        content.value.CopyFrom(AnyValue(array_value=ArrayValue(values=[AnyValue(string_value=text)])))
    if not joined:
        return
    removed.update(kv.key for _, kv in texts)
    if content is not None and content.value.HasField("string_value"):
        _set(content, seal("\n".join(joined)))
    else:  # the texts were all in contents.N: they become the message's content
        first = min(texts, key=lambda t: t[0])[1]
        prefix = first.key.rsplit("contents.", 1)[0]
        added.append(KeyValue(key=prefix + "content", value=AnyValue(string_value=seal("\n".join(joined)))))


def _seal_oi_document(fields: dict[str, KeyValue], seal: Seal, added: list[KeyValue]) -> None:
    """One OpenInference retrieved document: its chunk id in clear (made from the clear text when missing,
    put in ``added``), its other texts sealed."""
    content = fields.get("content")
    if "id" not in fields and content is not None:
        prefix = content.key.removesuffix("content")
        added.append(KeyValue(key=prefix + "id",
                              value=AnyValue(string_value=chunk_id({"content": value_of(content.value)}))))
    for name, kv in fields.items():
        if name not in ("id", "score"):
            _seal_text(kv, seal)


__all__ = ["key_scopes", "seal_attributes", "seal_documents", "seal_messages", "seal_request"]
