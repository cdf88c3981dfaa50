"""The sink's C rows (``connectors/neo4j/_rows_c.c``) against the Python rows they stand in for.

``rows.batch_rows`` must return exactly ``write_rows(build_rows(batch), lineage)``
and its count, with the keys of every row in the same order (what the driver
packs), for any batch; what the C rows do not take they leave to the Python ones.
``rows.procedure_batch`` (C) must return exactly ``rows.procedure_batch_py`` of those rows.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tracemalloc
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from provstream.connectors.neo4j import model as m
from provstream.connectors.neo4j import rows
from provstream.core import vocab as v
from provstream.core.triples import Iri, Literal, QuotedTriple, SessionState, SessionStatus, StepTriples, Triple
from provstream.errors import StoreError
from provstream.testing import fold_all, load_trajectories, scenario, sessions

NO_C = os.environ.get("PROVSTREAM_NO_C_EXTENSIONS", "") not in ("", "0")
try:
    from provstream.connectors.neo4j import _rows_c
except ImportError:  # not built: only test_the_c_rows_are_built_and_chosen says so
    _rows_c = None  # type: ignore[assignment]
# configured (by rows.py, at import) only when built and not switched off
needs_c = pytest.mark.skipif(_rows_c is None or NO_C, reason="the C rows are not built or are switched off")


def ordered(result: tuple[int, list[dict[str, Any]]]) -> tuple[int, list[list[tuple[str, Any]]]]:
    """The rows with each row's keys in order (nested dicts compare by value, as the packer sends them)."""
    count, out = result
    return count, [list(row.items()) for row in out]


def origins_of(batch: list[StepTriples]) -> list[rows.Origin]:
    return [((i % 3, i) if i % 4 else None, (0, i) if i % 5 else None) for i in range(len(batch))]


def lineage_of(batch: list[StepTriples]) -> list[dict[str, Any]]:
    return rows.lineage_at(batch, origins_of(batch))


def assert_same(batch: list[StepTriples]) -> None:
    """C rows equal to the Python rows, or refused by C; batch_rows as the Python rows either way."""
    lineage, origins = lineage_of(batch), origins_of(batch)
    try:
        expected = ordered(rows._batch_rows_py(batch, lineage))
    except StoreError as exc:
        for python, c, how in ((rows.batch_rows, _rows_c.write_rows, lineage),
                               (rows.batch_rows_at, _rows_c.write_rows_at, origins)):
            with pytest.raises(StoreError, match=str(exc)[:40].replace("(", r"\(").replace("[", r"\[")):
                python(batch, how)  # type: ignore[operator]
            with pytest.raises(_rows_c.Unsupported):
                c(batch, how)  # type: ignore[operator]
        return
    assert ordered(rows.batch_rows(batch, lineage)) == expected
    assert ordered(rows.batch_rows_at(batch, origins)) == expected
    python_rows = rows._batch_rows_py(batch, lineage)[1]
    procedure = list(rows.procedure_batch_py(python_rows).items())
    assert list(rows.procedure_batch(python_rows).items()) == procedure
    assert list(_rows_c.procedure_batch(python_rows).items()) == procedure
    for c, how in ((_rows_c.write_rows, lineage), (_rows_c.write_rows_at, origins)):
        try:
            assert ordered(c(batch, how)) == expected  # type: ignore[operator]
        except _rows_c.Unsupported:
            pass


def test_the_c_rows_are_built_and_chosen() -> None:
    if NO_C:
        assert rows._batch_rows is rows._batch_rows_py
        assert rows._batch_rows_at is rows._batch_rows_at_py
        return
    assert _rows_c is not None, "the C extension was not built: pip install -e . (needs gcc and Python headers)"
    assert rows._batch_rows is not rows._batch_rows_py
    assert rows._batch_rows_at is not rows._batch_rows_at_py
    batch = rows._sample_batch()
    assert ordered(_rows_c.write_rows(batch, [])) == ordered(rows._batch_rows_py(batch, []))
    assert ordered(_rows_c.write_rows_at(batch, origins_of(batch))) == ordered(
        rows._batch_rows_py(batch, lineage_of(batch)))


def test_provstream_no_c_extensions_keeps_the_python_rows() -> None:
    check = ("from provstream.connectors.neo4j import rows; assert rows._batch_rows is rows._batch_rows_py; "
             "assert rows._batch_rows_at is rows._batch_rows_at_py")
    subprocess.run([sys.executable, "-c", check], check=True, env={**os.environ, "PROVSTREAM_NO_C_EXTENSIONS": "1"})


