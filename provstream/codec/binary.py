"""Avro binary encoding primitives for the direct writers in :mod:`provstream.codec.records`.

Avro spec, "Binary Encoding": int/long are zig-zag varints; string = long
byte length + UTF-8; enum = int index; union = long branch index + value;
boolean = one byte; array = long count + items, then 0 (empty: just 0);
record = its fields in schema order. Every function raises (``TypeError``,
``AttributeError``, ``UnicodeEncodeError``) for a value Avro would not take,
so a caller can fall back to fastavro, which reports it as the project's
:class:`EncodeError`.
"""

from __future__ import annotations

INT_MIN, INT_MAX, LONG_MIN, LONG_MAX = -(2**31), 2**31 - 1, -(2**63), 2**63 - 1


def zigzag(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


SMALL = [zigzag(n) for n in range(4096)]  # varints of 0..4095 (string lengths, counts, small ints)


def long(n: int, low: int = LONG_MIN, high: int = LONG_MAX) -> bytes:
    if type(n) is not int or not low <= n <= high:
        raise TypeError(f"not an Avro number: {n!r}")
    return SMALL[n] if 0 <= n < 4096 else zigzag(n)


def int_(n: int) -> bytes:
    return long(n, INT_MIN, INT_MAX)


def string(value: str) -> bytes:
    data = value.encode()
    n = len(data)
    return (SMALL[n] if n < 4096 else zigzag(n)) + data


def strings(values: tuple[str, ...] | list[str]) -> bytes:
    """An array of strings."""
    if not values:
        return b"\x00"
    return long(len(values)) + b"".join(map(string, values)) + b"\x00"


def ints(values: tuple[int, ...] | list[int]) -> bytes:
    """An array of ints."""
    if not values:
        return b"\x00"
    return long(len(values)) + b"".join(map(int_, values)) + b"\x00"
