"""The bulk rebuild's pure parts: GraphImage (the sink's statements applied in memory) and its CSV files.

The imported graph is compared with the streamed one on a real Neo4j in
tests/bulk (``make bulk-tests``); these check the rules without servers.
"""

from __future__ import annotations

import csv
import gc
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from provstream.codec import records as wire
from provstream.connectors.bulk import server_env
from provstream.connectors.bulk_fold import ImageFold
from provstream.connectors.neo4j.csvfiles import ImportPlan, choose_delimiter, csv_type, write_csv
from provstream.connectors.neo4j.image import GraphImage, Moment
from provstream.connectors.neo4j.rows import Rows, build_rows
from provstream.core.triples import StepTriples
from provstream.errors import ProvstreamError
from provstream.gc_tuning import collector_paused
from provstream.settings import Settings
from provstream.testing import fold_all, load_trajectories, scenario, trajectory_events
from provstream.topics import retraction_record

START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def _messages() -> list[StepTriples]:
    records = load_trajectories()
    events = [e for i in range(3) for e in trajectory_events(records[i], f"s-{i}", START)]
    return fold_all([*events, *scenario(records, "scn", start=START)])


def _record(offset: int, value: bytes, key: bytes = b"k", headers: list[Any] | None = None) -> Any:
    return SimpleNamespace(topic="t", partition=0, offset=offset, key=key, value=value, headers=headers or [])


def _records(messages: list[StepTriples]) -> list[Any]:
    return [_record(i, wire.encode_triples(m), m.session_id.encode()) for i, m in enumerate(messages)]


def test_the_image_of_one_batch_or_many_is_the_same_for_clean_data() -> None:
    messages = _messages()
    one, many = ImageFold(), ImageFold()
    one.add(_records(messages))
    for record in _records(messages):
        many.add([record])
    dump = [(n.iri, sorted(n.labels), sorted(n.props.items(), key=str)) for n in one.image.nodes()]
    assert sorted(dump) == sorted((n.iri, sorted(n.labels), sorted(n.props.items(), key=str))
                                  for n in many.image.nodes())
    assert one.triples == sum(len(m.triples) for m in messages) and one.failures == []
    subjects = {t.s.value for m in messages for t in m.triples}
    assert subjects <= {n.iri for n in one.image.nodes()}


def test_status_never_regresses_and_lineage_keeps_the_first_offsets() -> None:
    messages = [m for m in _messages() if m.session_id == "s-0"]
    fold = ImageFold()
    fold.add(_records(messages))
    fold.add([_record(99, wire.encode_triples(messages[0]))])  # an older message redelivered
    question = next(n for n in fold.image.nodes() if n.iri == messages[0].question)
    assert question.props["steps"] == max(m.status.steps for m in messages)
    assert question.props["triplesOffset"] == 0 and question.props["triplesPartition"] == 0
    assert isinstance(question.props["startedAtTime"], Moment)
    assert "Question" in question.labels and "Resource" in question.labels


def test_types_and_chunks_are_appended_without_duplicates() -> None:
    messages = _messages()
    image = GraphImage()
    image.apply(build_rows(messages))
    image.apply(build_rows(messages))
    for node in image.nodes():
        for name in ("types", "selectedChunk", "extraLiterals"):
            values = node.props.get(name)
            assert values is None or (values and len(values) == len(set(values)))


def test_a_retraction_erases_the_session_and_its_orphans() -> None:
    messages = _messages()
    fold = ImageFold()
    fold.add(_records(messages))
    before = len(fold.image)
    erased = [m for m in messages if m.session_id == "scn-rag"]
    key, value, headers = retraction_record(erased[0].user, erased[0].collection, "scn-rag")
    fold.add([_record(1000, value, key, headers)])
    assert fold.retractions == 1 and len(fold.image) < before
    assert not any(n.props.get("session") == "scn-rag" for n in fold.image.nodes())
    ends = {r.start for r in fold.image.relationships()} | {r.end for r in fold.image.relationships()}
    assert all(n.props.get("user") is not None or n.iri in ends for n in fold.image.nodes())


