"""The bulk rebuild's fold in parts: each part's files together are the files one fold writes.

Pure: records are made in memory, each part is folded here (the processes and
Kafka are exercised by tests/bulk, ``make bulk-tests``).
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.structs import TopicPartition

from provstream.codec import records as wire
from provstream.connectors.bulk import bulk_processes
from provstream.connectors.bulk_fold import (
    FOLD_BATCH,
    ImageFold,
    Part,
    PartReport,
    conflict,
    shared_image,
    split_ranges,
)
from provstream.connectors.neo4j.csvfiles import ImportPlan, free_delimiter, merge_plans, write_csv
from provstream.core import vocab as v
from provstream.core.triples import Iri, StepTriples, Triple
from provstream.errors import ConfigError
from provstream.settings import Settings
from provstream.testing import fold_all, load_trajectories, scenario, trajectory_events
from provstream.topics import retraction_record

START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
SHARED = "urn:test:shared-entity"


def _messages() -> list[StepTriples]:
    records = load_trajectories()
    events = [e for i in range(4) for e in trajectory_events(records[i], f"s-{i}", START)]
    return fold_all([*events, *scenario(records, "scn", start=START)])


def _with_shared_object(messages: list[StepTriples]) -> list[StepTriples]:
    """Every session's first message also names one IRI no session describes (an object-only node)."""
    out, named = [], set()
    for m in messages:
        if m.session_id not in named:
            named.add(m.session_id)
            subject = m.triples[0].s
            m = replace(m, triples=(*m.triples, Triple(subject, Iri(v.PROV + "used"), Iri(SHARED))))
        out.append(m)
    return out


def _records(messages: list[StepTriples], partitions: int) -> list[Any]:
    """Records as the worker writes them: keyed by session, a session's records in one partition, in order."""
    sessions = sorted({m.session_id for m in messages})
    offsets: Counter[int] = Counter()
    out = []
    for m in messages:
        p = sessions.index(m.session_id) % partitions
        out.append(SimpleNamespace(topic="t", partition=p, offset=offsets[p], key=m.session_id.encode(),
                                   value=wire.encode_triples(m), headers=[]))
        offsets[p] += 1
    return out


def _retraction(m: StepTriples, partition: int, offset: int) -> Any:
    key, value, headers = retraction_record(m.user, m.collection, m.session_id)
    return SimpleNamespace(topic="t", partition=partition, offset=offset, key=key, value=value, headers=headers)


def _files(plan: ImportPlan) -> tuple[dict[str, dict[str, str]], Counter[tuple[str, ...]]]:
    """Every node (IRI -> its cells by column) and every relationship row of a plan's files."""
    nodes: dict[str, dict[str, str]] = {}
    for path in plan.node_files:
        with path.open(newline="", encoding="utf-8") as f:
            header, *rows = list(csv.reader(f))
        for row in rows:
            assert row[0] not in nodes, f"{row[0]} written twice"
            nodes[row[0]] = {name: cell for name, cell in zip(header, row, strict=True)}
    rels: Counter[tuple[str, ...]] = Counter()
    for path in plan.relationship_files:
        with path.open(newline="", encoding="utf-8") as f:
            header, *rows = list(csv.reader(f))
        rels.update(tuple(f"{name}={cell}" for name, cell in zip(header, row, strict=True)) for row in rows)
    return nodes, rels


def _in_parts(records: list[Any], partitions: int) -> tuple[list[PartReport], list[Part]]:
    parts = [Part() for _ in range(partitions)]
    for p, part in enumerate(parts):
        mine = [r for r in records if r.partition == p]
        for i in range(0, len(mine), 7):  # small batches: the parts' batches differ from the single fold's
            part.fold.add(mine[i:i + 7])
    return [part.report() for part in parts], parts


