"""The Faust fence: pinned versions, and every upstream function the worker patches or relies on unchanged."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from provstream.errors import ConfigError
from provstream.streams import faust_fence

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@pytest.mark.parametrize("target", sorted(faust_fence.UPSTREAM))
def test_upstream_function_is_the_one_the_patches_were_written_against(target: str) -> None:
    assert faust_fence.fingerprint(target) == faust_fence.UPSTREAM[target], (
        f"{target} changed upstream: re-read it, re-check the patch or accessor in provstream.streams "
        "that depends on it, then update its fingerprint in streams/faust_fence.py")


def test_an_edited_fingerprint_is_reported_by_name() -> None:
    target = "faust.transport.consumer:Consumer._drain_messages"
    edited = {**faust_fence.UPSTREAM, target: "0" * 16}
    changed = faust_fence.changed_upstream(edited)
    assert len(changed) == 1 and changed[0].startswith(target)


def test_a_vanished_function_is_reported() -> None:
    changed = faust_fence.changed_upstream({"faust.tables.recovery:Recovery.no_such_method": "0" * 16})
    assert changed and "no_such_method not found" in changed[0]


def test_pyproject_pins_exactly_the_fenced_versions() -> None:
    text = PYPROJECT.read_text(encoding="utf-8")
    for name, version in faust_fence.PINNED.items():
        pin = rf'"{re.escape(name)}=={re.escape(version)}"'
        assert re.search(pin, text), f"pyproject.toml must pin {name}=={version}"


def test_installed_versions_match_and_others_are_refused() -> None:
    faust_fence.check_versions()
    with pytest.raises(ConfigError, match=r"aiokafka 0\.13\.0 \(needs 0\.14\.0\)"):
        faust_fence.check_versions({"faust-streaming": "0.15.3", "aiokafka": "0.13.0"})
    with pytest.raises(ConfigError, match=r"faust-streaming None"):
        faust_fence.check_versions({"aiokafka": "0.14.0"})


def test_a_cython_method_is_fingerprinted_from_its_pyx_source() -> None:
    source = "cdef class It:\n    cdef public object x\n\n    async def next(self):\n        await sleep(0)\n\n" \
             "        return 1\n\n    cpdef object after(self):\n        pass\n"
    assert faust_fence._pyx_segment(source, "It.next", "t") == \
        "    async def next(self):\n        await sleep(0)\n\n        return 1\n"
    with pytest.raises(LookupError, match="gone not found"):
        faust_fence._pyx_segment(source, "It.gone", "t")
