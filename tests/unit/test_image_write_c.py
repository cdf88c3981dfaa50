"""The bulk rebuild's C write (``connectors/neo4j/_image_c.c``) against the Python fold it stands in for.

``GraphImage.write`` must leave the same image whichever applies the rows: the same
nodes and relationships in the same order, each node's class, labels and properties
in the same order, the same adjacency once ``erase()`` has built it, and, for rows
whose values make Python fail, the same exception with the image left as Python
leaves it. Rows of another form the C write refuses before changing anything, and
the Python fold applies them.
"""

from __future__ import annotations

import doctest
import gc
import os
import subprocess
import sys
import tracemalloc
from collections import UserDict
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provstream.connectors.neo4j import image as img
from provstream.connectors.neo4j.cypher import RELATIONSHIP_TYPES
from provstream.connectors.neo4j.image import GraphImage, Moment
from provstream.connectors.neo4j.rows import Row, batch_rows, lineage_rows
from provstream.core import vocab as v
from provstream.core.triples import StepTriples
from provstream.testing import fold_all, load_trajectories, scenario, sessions

NO_C = os.environ.get("PROVSTREAM_NO_C_EXTENSIONS", "") not in ("", "0")
try:
    from provstream.connectors.neo4j import _image_c
except ImportError:  # not built: only test_the_c_write_is_built_and_chosen says so
    _image_c = None  # type: ignore[assignment]
# configured (by image.py, at import) only when built and not switched off
needs_c = pytest.mark.skipif(_image_c is None or NO_C, reason="the C write is not built or is switched off")

START = datetime(2025, 3, 1, tzinfo=UTC)


def state(image: GraphImage) -> tuple[Any, ...]:
    return img._snapshot(image._nodes, image._rels, image._adjacent)


def c_write(image: GraphImage, rows: Any) -> None:
    _image_c.write(image._nodes, image._rels, image._adjacent, rows)


def py_write(image: GraphImage, rows: Any) -> None:
    img._write_py(image._nodes, image._rels, image._adjacent, rows)


def outcome(write: Any, image: GraphImage, rows: Any) -> tuple[Any, ...]:
    """The image after ``write``, and what it raised (class and text), if anything."""
    try:
        write(image, rows)
    except Exception as exc:  # noqa: BLE001 - compared with what the other write raises
        return state(image), type(exc), str(exc)
    return state(image), None, None


def twins(*batches: list[Row], adjacency: bool = False) -> tuple[GraphImage, GraphImage]:
    """Two images the Python fold wrote ``batches`` into (their adjacency built if asked)."""
    out = []
    for _ in range(2):
        image = GraphImage()
        for rows in batches:
            py_write(image, rows)
        if adjacency:
            image._adjacency()
        out.append(image)
    return out[0], out[1]


def test_the_c_write_is_built_and_chosen() -> None:
    if NO_C:
        assert img._WRITE is img._write_py
        return
    assert _image_c is not None, "the C extension was not built: pip install -e . (needs gcc and Python headers)"
    assert img._WRITE is not img._write_py
    chosen, python = GraphImage(), GraphImage()
    for rows in img._sample_rows():
        c_write(chosen, rows)
        py_write(python, rows)
    assert state(chosen) == state(python)


def test_provstream_no_c_extensions_keeps_the_python_write() -> None:
    check = "from provstream.connectors.neo4j import image; assert image._WRITE is image._write_py"
    subprocess.run([sys.executable, "-c", check], check=True, env={**os.environ, "PROVSTREAM_NO_C_EXTENSIONS": "1"})


@needs_c
def test_the_c_writes_examples_run() -> None:
    result = doctest.testmod(_image_c)
    assert result.attempted > 0 and result.failed == 0
    runner = doctest.DocTestRunner()
    for test in doctest.DocTestFinder().find(img._choose_write, globs=vars(img)):
        runner.run(test)
    assert runner.summarize(verbose=False).attempted > 0 and runner.summarize(verbose=False).failed == 0


def _messages() -> list[StepTriples]:
    records = load_trajectories()
    messages = [msg for events in sessions(records, "s", START, 40) for msg in fold_all(events)]
    return messages + fold_all(scenario(records, "sc", start=START))


