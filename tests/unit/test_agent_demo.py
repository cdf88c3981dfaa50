"""The demo's emission on the emitter (MemoryTransport), folded with the real
fold: every session it returns is complete, in one scope, sub-trace linked."""

from __future__ import annotations

import pytest

from provstream.agent.demo import Paced, run_demo, wait_for_sessions
from provstream.agent.demo_frameworks import available
from provstream.codec.records import decode_event
from provstream.connectors.emitter import Emitter
from provstream.connectors.transport import MemoryTransport
from provstream.core import events as ev
from provstream.core.fold import FoldState, fold
from provstream.core.triples import SessionState
from provstream.core.vocab import Mechanism, question_iri
from provstream.data import DATA_DIR
from provstream.errors import WaitTimeout
from provstream.settings import Settings


def test_demo_emits_complete_sessions_of_every_kind() -> None:
    settings = Settings(user="demo-user", collection="demo")
    transport, lines = MemoryTransport(), []
    with Emitter(settings, transport=transport) as emitter:
        uris = run_demo(emitter, settings, data_dir=DATA_DIR, delay=0, out=lines.append)
    events = [decode_event(value) for _, value in transport.sent]
    states: dict[str, FoldState] = {}
    final: dict[str, SessionState] = {}
    for e in events:
        states[e.session_id], out = fold(states.get(e.session_id), e)
        final[out.question] = out.status.state
    assert sorted(final) == sorted(uris) and len(uris) == len(set(uris))
    assert set(final.values()) == {SessionState.CONCLUDED}
    assert {(e.user, e.collection) for e in events} == {("demo-user", "demo")}
    by_kind = {m: [u for u in uris if u.startswith(question_iri(m, ""))] for m in Mechanism}
    assert len(by_kind[Mechanism.AGENT]) == 12 + 1 + (1 if available() else 0)  # + the LangChain agent
    assert len(by_kind[Mechanism.DOCRAG]) == 10 + 1
    assert len(by_kind[Mechanism.GRAPHRAG]) == 3
    linked = [e.payload.subtrace for e in events if isinstance(e.payload, ev.AgentIteration) and e.payload.subtrace]
    assert [question_iri(s.mechanism, s.session_id) for s in linked] == [uris[-1]]
    assert lines[0].startswith("[agent 1/12] urn:trustgraph:agent:")
    assert any(line.startswith("[docrag 10/10]") for line in lines)
    assert any(line.startswith("[tg-invoke-agent] urn:trustgraph:agent:") for line in lines)


def test_paced_sessions_pause_before_each_step_only() -> None:
    class Session:
        uri = "urn:x"

        def explore(self, n: int) -> str:
            return f"explored {n}"

    pauses: list[int] = []
    paced = Paced(Session(), lambda: pauses.append(1))
    assert paced.uri == "urn:x" and pauses == []
    assert paced.explore(3) == "explored 3" and pauses == [1]


def test_waiting_for_an_unreachable_neo4j_times_out_naming_what_is_missing() -> None:
    settings = Settings(neo4j_uri="bolt://127.0.0.1:1", neo4j_password="x")
    lines: list[str] = []
    with pytest.raises(WaitTimeout, match=r"2 of 2 sessions not complete .* first missing: urn:a.*last error"):
        wait_for_sessions(settings, ["urn:b", "urn:a"], timeout=0.5, poll=0.2, out=lines.append)
    assert lines == ["Neo4j: 0/2 sessions complete"]
