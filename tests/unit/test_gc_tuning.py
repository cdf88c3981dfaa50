"""The collector tuning of provstream's own processes (provstream.gc_tuning)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from provstream.errors import ConfigError
from provstream.settings import Settings

_PROBE = """
import gc, json
from provstream.gc_tuning import tune_gc
from provstream.settings import Settings
before = gc.get_threshold()
after = tune_gc(Settings(gc_gen0={gen0}))
print(json.dumps({{"before": before, "after": after, "now": gc.get_threshold(), "frozen": gc.get_freeze_count()}}))
"""


def _probe(gen0: int) -> dict[str, list[int] | int]:
    """Run tune_gc in a fresh interpreter (the test runner's own collector stays as it is)."""
    done = subprocess.run([sys.executable, "-c", _PROBE.format(gen0=gen0)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def test_the_young_generation_is_deepened_and_start_up_objects_frozen() -> None:
    got = _probe(100_000)
    assert got["before"] == [700, 10, 10]
    assert got["after"] == got["now"] == [100_000, 10, 10]
    assert isinstance(got["frozen"], int) and got["frozen"] > 1000  # the imported modules' objects


def test_zero_leaves_pythons_collector_alone() -> None:
    got = _probe(0)
    assert got["after"] == got["now"] == [700, 10, 10]
    assert got["frozen"] == 0


def test_the_default_and_the_variable() -> None:
    assert Settings().gc_gen0 == 100_000
    assert Settings.from_env({"PROVSTREAM_GC_GEN0": "0"}).gc_gen0 == 0
    with pytest.raises(ConfigError, match="PROVSTREAM_GC_GEN0"):
        Settings.from_env({"PROVSTREAM_GC_GEN0": "-1"})