def test_sessions_written_after_a_retraction_are_erased_whole_too() -> None:
    records = load_trajectories()
    s1, s2, s3 = (fold_all(trajectory_events(records[i], f"r-{i}", START)) for i in range(3))
    fold, only = ImageFold(), ImageFold()
    fold.add(_records(s1 + s2))
    fold.image.erase(s1[0].user, s1[0].collection, "r-0")  # the relationship index is built here
    fold.add(_records(s3))  # ... and kept up to date from here
    fold.image.erase(s3[0].user, s3[0].collection, "r-2")
    only.add(_records(s2))

    def graph(image: GraphImage) -> Any:
        return ({n.iri: (n.labels, {k: x for k, x in n.props.items() if not k.endswith(("Offset", "Partition"))})
                 for n in image.nodes()}, sorted((r.start, r.type, r.end) for r in image.relationships()))

    assert graph(fold.image) == graph(only.image) and graph(only.image)[1]


def test_undecodable_records_are_failures_like_the_sinks_dead_letters() -> None:
    fold = ImageFold()
    fold.add([_record(0, b"garbage"), *_records(_messages()[:2])])
    assert len(fold.failures) == 1 and fold.failures[0][1].startswith("undecodable triples message")
    assert fold.messages == 2


def _read(path: Path, delimiter: str) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    return rows[0], rows[1:]


def test_csv_files_carry_every_node_property_and_relationship(tmp_path: Path) -> None:
    fold = ImageFold()
    fold.add(_records(_messages()))
    plan = write_csv(fold.image, tmp_path)
    assert plan.nodes == len(fold.image) and plan.relationships == fold.image.relationship_count
    seen: dict[str, dict[str, str]] = {}
    for path in plan.node_files:
        header, rows = _read(path, plan.array_delimiter)
        assert header[:2] == ["iri:ID", ":LABEL"]
        for row in rows:
            seen[row[0]] = dict(zip(header, row, strict=True))
    for node in fold.image.nodes():
        cells = seen[node.iri]
        assert set(cells[":LABEL"].split(plan.array_delimiter)) == node.labels
        for name, value in node.props.items():
            if name == "iri" or value == []:
                continue
            column = f"{name}:{csv_type(name, value)}"
            expected = plan.array_delimiter.join(map(str, value)) if isinstance(value, list) else \
                value.text if isinstance(value, Moment) else str(value)
            assert cells[column] == expected
    rel_rows = [r for p in plan.relationship_files for r in _read(p, plan.array_delimiter)[1]]
    assert len(rel_rows) == plan.relationships
    open_question = [n for n in fold.image.nodes() if n.props.get("missingSteps") == []]
    assert sorted(plan.empty_lists.get("missingSteps", ())) == sorted(n.iri for n in open_question)


def test_import_arguments_put_the_database_first(tmp_path: Path) -> None:
    plan = ImportPlan((tmp_path / "n.csv",), (tmp_path / "r.csv",), "\x1f", True, 4 << 20, 1, 0, {})
    args = plan.arguments("neo4j")
    assert args[0] == "neo4j" and "--overwrite-destination=true" in args
    assert "--array-delimiter=U+001F" in args and "--multiline-fields=true" in args
    assert args[-2:] == (f"--nodes={tmp_path / 'n.csv'}", f"--relationships={tmp_path / 'r.csv'}")


def test_csv_cells_of_every_column_type_and_a_delimiter_that_avoids_the_lists(tmp_path: Path) -> None:
    image = GraphImage()
    image.apply(Rows(nodes=(
        {"iri": "urn:a", "labels": ["Question"], "types": [], "props": {"flag": True, "count": 3, "share": 0.5,
                                                                   "query": 'say "hi"\nthen stop'},
         "chunks": ["one\x1ftwo", "three"], "extra": [], "startedAtTime": "2025-03-01T09:00:00Z"},
        {"iri": "urn:b", "labels": [], "types": [], "props": {"flag": False, "count": 4, "share": 1.5,
                                                         "query": "q"},
         "chunks": ["four"], "extra": [], "startedAtTime": "2025-03-01T09:00:01Z"},
    )))
    image.apply(Rows(statuses=({"iri": "urn:a", "scope": {}, "status": "open", "steps": 2, "expectedSteps": None,
                                "lateSteps": None, "missingSteps": []},)))
    plan = write_csv(image, tmp_path)
    assert plan.array_delimiter == "\x1e" and plan.multiline  # \x1f is in a chunk, a line break in a query
    assert plan.empty_lists == {"missingSteps": ("urn:a",)}
    cells = {}
    for path in plan.node_files:
        header, rows = _read(path, plan.array_delimiter)
        cells.update({row[0]: dict(zip(header, row, strict=True)) for row in rows})
    assert cells["urn:a"]["flag:boolean"] == "true" and cells["urn:b"]["flag:boolean"] == "false"
    assert cells["urn:a"]["count:long"] == "3" and cells["urn:b"]["share:double"] == "1.5"
    assert cells["urn:a"]["query:string"] == 'say "hi"\nthen stop'
    assert cells["urn:a"]["selectedChunk:string[]"] == "one\x1ftwo\x1ethree"
    assert cells["urn:a"]["startedAtTime:datetime"] == "2025-03-01T09:00:00Z"
    assert cells["urn:a"][":LABEL"].split("\x1e") == ["Question", "Resource"]
    assert "missingSteps:long[]" not in cells["urn:a"] and cells["urn:a"]["steps:long"] == "2"