def _batches(messages: list[StepTriples], size: int) -> list[list[Row]]:
    out = []
    for i in range(0, len(messages), size):
        batch = messages[i:i + size]
        lineage = [row for j, msg in enumerate(batch)
                   for row in lineage_rows(msg, (0, i + j) if j % 3 else None, (1, i + j))]
        out.append(batch_rows(batch, lineage)[1])
    return out


@needs_c
@pytest.mark.parametrize("size", [1, 7, 60, 10_000])
def test_the_bundled_trajectories_leave_the_same_image_batch_by_batch(size: int) -> None:
    messages = _messages()
    chosen, python = GraphImage(), GraphImage()
    # in order, redelivered and reordered; a retraction half-way builds the adjacency the writes then keep
    batches = _batches(messages, size) + _batches(messages[::-1], size)
    for i, rows in enumerate(batches):
        if i == len(batches) // 3:
            for image in (chosen, python):
                image.erase("trustgraph", "default", "s-3")
        chosen.write(rows)
        py_write(python, rows)
        assert state(chosen) == state(python)
    assert chosen._adjacent is not None and chosen._adjacent == python._adjacent
    assert len(chosen) > 100 and chosen.relationship_count > 100


@needs_c
def test_the_c_write_makes_its_nodes_and_moments_as_the_dataclasses_do() -> None:
    chosen, python = GraphImage(), GraphImage()
    for rows in img._sample_rows():
        c_write(chosen, rows)
        py_write(python, rows)
    for a, b in zip(chosen.nodes(), python.nodes(), strict=True):
        assert type(a) is type(b) and vars(a) == vars(b) and list(vars(a)) == list(vars(b))
        assert a.labels == b.labels and type(a.labels) is set
        for (name, x), (_, y) in zip(a.props.items(), b.props.items(), strict=True):
            assert type(x) is type(y), name
            if isinstance(x, Moment):
                assert vars(x) == vars(y) and x == y
    question = chosen._nodes["urn:q"].props
    assert question["types"] == ["t1", "t2", "t3", "t3"] and question["missingSteps"] == [1]
    assert question["startedAtTime"] == Moment("2025-03-01T09:00:00.000000Z") and "gone" not in question


@needs_c
def test_lists_are_copied_where_python_copies_them() -> None:
    types, missing, kept = ["t"], [1], [2]
    row = {"iri": "urn:a", "props": {"kept": kept}, "labels": [], "types": types, "status": "open", "steps": 1,
           "expectedSteps": None, "lateSteps": 0, "missingSteps": missing}
    for write in (c_write, py_write):
        image = GraphImage()
        write(image, [row])
        props = image._nodes["urn:a"].props
        assert props["types"] == types and props["types"] is not types
        assert props["missingSteps"] == missing and props["missingSteps"] is not missing
        assert props["kept"] is kept
        before = props["types"]
        write(image, [{"iri": "urn:a", "props": {}, "labels": [], "types": ["t"]}])
        assert props["types"] == ["t"] and props["types"] is not before  # old + [] is a new list


# -- generated rows, odd values included ------------------------------------------------

IRIS = ["urn:a", "urn:b", "urn:c", "urn:d"]
odd = st.sampled_from([float("nan"), 0, "", (), (1,), "ab", b"x", 2**70, True, Moment("m")])
scalars = st.none() | st.integers(-3, 3) | st.text(max_size=3) | st.sampled_from(IRIS) | odd
values = scalars | st.lists(scalars, max_size=3) | st.tuples(scalars)
names = st.sampled_from(["graph", "user", "session", "n", "steps", "types", "selectedChunk", "eventOffset",
                         "startedAtTime", "status", "missingSteps", "caption"])
appended = st.none() | st.lists(st.sampled_from(["x", "y", "z"]) | scalars, max_size=4) | st.tuples(scalars) | odd
relationship = st.fixed_dictionaries(
    {"o": st.sampled_from([*IRIS, "urn:missing"]), "graph": st.sampled_from([v.GRAPH, "urn:g2"])},
    optional={"predicate": st.none() | st.sampled_from(["urn:p", "urn:q"]) | st.lists(st.integers(), max_size=1)})
status = st.fixed_dictionaries({
    "status": st.sampled_from(["open", "complete"]) | scalars, "steps": st.integers(0, 4) | scalars,
    "expectedSteps": st.none() | st.integers(0, 4), "lateSteps": st.integers(0, 2) | scalars,
    "missingSteps": st.lists(st.integers(0, 4), max_size=2) | scalars})