@needs_c
def test_every_folded_step_of_the_bundled_trajectories_gives_the_same_rows() -> None:
    records = load_trajectories()
    start = datetime(2025, 3, 1, tzinfo=UTC)
    messages = [msg for events in sessions(records, "s", start, 60) for msg in fold_all(events)]
    messages += fold_all(scenario(records, "sc", start=start))
    for size in (1, 3, 40, len(messages)):
        for i in range(0, len(messages), size):
            batch = messages[i:i + size]
            expected = ordered(rows._batch_rows_py(batch, lineage_of(batch)))
            assert ordered(_rows_c.write_rows(batch, lineage_of(batch))) == expected
            assert ordered(_rows_c.write_rows_at(batch, origins_of(batch))) == expected
    assert_same(messages[::-1])


@needs_c
def test_origins_of_another_shape_go_to_the_python_rows() -> None:
    batch = rows._sample_batch()
    for origins in ([(None, (0, 1))], [(None, [0, 1])] * 2, [((0, 1),)] * 2, [[None, None]] * 2,
                    iter([(None, None)] * 2)):
        with pytest.raises(_rows_c.Unsupported):
            _rows_c.write_rows_at(batch, origins)  # type: ignore[arg-type]
    with pytest.raises(ValueError):  # zip(strict=True): not one origin per message
        rows.batch_rows_at(batch, [(None, (0, 1))])
    odd = [(None, [0, 1]), ((2, 3), None)]
    assert ordered(rows.batch_rows_at(batch, odd)) == ordered(  # type: ignore[arg-type]
        rows._batch_rows_py(batch, rows.lineage_at(batch, odd)))  # type: ignore[arg-type]


class Text(str):
    __slots__ = ()


CAPTION_NAMES = ["query", "action", "answer", "chunkCount", "edgeCount", "content", "edgePredicate", "other"]
caption_values = st.one_of(
    st.none(), st.integers(-10, 10**20), st.booleans(), st.floats(allow_nan=False),
    st.text(st.sampled_from(list("ab /#:·é\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2028\u3000🎸")), max_size=50),
    st.text(max_size=40), st.builds(Text, st.text(max_size=5)))
caption_iris = st.text(st.sampled_from(list("ab/#:i3 ")), max_size=12) | st.sampled_from(
    ["urn:trustgraph:agent:s/i3", "http://x/y#z", ""])


@needs_c
@settings(max_examples=3000, deadline=None)
@given(st.sets(st.sampled_from(sorted(set(m.LABELS.values())) + ["Other"]), max_size=3).map(sorted),
       st.dictionaries(st.sampled_from(CAPTION_NAMES), caption_values, max_size=6), caption_iris)
def test_the_c_caption_is_the_models(labels: list[str], props: dict[str, Any], iri: str) -> None:
    got = _rows_c.caption(labels, props, iri)
    assert type(got) is str
    assert got == m.caption(labels, props, iri)


PREDICATES = [v.RDF_TYPE, *sorted(v.TYPES), *m.STRING_PROPS, *m.INTEGER_PROPS, *m.DATETIME_PROPS, *m.LIST_PROPS,
              *m.REL_TYPES, v.TG_EDGE, "http://example.org/p"]
LEXICAL = st.sampled_from(["", "x", "42", "-7", "007", "99999999999999999999", "2025-03-01T12:00:00.123456Z",
                           "2025-03-01T12:00:00Z", "a  b\nc", "é🎸"]) | st.text(max_size=5)
DATATYPES = st.none() | st.sampled_from([v.XSD_INTEGER, v.XSD_DATETIME, "http://www.w3.org/2001/XMLSchema#string"])
iris = st.sampled_from(["urn:a", "urn:b", "urn:c", "urn:d/i3"]).map(Iri)
literals = st.builds(Literal, LEXICAL, DATATYPES, st.none() | st.sampled_from(["en", "fr"]))
objects = st.one_of(iris, st.sampled_from(sorted(v.TYPES) + ["http://example.org/T"]).map(Iri), literals)
quoted = st.builds(QuotedTriple, iris, iris, iris | literals)
triples = st.one_of(
    st.builds(Triple, iris, st.sampled_from(PREDICATES).map(Iri), objects),
    st.builds(Triple, iris, st.just(Iri(v.TG_EDGE)), quoted),  # two different ones on a node: refused
    st.builds(Triple, iris, st.sampled_from(PREDICATES).map(Iri), quoted),  # refused but under tg:edge
)
counts = st.integers(0, 5)
messages = st.builds(
    StepTriples, st.sampled_from(["e1", "e2"]), st.sampled_from(["s1", "s2"]), st.sampled_from(v.Mechanism), counts,
    st.sampled_from(["u1", "u2"]), st.just("c"), st.sampled_from(["urn:a", "urn:q"]),
    st.lists(triples, max_size=6).map(tuple),
    st.builds(SessionStatus, st.sampled_from(SessionState), counts, st.none() | counts, counts,
              st.lists(counts, max_size=3).map(tuple)),
    st.booleans(), st.sampled_from([v.GRAPH, "urn:graph:other"]))


@needs_c
@settings(max_examples=1500, deadline=None)
@given(st.lists(messages, max_size=6))
def test_any_batch_gives_the_rows_of_build_rows_and_write_rows(batch: list[StepTriples]) -> None:
    assert_same(batch)