def test_csv_columns_of_every_shape_whether_its_signature_is_remembered_or_not(tmp_path: Path) -> None:
    class Texts(list[str]):
        pass

    image = GraphImage()
    nodes = [
        {"iri": "urn:a", "labels": [], "props": {"query": "q", "chunks": ["x"]}, "chunks": ["c"]},
        {"iri": "urn:b", "labels": [], "props": {"query": "é" * 2_000_000}, "chunks": ["c"]},  # 4 MB of UTF-8
        {"iri": "urn:c", "labels": [], "props": {"query": "q", "tags": Texts(["d", "e\x1f"])}, "chunks": ["c"]},
        {"iri": "urn:d", "labels": [], "props": {"query": "q", "n": [1, 2]}},
        {"iri": "urn:e", "labels": [], "props": {"query": "q", "n": []}},
        {"iri": "urn:g", "labels": [], "props": {"query": "q", "tags": Texts()}, "chunks": ["c"]},
    ]
    image.write(nodes)
    plan = write_csv(image, tmp_path)
    assert not plan.multiline and plan.read_buffer == 2 * 4_000_000 + 1024
    assert plan.empty_lists == {"n": ("urn:e",), "tags": ("urn:g",)}
    assert plan.array_delimiter == "\x1e"  # \x1f is in a list subclass's element
    cells, limit = {}, csv.field_size_limit(8 << 20)
    try:
        for path in plan.node_files:
            header, rows = _read(path, plan.array_delimiter)
            cells.update({row[0]: dict(zip(header, row, strict=True)) for row in rows})
    finally:
        csv.field_size_limit(limit)
    assert len(cells["urn:b"]["query:string"]) == 2_000_000
    assert cells["urn:a"]["chunks:string[]"] == "x" and cells["urn:a"]["selectedChunk:string[]"] == "c"
    assert cells["urn:c"]["tags:string[]"] == "d\x1ee\x1f" and cells["urn:d"]["n:long[]"] == "1\x1e2"
    assert "n:long[]" not in cells["urn:e"] and "tags:string[]" not in cells["urn:g"]
    image.write([{"iri": "urn:f", "labels": [], "props": {"mixed": [1, "a"]}}])
    for _ in range(2):  # the same shape again: refused again, not remembered
        with pytest.raises(ProvstreamError, match="unsupported value"):
            write_csv(image, tmp_path / "mixed")


def test_the_collector_is_paused_while_the_image_is_built_and_restored_after() -> None:
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause leaves it as the outer one set it
    assert gc.isenabled()
    with pytest.raises(RuntimeError), collector_paused():
        raise RuntimeError("a failed read")
    assert gc.isenabled()


def test_the_array_delimiter_avoids_the_values() -> None:
    assert choose_delimiter(["plain", "a;b"]) == "\x1f"
    assert choose_delimiter(["\x1f\x1e"]) == "\x1d"
    with pytest.raises(ProvstreamError, match="unsupported value"):
        csv_type("x", [1, "a"])


def test_the_server_restarts_on_the_ports_the_settings_use() -> None:
    settings = Settings(neo4j_uri="bolt://127.0.0.1:27687", neo4j_http="http://127.0.0.1:27474")
    assert server_env(settings) == {"PROVSTREAM_NEO4J_BOLT_PORT": "27687", "PROVSTREAM_NEO4J_HTTP_PORT": "27474"}