lineage = st.fixed_dictionaries({name: st.none() | st.integers(0, 9) | scalars for name in img.LINEAGE_PROPS})


@st.composite
def rows(draw: st.DrawFn) -> Row:
    row: Row = {"iri": draw(st.sampled_from(IRIS)), "props": draw(st.dictionaries(names, values, max_size=5)),
                "labels": draw(st.lists(st.sampled_from(["Question", "Entity", "Activity"]), max_size=2)
                               | st.sampled_from([None, (), ("Entity",), "Question"]))}
    if draw(st.booleans()):
        row["graph"] = draw(st.sampled_from([v.GRAPH, "urn:g2", None]) | scalars)
    for key in ("types", "chunks", "extra"):
        if draw(st.booleans()):
            row[key] = draw(appended)
    if draw(st.booleans()):
        row["startedAtTime"] = draw(st.none() | st.text(max_size=3))
    if draw(st.booleans()):
        row.update(draw(status))
    if draw(st.booleans()):
        row["lineage"] = draw(st.none() | lineage)
    for rel_type in RELATIONSHIP_TYPES:
        if draw(st.integers(0, 2)) == 0:
            row[rel_type] = draw(st.lists(relationship, max_size=3) | st.none())
    return row


batches = st.lists(rows(), max_size=5)


@needs_c
@settings(max_examples=1500, deadline=None)
@given(batches, batches, st.booleans())
def test_any_rows_leave_the_python_image_or_fail_as_python_does(first: list[Row], second: list[Row],
                                                                 adjacency: bool) -> None:
    python, chosen, direct = (GraphImage() for _ in range(3))
    for image in (python, chosen, direct):  # the same start, even where Python fails on the first batch
        outcome(py_write, image, first)
        if adjacency:
            image._adjacency()
    expected = outcome(py_write, python, second)
    assert outcome(lambda image, rows: image.write(rows), chosen, second) == expected
    assert outcome(c_write, direct, second) == expected  # these rows have the form the C write takes


@needs_c
@pytest.mark.parametrize("rows", [
    [{"iri": "urn:a", "props": {"steps": "x"}, "labels": []},
     {"iri": "urn:a", "props": {}, "labels": [], "status": "s", "steps": 2, "expectedSteps": 1, "lateSteps": 0,
      "missingSteps": []}],  # "x" <= 2
    [{"iri": "urn:a", "props": {}, "labels": [], "types": ["t"]},
     {"iri": "urn:b", "props": {}, "labels": [], "chunks": 5}],  # list(5)
    [{"iri": "urn:a", "props": {"types": "abc"}, "labels": []},
     {"iri": "urn:a", "props": {}, "labels": [], "types": ["b", 1]}],  # 1 in "abc"
    [{"iri": "urn:a", "props": {"selectedChunk": (1,)}, "labels": []},
     {"iri": "urn:a", "props": {}, "labels": [], "chunks": [2]}],  # (1,) + [2]
    [{"iri": "urn:a", "props": {}, "labels": [[1]]}],  # an unhashable label
    [{"iri": "urn:a", "props": {}, "labels": [], "LINK": [{"o": "urn:a", "graph": "g", "predicate": ["p"]}]}],
    [{"iri": "urn:a", "props": {}, "labels": [], "LINK": [{"o": "urn:a", "graph": "g"}],
      "wasDerivedFrom": [{"o": ["unhashable"], "graph": "g"}]}],
])
def test_values_python_fails_on_fail_the_c_write_at_the_same_point(rows: list[Row]) -> None:
    python, chosen = twins(adjacency=True)
    expected = outcome(py_write, python, rows)
    assert expected[1] is not None
    assert outcome(c_write, chosen, rows) == expected


class Row2(dict[str, Any]):
    pass


class Group(list[Any]):
    pass


