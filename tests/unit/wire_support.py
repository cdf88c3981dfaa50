"""Shared checks of the direct Avro writers and readers against fastavro."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import pytest
from hypothesis import strategies as st

from provstream.codec import avro as codec
from provstream.errors import EncodeError

T = TypeVar("T")


def assert_encodes_like_fastavro(encode: Callable[[T], bytes], fastavro: Callable[[T], bytes], value: T) -> None:
    """``encode(value)`` gives fastavro's bytes, or :class:`EncodeError` where fastavro fails."""
    try:
        expected: bytes | None = fastavro(value)
    except Exception:  # noqa: BLE001 - fastavro's own errors; the project's path must turn them into EncodeError
        expected = None
    if expected is None:
        with pytest.raises(EncodeError):
            encode(value)
    else:
        assert encode(value) == expected


def damaged(data: st.DataObject, messages: Sequence[bytes]) -> bytes:
    """One of ``messages`` with its body damaged: a byte changed, the tail cut off, or bytes inserted."""
    good = bytearray(data.draw(st.sampled_from(list(messages))))
    cut = data.draw(st.integers(codec.HEADER_LEN, len(good)))
    kind = data.draw(st.sampled_from(["flip", "truncate", "extend"]))
    if kind == "flip":
        good[min(cut, len(good) - 1)] = data.draw(st.integers(0, 255))
    elif kind == "truncate":
        del good[cut:]
    else:
        good[cut:cut] = data.draw(st.binary(min_size=1, max_size=12))
    return bytes(good)