@dataclass(frozen=True)
class LookAlike:
    value: str


class SubIri(Iri):
    __slots__ = ()


@needs_c
def test_what_the_c_rows_do_not_take_the_python_rows_build() -> None:
    (msg,) = fold_all(scenario(load_trajectories(), "x", start=datetime(2025, 3, 1, tzinfo=UTC)))[:1]
    t = msg.triples[0]
    odd = [
        Triple(SubIri(t.s.value), t.p, t.o),  # a subclass
        Triple(t.s, t.p, LookAlike("x")),  # not a term: Python fails too
        Triple(t.s, Iri(v.TG_QUERY), Literal(7)),  # type: ignore[arg-type]  # a value that is not a str
    ]
    for triple in odd:
        batch = [StepTriples(msg.event_id, msg.session_id, msg.mechanism, msg.seq, msg.user, msg.collection,
                             msg.question, (triple,), msg.status)]
        with pytest.raises(_rows_c.Unsupported):
            _rows_c.write_rows(batch, [])
        try:
            expected: Any = ordered(rows._batch_rows_py(batch, []))
        except Exception as exc:  # noqa: BLE001 - then batch_rows fails the same way
            with pytest.raises(type(exc)):
                rows.batch_rows(batch, [])
        else:
            assert ordered(rows.batch_rows(batch, [])) == expected
    with pytest.raises(_rows_c.Unsupported):
        _rows_c.write_rows(iter([msg]), [])
    assert ordered(rows.batch_rows((msg,), iter(lineage_of([msg])))) == ordered(
        rows._batch_rows_py([msg], lineage_of([msg])))


@needs_c
def test_rows_the_c_procedure_batch_does_not_take_the_python_one_builds() -> None:
    """Not the exact dicts and lists write_rows makes: Unsupported in C, the same batch from procedure_batch."""
    messages = fold_all(scenario(load_trajectories(), "procedure-batch", start=datetime(2025, 3, 1, tzinfo=UTC)))
    good = rows._batch_rows_py(messages)[1]
    odd = [{**good[0], "labels": tuple(good[0]["labels"])}, *good[1:]]
    rel_type = next(name for name in rows._PROCEDURE_RELS if any(name in row for row in good))
    with_group = next(i for i, row in enumerate(good) if rel_type in row)
    odd_rel = [*good]
    odd_rel[with_group] = {**good[with_group], rel_type: tuple(good[with_group][rel_type])}
    for batch in (odd, odd_rel, [*good, ["urn:not-a-row"]]):
        with pytest.raises((_rows_c.Unsupported, TypeError)):
            _rows_c.procedure_batch(batch)  # type: ignore[arg-type]
    for batch in (odd, odd_rel):
        assert rows.procedure_batch(batch) == rows.procedure_batch_py(batch)
    assert rows.procedure_batch(good)["rows"][0][0] == good[0]["iri"]


def test_a_quoted_triple_the_model_cannot_hold_is_refused_as_before() -> None:
    q = QuotedTriple(Iri("urn:s"), Iri("urn:p"), Iri("urn:o"))
    base = rows._sample_batch()[0]
    for triples in ((Triple(Iri("urn:n"), Iri("urn:other"), q),),
                    (Triple(Iri("urn:n"), Iri(v.TG_EDGE), q),
                     Triple(Iri("urn:n"), Iri(v.TG_EDGE), QuotedTriple(q.s, q.p, Iri("urn:x"))))):
        batch = [StepTriples("e", "s", base.mechanism, 0, "u", "c", base.question, triples, base.status)]
        with pytest.raises(StoreError):
            rows.batch_rows(batch, [])


@needs_c
def test_the_c_rows_leak_nothing() -> None:
    records = load_trajectories()
    batch = [msg for events in sessions(records, "leak", datetime(2025, 3, 1, tzinfo=UTC), 40)
             for msg in fold_all(events)]
    lineage = lineage_of(batch)
    refused = Triple(Iri("urn:n"), Iri("urn:other"), QuotedTriple(Iri("a"), Iri("b"), Iri("c")))
    bad = [*batch[:5], StepTriples("e", "s", v.Mechanism.AGENT, 0, "u", "c", "urn:q", (refused,),
                                   SessionStatus(SessionState.OPEN, 1))]
    made = rows._batch_rows_py(batch, lineage)[1]
    unsupported = [*made[:5], {**made[5], "lineage": []}]
    for _ in range(20):  # warm caches and interned values first
        _rows_c.write_rows(batch, lineage)
        _rows_c.procedure_batch(made)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(300):
            _rows_c.write_rows(batch, lineage)
            with pytest.raises(_rows_c.Unsupported):
                _rows_c.write_rows(bad, [])
            _rows_c.procedure_batch(made)
            with pytest.raises(_rows_c.Unsupported):
                _rows_c.procedure_batch(unsupported)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    assert grown < 64_000, f"{grown} bytes more after 300 batches"
