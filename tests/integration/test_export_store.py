"""provstream export against the real Neo4j: every format round-trips to the stored graph."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prov.model import ProvDocument
from rdflib.compare import isomorphic

from provstream import cli
from provstream import testing as samples
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core import vocab as v
from provstream.core.triples import StepTriples
from provstream.data import REACT_TRAJECTORIES
from provstream.read.export import FORMATS, RDF_FORMATS, parse_rdf
from provstream.read.provcheck import violations
from provstream.read.provdoc import to_prov_document
from provstream.read.rdf import to_graph
from provstream.read.strict import strict_triples
from provstream.settings import Settings

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TRAJECTORIES = samples.load_trajectories(REACT_TRAJECTORIES)
START = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def recorded(isolated: Settings, unique: str) -> Iterator[tuple[Settings, str, list[StepTriples]]]:
    msgs = samples.fold_all(samples.scenario(TRAJECTORIES, unique, start=START, user=isolated.user,
                                                collection=isolated.collection))
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(msgs)
        try:
            yield isolated, unique, msgs
        finally:
            store.reset_graph(user=isolated.user, collection=isolated.collection)


def _export(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(["export", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _session(msgs: list[StepTriples], session: str) -> set:
    return samples.triples_of(m for m in msgs if m.session_id == session)


@pytest.mark.parametrize("fmt", sorted(RDF_FORMATS))
def test_rdf_exports_parse_back_to_the_stored_graph(recorded, fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    settings, p, msgs = recorded
    for session, mechanism in ((f"{p}-dag", v.Mechanism.AGENT), (f"{p}-rag", v.Mechanism.GRAPHRAG)):
        code, out, _ = _export([v.question_iri(mechanism, session), "-C", settings.collection, "--format", fmt],
                               capsys)
        assert code == 0
        back = parse_rdf(out, fmt)
        assert back == _session(msgs, session)
        assert isomorphic(to_graph(back), to_graph(_session(msgs, session)))
    code, out, _ = _export(["--all", "-C", settings.collection, "--format", fmt], capsys)
    assert code == 0 and parse_rdf(out, fmt) == samples.triples_of(msgs)


def test_prov_exports_and_strict_mode(recorded, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    settings, p, msgs = recorded
    target = tmp_path / "scope.provjson"
    code, out, _ = _export(["--all", "-C", settings.collection, "--format", "provjson", "--strict-prov",
                            "-o", str(target)], capsys)
    assert code == 0 and out == ""
    doc = ProvDocument.deserialize(content=target.read_text(), format="json")
    stored = samples.triples_of(msgs)
    assert doc == to_prov_document(strict_triples(stored))
    assert violations(doc) == []
    assert violations(to_prov_document(stored))  # the reference model as stored is not valid PROV
    question = v.question_iri(v.Mechanism.AGENT, f"{p}-parent")
    code, out, _ = _export([question, "-C", settings.collection, "--format", "provn", "--strict-prov"], capsys)
    assert code == 0 and f"wasGeneratedBy(trace:agent\\:{p}-parent/i1, trace:agent\\:{p}-parent, -)" in out
    assert f"wasDerivedFrom(trace:agent\\:{p}-parent/i2, trace:docrag\\:{p}-sub/synthesis, -, -, -)" in out
    code, out, _ = _export([question, "-C", settings.collection, "--format", "provjson"], capsys)
    assert json.loads(out)["activity"][f"trace:agent:{p}-parent"]["tg:query"].startswith("Musician")


def test_unknown_uri_other_scope_and_empty_scope(recorded, capsys: pytest.CaptureFixture[str]) -> None:
    settings, p, _ = recorded
    question = v.question_iri(v.Mechanism.AGENT, f"{p}-dag")
    for argv in (["urn:trustgraph:agent:nope", "-C", settings.collection],
                 [question, "-U", "someone-else", "-C", settings.collection],
                 [question, "-C", settings.collection + "-other"]):
        for fmt in FORMATS:
            code, out, err = _export([*argv, "--format", fmt], capsys)
            assert code == 1 and out == "" and err.startswith("provstream: no trace ")
    code, out, _ = _export(["--all", "-C", settings.collection + "-other", "--format", "nquads"], capsys)
    assert code == 0 and out.strip() == ""
