"""provstream export of an agent trace inlines its sub-traces (agent and RAG); the result parses and passes PROV."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from prov.model import ProvDocument

from provstream import cli
from provstream import testing as samples
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.read.export import parse_rdf
from provstream.read.provcheck import violations
from provstream.settings import Settings

pytestmark = pytest.mark.integration

START = datetime(2025, 3, 7, 9, 0, tzinfo=UTC)
AGENT = v.Mechanism.AGENT


@pytest.fixture
def nested(isolated: Settings, unique: str) -> Iterator[tuple[Settings, str, list, list]]:
    """A parent agent whose step 2 called a sub-agent, whose step 1 called a DocRAG session."""
    records = samples.load_trajectories()
    scope = {"user": isolated.user, "collection": isolated.collection}
    parent, child, doc = f"{unique}-parent", f"{unique}-child", f"{unique}-doc"
    docs = samples.docrag_events(doc, "Who was Milhouse named after?", ["simpsons.txt#12"], "Richard Nixon.",
                                 start=START, **scope)
    kid = samples.agent_events(records[4], child, start=START + timedelta(seconds=5),
                               subtraces={1: ev.SubTrace(v.Mechanism.DOCRAG, doc)}, **scope)
    top = samples.agent_events(records[3], parent, start=START + timedelta(seconds=9),
                               subtraces={2: ev.SubTrace(AGENT, child)}, **scope)
    msgs = samples.fold_all([*docs, *kid, *top])
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(msgs)
        try:
            yield isolated, v.question_iri(AGENT, parent), msgs, [parent, child, doc]
        finally:
            store.reset_graph(user=isolated.user, collection=isolated.collection)


def test_export_inlines_the_sub_traces_and_passes_the_prov_checks(nested, capsys: pytest.CaptureFixture[str]) -> None:
    settings, question, msgs, sessions = nested
    assert cli.main(["export", question, "-C", settings.collection, "--format", "trig"]) == 0
    assert parse_rdf(capsys.readouterr().out, "trig") == samples.triples_of(msgs)  # all three sessions
    assert cli.main(["export", question, "-C", settings.collection, "--format", "trig", "--no-subtraces"]) == 0
    assert parse_rdf(capsys.readouterr().out, "trig") == samples.triples_of(
        m for m in msgs if m.session_id == sessions[0])
    assert cli.main(["export", question, "-C", settings.collection, "--format", "provjson", "--strict-prov"]) == 0
    doc = ProvDocument.deserialize(content=capsys.readouterr().out, format="json")
    assert violations(doc) == []
    assert any(sessions[2] in str(r.identifier) for r in doc.get_records() if r.identifier is not None)
