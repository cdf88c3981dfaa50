from provstream.core import vocab as v


def test_uris_follow_the_spec() -> None:
    sid = "0f8b"
    assert v.question_iri(v.Mechanism.AGENT, sid) == "urn:trustgraph:agent:0f8b"
    assert v.analysis_iri(sid, 2) == "urn:trustgraph:agent:0f8b/i2"
    assert v.conclusion_iri(sid) == "urn:trustgraph:agent:0f8b/final"
    assert v.question_iri(v.Mechanism.DOCRAG, sid) == "urn:trustgraph:docrag:0f8b"
    assert v.exploration_iri(v.Mechanism.DOCRAG, sid) == "urn:trustgraph:docrag:0f8b/exploration"
    assert v.synthesis_iri(v.Mechanism.DOCRAG, sid) == "urn:trustgraph:docrag:0f8b/synthesis"
    assert v.question_iri(v.Mechanism.GRAPHRAG, sid) == "urn:trustgraph:question:0f8b"
    assert v.exploration_iri(v.Mechanism.GRAPHRAG, sid) == "urn:trustgraph:prov:exploration:0f8b"
    assert v.focus_iri(sid) == "urn:trustgraph:prov:focus:0f8b"
    assert v.edge_iri(sid, 3) == "urn:trustgraph:prov:edge:0f8b:3"
    assert v.synthesis_iri(v.Mechanism.GRAPHRAG, sid) == "urn:trustgraph:prov:synthesis:0f8b"


def test_parse_question_iri_round_trips_and_rejects_unsafe_ids() -> None:
    for m in v.Mechanism:
        assert v.parse_question_iri(v.question_iri(m, "abc-1")) == (m, "abc-1")
    assert v.parse_question_iri("urn:trustgraph:agent:x y") is None
    assert v.parse_question_iri("http://example.org/") is None
