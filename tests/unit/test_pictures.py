"""A trace as Mermaid, DOT and a self-contained HTML page (pure)."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime

import pytest

from provstream import testing as samples
from provstream.core import vocab as v
from provstream.read.loader import load_trace
from provstream.read.model import Completeness
from provstream.read.parse import build_trace
from provstream.read.pictures import diagram, dot, html, mermaid

START = datetime(2025, 3, 1, 9, 30, tzinfo=UTC)


class _Scope:
    """Store and reader ports over folded sample events (what Neo4j would hold)."""

    def __init__(self) -> None:
        msgs = samples.fold_all(samples.scenario(samples.load_trajectories(), "p", start=START))
        self.by_question: dict[str, list] = {}
        for m in msgs:
            self.by_question.setdefault(m.question, []).append(m)

    def trace_triples(self, iri: str, *, user: str, collection: str) -> set:
        return samples.triples_of(self.by_question[iri])

    def completeness(self, iri: str, *, user: str, collection: str) -> Completeness:
        return Completeness.from_status(self.by_question[iri][-1].status)

    def subtrace_question(self, end: str, *, user: str, collection: str) -> str | None:
        return v.subtrace_question_iri(end)


def _load(session: str, mechanism: v.Mechanism = v.Mechanism.AGENT):
    scope = _Scope()
    return load_trace(scope, scope, v.question_iri(mechanism, session), user="u", collection="c")


def test_mermaid_draws_question_steps_conclusion_and_the_dag() -> None:
    text = mermaid(_load("p-dag"))
    assert text.startswith("flowchart TD\n")
    assert 't0_q(["Question: ' in text and "t0_final" in text
    assert "t0_i1 --> t0_i3" in text and "t0_i2 --> t0_i3" in text  # the DAG step uses i1 and i2
    assert "t0_q --> t0_i1" in text
    assert '"' not in "".join(re.findall(r'\["(.*?)"\]', text))  # quotes escaped in labels


def test_a_sub_trace_is_a_cluster_feeding_the_calling_step() -> None:
    trace = _load("p-parent")
    text = mermaid(trace)
    assert "subgraph t1[" in text and "t1_synthesis -. sub-trace .-> t0_i2" in text
    d = dot(trace)
    assert "subgraph cluster_t1 {" in d and 't1_synthesis -> t0_i2 [style=dashed, label="sub-trace"];' in d
    assert d.count("{") == d.count("}")


def test_rag_trace_pictures() -> None:
    d = diagram(_load("p-rag", v.Mechanism.GRAPHRAG))
    assert [n.kind for n in d.root.nodes] == ["question", "exploration", "focus", "synthesis"]


def test_html_is_one_self_contained_page() -> None:
    page = html(_load("p-parent"))
    assert page.startswith("<!DOCTYPE html>") and "<svg" in page and "</html>" in page
    assert "<script" not in page and "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "Milhouse was named after Richard Nixon" in page


def test_a_label_cannot_break_out_of_the_markup() -> None:
    msgs = samples.fold_all(samples.docrag_events("x", 'say "hi" <b>&</b>\nnow', ["c1"], "ok", start=START))
    trace = build_trace(v.question_iri(v.Mechanism.DOCRAG, "x"), samples.triples_of(msgs))
    assert '#quot;hi#quot; #lt;b#gt;#amp;#lt;/b#gt; now' in mermaid(trace)
    assert '"Question: say \\"hi\\" <b>&</b> now"' in dot(trace)
    assert "<b>" not in html(trace)


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz not installed")
def test_dot_parses_with_graphviz() -> None:
    subprocess.run(["dot", "-Tsvg"], input=dot(_load("p-parent")), text=True, check=True, capture_output=True)