def test_parts_merged_write_what_one_fold_writes(tmp_path: Path) -> None:
    messages = _with_shared_object(_messages())
    records = _records(messages, 2)
    erased = next(m for m in messages if m.session_id == "s-2")
    home = next(r.partition for r in records if r.key == b"s-2")  # a retraction is keyed by its session too
    records.append(_retraction(erased, home, 10_000))
    one = ImageFold()
    for i in range(0, len(records), 50):
        one.add(records[i:i + 50])
    expected = _files(write_csv(one.image, tmp_path / "one"))

    reports, parts = _in_parts(records, 2)
    assert conflict(reports) is None
    assert all(r.owned for r in reports) and all(SHARED in r.shared for r in reports)  # both name the shared node
    delimiter = free_delimiter(reports[0].seen | reports[1].seen)
    plan = merge_plans([parts[0].write(tmp_path / "p0", delimiter), parts[1].write(tmp_path / "p1", delimiter),
                        write_csv(shared_image(reports), tmp_path / "shared", None, delimiter)])
    assert _files(plan) == expected
    assert plan.nodes == len(one.image) and plan.relationships == one.image.relationship_count
    assert sum(r.retractions for r in reports) == 1 and reports[home].erased
    assert sorted(plan.empty_lists.get("missingSteps", ())) == sorted(
        n.iri for n in one.image.nodes() if n.props.get("missingSteps") == [])


def test_the_fold_batch_writes_what_sink_sized_batches_write(tmp_path: Path) -> None:
    """The rebuild folds in batches of FOLD_BATCH, not of the sink's 2,000: the same files either way."""
    trajectories = load_trajectories()
    events = [e for i in range(240) for e in trajectory_events(trajectories[i % len(trajectories)], f"b-{i}", START)]
    records = _records(fold_all(events), 1)
    assert len(records) > 2 * FOLD_BATCH  # batches of FOLD_BATCH end inside sessions
    files = []
    for size in (FOLD_BATCH, Settings().sink_batch_size):
        fold = ImageFold()
        for i in range(0, len(records), size):
            fold.add(records[i:i + size])
        files.append(_files(write_csv(fold.image, tmp_path / str(size))))
    assert files[0] == files[1]


def test_a_node_in_two_parts_stops_the_merge() -> None:
    messages = _messages()
    records = _records(messages, 2)
    moved = next(r for r in records if r.partition == 0)
    records.append(SimpleNamespace(**{**moved.__dict__, "partition": 1, "offset": 10_000}))  # one session in both
    reports, _ = _in_parts(records, 2)
    why = conflict(reports)
    assert why is not None and why.startswith("node ") and "two processes' partitions" in why


def test_a_retraction_of_a_node_another_part_names_stops_the_merge() -> None:
    a = PartReport(1, 1, 1, 1, [], frozenset({"urn:a"}), {}, frozenset({"urn:a", "urn:gone"}),
                   frozenset({"urn:gone"}), frozenset())
    b = PartReport(1, 1, 1, 0, [], frozenset({"urn:b"}), {"urn:gone": v.GRAPH}, frozenset({"urn:b", "urn:gone"}),
                   frozenset(), frozenset())
    why = conflict([a, b])
    assert why is not None and "urn:gone" in why and "retraction" in why
    assert conflict([a, PartReport(1, 1, 1, 0, [], frozenset({"urn:b"}), {}, frozenset({"urn:b"}), frozenset(),
                                   frozenset())]) is None


def test_a_shared_node_made_in_two_graphs_stops_the_merge() -> None:
    def report(graph: str) -> PartReport:
        return PartReport(1, 1, 1, 0, [], frozenset(), {"urn:x": graph}, frozenset({"urn:x"}), frozenset(),
                          frozenset())
    assert conflict([report(v.GRAPH), report(v.GRAPH)]) is None
    why = conflict([report(v.GRAPH), report("urn:graph:other")])
    assert why is not None and "urn:x" in why


def test_partitions_are_dealt_by_their_record_counts() -> None:
    ranges = {TopicPartition("t", p): (10, 10 + n) for p, n in enumerate([100, 10, 80, 30, 0])}
    groups = split_ranges(ranges, 2)
    assert [sorted(tp.partition for tp in g) for g in groups] == [[0, 1], [2, 3]]
    assert sum(len(g) for g in split_ranges(ranges, 8)) == 4  # the empty partition is read by nobody
    assert len(split_ranges(ranges, 1)) == 1


def test_the_process_count_is_a_setting_with_a_clear_error() -> None:
    assert Settings.from_env({"PROVSTREAM_BULK_PROCESSES": "2"}).bulk_processes == 2
    assert bulk_processes(Settings(bulk_processes=0), 1) == 1  # one per core, at most one per partition
    with pytest.raises(ConfigError, match="PROVSTREAM_BULK_PROCESSES must be 0"):
        Settings.from_env({"PROVSTREAM_BULK_PROCESSES": "-1"})
