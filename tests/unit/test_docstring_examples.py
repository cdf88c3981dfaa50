"""The examples in the public modules' docstrings run and say what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "provstream.codec",
    "provstream.core.fold",
    "provstream.core.vocab",
    "provstream.data",
    "provstream.security",
    "provstream.testing",
    "provstream.topics",
    "provstream.streams.faust_fence",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
