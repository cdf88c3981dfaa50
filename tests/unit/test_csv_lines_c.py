"""The bulk rebuild's C CSV lines (``connectors/neo4j/_csv_c.c``) against the csv module they stand in for.

``write_csv`` must write the same bytes, and find the same longest text cell and
line breaks, whichever writes the lines; what the C lines do not take they leave
to the csv module.
"""

from __future__ import annotations

import enum
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provstream.codec import records as wire
from provstream.connectors.bulk_fold import ImageFold
from provstream.connectors.neo4j import csvfiles
from provstream.connectors.neo4j.image import ImageNode, ImageRelationship, Moment
from provstream.testing import fold_all, load_trajectories, scenario, trajectory_events

NO_C = os.environ.get("PROVSTREAM_NO_C_EXTENSIONS", "") not in ("", "0")
try:
    from provstream.connectors.neo4j import _csv_c
except ImportError:  # not built: only test_the_c_lines_are_built_and_chosen says so
    _csv_c = None  # type: ignore[assignment]
needs_c = pytest.mark.skipif(_csv_c is None or NO_C, reason="the C lines are not built or are switched off")

SIGNATURE: csvfiles.Signature = (("a", "string"), ("b", "long"), ("c", "double"), ("d", "boolean"),
                                 ("e", "datetime"), ("f", "string[]"), ("g", "long[]"), ("h", "double[]"))
DELIMITERS = ("\x1f", "\ue000")
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def c_nodes(nodes: list[ImageNode], signature: csvfiles.Signature, delimiter: str) -> csvfiles.Lines:
    columns = csvfiles._columns(signature)
    assert columns is not None
    return _csv_c.node_lines(nodes, *columns, delimiter)


def test_the_c_lines_are_built_and_chosen() -> None:
    if NO_C:
        assert csvfiles._NODE_LINES is csvfiles._node_lines_py
        return
    assert _csv_c is not None, "the C extension was not built: pip install -e . (needs gcc and Python headers)"
    assert csvfiles._NODE_LINES is not csvfiles._node_lines_py
    assert csvfiles._RELATIONSHIP_LINES is not csvfiles._relationship_lines_py
    nodes, _, signature, _ = csvfiles._sample()
    assert c_nodes(nodes, signature, "\x1f") == csvfiles._node_lines_py(nodes, signature, "\x1f")


def test_provstream_no_c_extensions_keeps_the_csv_module() -> None:
    check = ("from provstream.connectors.neo4j import csvfiles as c; "
             "assert c._NODE_LINES is c._node_lines_py and c._RELATIONSHIP_LINES is c._relationship_lines_py")
    subprocess.run([sys.executable, "-c", check], check=True, env={**os.environ, "PROVSTREAM_NO_C_EXTENSIONS": "1"})


texts = st.text(st.characters(codec="utf-8", exclude_characters=DELIMITERS), max_size=12) | st.sampled_from(
    ['"', '""', "\n", "\r\n", "", "é€😀", 'a"b\nc'])
longs = st.integers(min_value=-(2**80), max_value=2**80)
doubles = st.floats(allow_nan=False)
node = st.builds(
    lambda iri, labels, a, b, c, d, e, f, g, h: ImageNode(
        iri, labels, {"a": a, "b": b, "c": c, "d": d, "e": Moment(e), "f": f, "g": g, "h": h}),
    texts, st.sets(texts.filter(bool), min_size=1, max_size=3), texts, longs, doubles, st.booleans(), texts,
    st.lists(texts, min_size=1, max_size=3), st.lists(longs, min_size=1, max_size=3),
    st.lists(doubles, min_size=1, max_size=3))


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.lists(node, max_size=6), st.sampled_from(DELIMITERS))
def test_any_nodes_give_the_csv_modules_bytes_longest_cell_and_line_breaks(nodes: list[ImageNode],
                                                                         delimiter: str) -> None:
    assert c_nodes(nodes, SIGNATURE, delimiter) == csvfiles._node_lines_py(nodes, SIGNATURE, delimiter)


@needs_c
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(texts, texts, texts, texts), max_size=6), texts, st.sampled_from(DELIMITERS))
def test_any_relationships_give_the_csv_modules_bytes(rows: list[tuple[str, str, str, str]], rel_type: str,
                                                      delimiter: str) -> None:
    signature: csvfiles.Signature = (("graph", "string"), ("predicate", "string"))
    rels = [ImageRelationship(s, rel_type, e, {"graph": g, "predicate": p}) for s, e, g, p in rows]
    columns = csvfiles._columns(signature)
    assert columns is not None
    assert _csv_c.relationship_lines(rels, rel_type, *columns, delimiter) == csvfiles._relationship_lines_py(
        rels, rel_type, signature, delimiter)


class Level(enum.IntEnum):
    HIGH = 3


class Text(str):
    pass