_status = {"status": "open", "steps": 1, "expectedSteps": 1, "lateSteps": 0, "missingSteps": []}
_REFUSED: list[Any] = [
    ({"iri": "urn:a", "props": {}, "labels": []},),  # a tuple of rows
    [Row2(iri="urn:a", props={}, labels=[])],  # a dict subclass
    [UserDict({"iri": "urn:a", "props": {}, "labels": []})],  # a mapping
    [{"iri": 7, "props": {}, "labels": []}],  # an IRI not a str
    [{"iri": "urn:a", "props": MappingProxyType({"n": 1}), "labels": []}],  # props not a dict
    [{"iri": "urn:a", "props": {}}],  # no labels: KeyError
    [{"props": {}, "labels": []}],  # no IRI: KeyError
    [{"iri": "urn:a", "props": {}, "labels": [], **{k: x for k, x in _status.items() if k != "lateSteps"}}],
    [{"iri": "urn:a", "props": {}, "labels": [], "lineage": MappingProxyType(dict.fromkeys(img.LINEAGE_PROPS, 1))}],
    [{"iri": "urn:a", "props": {}, "labels": [], "lineage": {"eventOffset": 1}}],
    [{"iri": "urn:a", "props": {}, "labels": [], "LINK": ({"o": "urn:a", "graph": "g"},)}],  # a tuple group
    [{"iri": "urn:a", "props": {}, "labels": [], "LINK": Group([{"o": "urn:a", "graph": "g"}])}],
    [{"iri": "urn:a", "props": {}, "labels": [], "LINK": [Row2(o="urn:a", graph="g")]}],
    [{"iri": "urn:a", "props": {}, "labels": [], "LINK": [{"o": "urn:a"}]}],  # no graph: KeyError
    [{"iri": "urn:a", "props": {}, "labels": []}, "not a row"],  # the second row: nothing applied either
]


@needs_c
@pytest.mark.parametrize("rows", _REFUSED)
def test_rows_the_c_write_does_not_take_are_refused_untouched_and_applied_in_python(rows: Any) -> None:
    python, chosen = twins([{"iri": "urn:a", "props": {"n": 0}, "labels": ["Entity"]}], adjacency=True)
    before = state(chosen)
    with pytest.raises(_image_c.Unsupported):
        c_write(chosen, rows)
    assert state(chosen) == before
    expected = outcome(py_write, python, list(rows))
    assert outcome(lambda image, r: image.write(r), chosen, rows) == expected


@needs_c
def test_image_dicts_of_other_classes_are_refused() -> None:
    image = GraphImage()
    row = {"iri": "urn:a", "props": {}, "labels": []}
    for nodes, rels, adjacent in (
            (Row2(), {}, None), ({}, Row2(), None), ({}, {}, Row2()), ({}, {}, [])):
        with pytest.raises(_image_c.Unsupported):
            _image_c.write(nodes, rels, adjacent, [row])
        assert not nodes and not rels and not adjacent
    image.write(iter([row]))  # any iterable of rows, as before
    assert [n.iri for n in image.nodes()] == ["urn:a"]


@needs_c
def test_the_configuration_is_checked() -> None:
    good = img._settings()
    for change in ({"ImageNode": dict}, {"RESOURCE": 1}, {"STATUS_PROPS": ("a",) * 5}, {"APPENDED": ()},
                   {"RELATIONSHIP_TYPES": ("props",)}, {"LINEAGE_PROPS": ("a", "b", "c")}):
        with pytest.raises((TypeError, KeyError)):
            _image_c.configure({**good, **change})
        with pytest.raises(_image_c.Unsupported):
            _image_c.write({}, {}, None, [{"iri": "urn:a", "props": {}, "labels": []}])
    with pytest.raises(KeyError):
        _image_c.configure({k: x for k, x in good.items() if k != "Moment"})
    _image_c.configure(good)
    test_the_c_write_is_built_and_chosen()


@needs_c
def test_the_c_write_leaks_nothing() -> None:
    batches = _batches(_messages(), 50)
    refused = [{"iri": "urn:a", "props": {}, "labels": []}, {"iri": "urn:b", "props": MappingProxyType({})}]
    failing = [{"iri": "urn:a", "props": {"types": "abc"}, "labels": []},
               {"iri": "urn:a", "props": {}, "labels": [], "types": ["b", 1]}]

    def once() -> None:
        image = GraphImage()
        image._adjacency()
        for rows in batches:
            c_write(image, rows)
        with pytest.raises(_image_c.Unsupported):
            c_write(image, refused)
        with pytest.raises(TypeError):
            c_write(image, failing)

    for _ in range(5):  # warm caches and interned values first
        once()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(40):
            once()
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert grown < 64_000, f"{grown} bytes more after 40 images"
