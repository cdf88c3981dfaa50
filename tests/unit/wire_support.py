"""Shared checks of the direct Avro writers against fastavro."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest

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
