"""Avro single-object encoding over the repo's ``.avsc`` schemas.

Wire format (Avro spec, "Single object encoding"): ``C3 01`` + the 8-byte
little-endian CRC-64-AVRO fingerprint of the writer schema's parsing canonical
form + the schemaless Avro body. Decoding looks the fingerprint up among the
current schemas and every historical version kept in ``schemas/history/`` and
resolves the body to the current (reader) schema. Schemas are parsed once per
process.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from fastavro import schemaless_reader, schemaless_writer
from fastavro.schema import fingerprint, load_schema, to_parsing_canonical_form

from provstream.errors import DecodeError, EncodeError

MAGIC = b"\xc3\x01"
HEADER_LEN = 10
# Top-level message types, by full name.
EVENT = "provstream.Event"
STEP_TRIPLES = "provstream.StepTriples"


@dataclass(frozen=True)
class _Schema:
    name: str
    parsed: Any
    fingerprint: bytes


def schema_dir() -> Path:
    """The installed ``provstream/schemas`` folder (top-level ``schemas/`` in the repo)."""
    return Path(str(resources.files("provstream.schemas")))


def _load(path: Path) -> _Schema:
    parsed: Any = load_schema(str(path))
    fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(parsed), "CRC-64-AVRO"))
    return _Schema(parsed["name"], parsed, fp)


@cache
def _registry() -> tuple[dict[str, _Schema], dict[bytes, _Schema]]:
    folder = schema_dir()
    current = {name: _load(folder / f"{name}.avsc") for name in (EVENT, STEP_TRIPLES)}
    writers = {s.fingerprint: s for s in current.values()}
    history = folder / "history"
    if history.is_dir():
        for path in sorted(history.glob("*/provstream.*.avsc")):
            old = _load(path)
            if old.name in current:
                writers.setdefault(old.fingerprint, old)
    return current, writers


def current_fingerprint(name: str) -> bytes:
    """The 8-byte CRC-64-AVRO fingerprint of the current schema ``name`` (as written in message headers)."""
    return _registry()[0][name].fingerprint


def encode(name: str, record: dict[str, Any]) -> bytes:
    """Frame ``record`` (an Avro-ready dict) as a single-object message."""
    schema = _registry()[0][name]
    buf = io.BytesIO()
    buf.write(MAGIC)
    buf.write(schema.fingerprint)
    try:
        schemaless_writer(buf, schema.parsed, record)
    except (ValueError, TypeError, KeyError, AttributeError, OverflowError, struct.error) as exc:
        raise EncodeError(f"cannot encode {name}: {exc}") from exc
    return buf.getvalue()


def _reader_for(writer: _Schema, current: _Schema) -> Any:
    """The reader schema, or ``None`` when it is the writer's own (no resolution needed)."""
    return None if writer.fingerprint == current.fingerprint else current.parsed


def decode(name: str, data: bytes) -> dict[str, Any]:
    """Decode a single-object message whose writer schema is any known version of ``name``."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise DecodeError(f"expected bytes, got {type(data).__name__}")
    if len(data) < HEADER_LEN:
        raise DecodeError(f"message too short for a single-object header ({len(data)} bytes)")
    if data[:2] != MAGIC:
        raise DecodeError(f"wrong magic {bytes(data[:2]).hex()} (expected c301): not Avro single-object encoding")
    current, writers = _registry()
    writer = writers.get(bytes(data[2:HEADER_LEN]))
    if writer is None:
        raise DecodeError(f"unknown schema fingerprint {bytes(data[2:HEADER_LEN]).hex()}")
    if writer.name != name:
        raise DecodeError(f"message is a {writer.name}, expected {name}")
    body = io.BytesIO(data[HEADER_LEN:])
    try:
        record: Any = schemaless_reader(
            body, writer.parsed, _reader_for(writer, current[name]),
            return_record_name=True, return_record_name_override=True,
        )
    except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeDecodeError, ...
        raise DecodeError(f"corrupt {name} body: {type(exc).__name__}: {exc}") from exc
    if body.tell() != len(data) - HEADER_LEN:
        raise DecodeError(f"{len(data) - HEADER_LEN - body.tell()} trailing bytes after the {name} body")
    return record  # type: ignore[no-any-return]