@needs_c
@pytest.mark.parametrize(("name", "value"), [
    ("a", Text("sub")), ("b", Level.HIGH), ("b", True), ("c", 1), ("d", 1), ("e", "not a moment"),
    ("f", ["x", Text("y")]), ("f", ("x",)), ("g", [1, True]), ("h", [1.5, 2]),
])
def test_values_the_c_lines_do_not_take_are_written_by_the_csv_module(name: str, value: Any) -> None:
    nodes, _, signature, _ = csvfiles._sample()
    nodes[1].props[name] = value
    with pytest.raises(_csv_c.Unsupported):
        c_nodes(nodes, signature, "\x1f")
    try:
        expected: Any = csvfiles._node_lines_py(nodes, signature, "\x1f")
    except Exception as exc:  # noqa: BLE001 - then the chosen writer must fail the same way
        with pytest.raises(type(exc)):
            csvfiles._NODE_LINES(nodes, signature, "\x1f")
        return
    assert csvfiles._NODE_LINES(nodes, signature, "\x1f") == expected


@needs_c
def test_properties_not_held_in_a_dict_or_a_type_with_no_code_go_to_the_csv_module() -> None:
    rels = [ImageRelationship("urn:a", "LINK", "urn:b", MappingProxyType({"graph": "g"}))]
    signature: csvfiles.Signature = (("graph", "string"),)
    assert csvfiles._RELATIONSHIP_LINES(rels, "LINK", signature, "\x1f") == csvfiles._relationship_lines_py(
        rels, "LINK", signature, "\x1f")
    nodes = [ImageNode("urn:a", {"Resource"}, {"flags": [True, False]})]
    assert csvfiles._columns((("flags", "boolean[]"),)) is None
    assert csvfiles._NODE_LINES(nodes, (("flags", "boolean[]"),), "\x1f") == (
        b'"urn:a","Resource","true\x1ffalse"\n', 10, False)


def test_the_files_of_the_bundled_trajectories_are_the_same_bytes_either_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    records = load_trajectories()
    events = [e for i in range(12) for e in trajectory_events(records[i], f"s-{i}", START)]
    messages = fold_all([*events, *scenario(records, "scn", start=START)])
    fold = ImageFold()
    fold.add([SimpleNamespace(topic="t", partition=0, offset=i, key=m.session_id.encode(),
                              value=wire.encode_triples(m), headers=[]) for i, m in enumerate(messages)])
    monkeypatch.setattr(csvfiles, "CHUNK", 7)  # chunk boundaries inside every file
    chosen = csvfiles.write_csv(fold.image, tmp_path / "chosen")
    monkeypatch.setattr(csvfiles, "_NODE_LINES", csvfiles._node_lines_py)
    monkeypatch.setattr(csvfiles, "_RELATIONSHIP_LINES", csvfiles._relationship_lines_py)
    monkeypatch.setattr(csvfiles, "CHUNK", 100_000)
    python = csvfiles.write_csv(fold.image, tmp_path / "python")
    assert chosen.read_buffer == python.read_buffer and chosen.multiline == python.multiline
    assert [p.name for p in chosen.node_files] == [p.name for p in python.node_files]
    for a, b in zip((*chosen.node_files, *chosen.relationship_files),
                    (*python.node_files, *python.relationship_files), strict=True):
        assert a.read_bytes() == b.read_bytes()


class Texts(list[str]):
    pass


values = st.recursive(
    st.none() | st.booleans() | longs | doubles | texts | st.sampled_from(["\x1c", "a\ue0ff", "\ue100", "\x1b"])
    | st.builds(Moment, texts),
    lambda inner: st.lists(inner, max_size=3) | st.builds(Texts, st.lists(texts, max_size=2))
    | st.tuples(inner) | st.dictionaries(texts, inner, max_size=1),
    max_leaves=6)


def c_shape(props: Any) -> tuple[Any, set[str], list[str]]:
    candidates: set[str] = set()
    empty: list[str] = []
    return _csv_c.shape_key(props, csvfiles._KNOWN_CLASSES, candidates, empty), candidates, empty


def py_shape(props: Any) -> tuple[Any, set[str], list[str]]:
    candidates: set[str] = set()
    empty: list[str] = []
    return csvfiles._shape_key_py(props, candidates, empty), candidates, empty


def test_the_c_shape_key_is_chosen() -> None:
    if NO_C:
        assert csvfiles._SHAPE_KEY is csvfiles._shape_key_py
    else:
        assert csvfiles._SHAPE_KEY is not csvfiles._shape_key_py


@needs_c
@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=3), values, max_size=5))
def test_any_properties_give_the_same_shape_key_empty_lists_and_candidates(props: dict[str, Any]) -> None:
    assert c_shape(props) == py_shape(props)
    assert _csv_c.shape_key(props, csvfiles._KNOWN_CLASSES, None, None) == py_shape(props)[0]


@needs_c
def test_the_c_shape_key_notes_exactly_the_delimiter_candidates() -> None:
    for candidate in csvfiles.DELIMITER_CANDIDATES:
        assert c_shape({"l": ["a" + candidate]})[1] == {candidate}
    for other in ("\x1b", "\x20", "\udfff", "\ue100", "\n", "é"):
        assert c_shape({"l": ["a" + other]})[1] == set()


@needs_c
def test_properties_not_held_in_a_dict_take_the_python_shape_key() -> None:
    props = MappingProxyType({"l": [], "n": 1})
    with pytest.raises(_csv_c.Unsupported):
        c_shape(props)
    empty: list[str] = []
    assert csvfiles._SHAPE_KEY(props, None, empty) == (("l", "n"), (list, int), (None,)) and empty == ["l"]
