"""A trace as a picture: Mermaid, Graphviz DOT, and one self-contained HTML page (pure).

:func:`diagram` turns the trace model into nodes, edges and clusters:
Question → steps → Conclusion (or Exploration → Focus → Synthesis), the DAG
edges an agent step's ``uses`` names, and each sub-trace as a cluster whose
Conclusion / Synthesis points at the step that called it. :func:`mermaid`,
:func:`dot` and :func:`html` write that diagram; the HTML page draws it as
inline SVG (no script, no network) beside each step's full text.

Example::

    >>> from provstream.read.model import AgentTrace, Completeness, Question
    >>> from provstream.core.vocab import Mechanism
    >>> t = AgentTrace(Question("urn:trustgraph:agent:s1", Mechanism.AGENT, "s1", "Why?"), Completeness())
    >>> mermaid(t).splitlines()[0]
    'flowchart TD'
"""

from __future__ import annotations

import html as _html
import json
from dataclasses import dataclass, field

from provstream.core.vocab import Mechanism
from provstream.read.model import AgentTrace, Analysis, RagTrace, Trace
from provstream.read.render_text import render_trace, status_line
from provstream.read.text import truncate

LABEL = 60
FORMATS = ("mermaid", "dot", "html")


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    kind: str  # question, step, conclusion, exploration, focus, synthesis, missing
    label: str
    text: str = ""  # the step's full text (HTML page)


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    subtrace: bool = False  # a sub-trace's end feeding the step that called it


@dataclass
class Cluster:
    """One trace: its nodes in order and the sub-traces drawn inside it."""

    id: str
    title: str
    nodes: list[Node] = field(default_factory=list)
    children: list[Cluster] = field(default_factory=list)

    def all_nodes(self) -> list[Node]:
        return [*self.nodes, *(n for c in self.children for n in c.all_nodes())]


@dataclass
class Diagram:
    root: Cluster
    edges: list[Edge] = field(default_factory=list)


def diagram(trace: Trace) -> Diagram:
    """The trace's nodes, edges and sub-trace clusters (ids ``t0_q``, ``t0_i1``, ``t1_q``, ...)."""
    d = Diagram(Cluster("t0", _title(trace)))
    _fill(d, d.root, trace, [0])
    return d


def _title(trace: Trace) -> str:
    q = trace.question
    return f"{q.mechanism.label} trace {q.session_id} · {status_line(q.mechanism, trace.completeness)}"


def _fill(d: Diagram, cluster: Cluster, trace: Trace, counter: list[int]) -> tuple[str, str]:
    """Add the trace's nodes to ``cluster``; return (question node id, end node id)."""
    p = cluster.id
    q = trace.question
    cluster.nodes.append(Node(f"{p}_q", "question", "Question: " + (q.query or "(not recorded)"), q.query))
    if isinstance(trace, AgentTrace):
        return _agent(d, cluster, trace, counter)
    return _rag(d, cluster, trace)


def _agent(d: Diagram, cluster: Cluster, trace: AgentTrace, counter: list[int]) -> tuple[str, str]:
    p = cluster.id
    question, last = f"{p}_q", f"{p}_q"
    for a in trace.analyses:
        me = f"{p}_{a.step}"
        cluster.nodes.append(Node(me, "step", f"{a.step} · {_step_label(a)}", _step_text(a)))
        if a.uses:
            d.edges += [Edge(f"{p}_{used}", me) for used in a.uses]
        else:  # the linear chain: from the step before (the question for the first)
            d.edges.append(Edge(question if a.step == "i1" else last, me))
        for end in a.calls:
            sub = trace.subtrace(end)
            counter[0] += 1
            if sub is None:
                missing = f"t{counter[0]}_missing"
                cluster.nodes.append(Node(missing, "missing", f"sub-trace {end} (not recorded)"))
                d.edges.append(Edge(missing, me, subtrace=True))
                continue
            child = Cluster(f"t{counter[0]}", _title(sub))
            cluster.children.append(child)
            _, sub_end = _fill(d, child, sub, counter)
            d.edges.append(Edge(sub_end, me, subtrace=True))
        last = me
    if trace.conclusion is None:
        return question, last
    end = f"{p}_final"
    cluster.nodes.append(Node(end, "conclusion", "Conclusion: " + trace.conclusion.answer, trace.conclusion.answer))
    d.edges.append(Edge(last, end))
    return question, end


def _rag(d: Diagram, cluster: Cluster, trace: RagTrace) -> tuple[str, str]:
    p = cluster.id
    last = f"{p}_q"
    e, f, s = trace.exploration, trace.focus, trace.synthesis
    steps: list[Node] = []
    if e is not None:
        what = (f"{e.edge_count} edges" if trace.question.mechanism is Mechanism.GRAPHRAG
                else f"{e.chunk_count} chunks")
        steps.append(Node(f"{p}_exploration", "exploration", "Exploration: " + what,
                          what + ("\n" + ", ".join(e.chunks) if e.chunks else "")))
    if f is not None:
        edges = "\n".join(f"{x.subject} {x.predicate} {x.object}" + (f" ({x.reasoning})" if x.reasoning else "")
                          for x in f.edges)
        steps.append(Node(f"{p}_focus", "focus", f"Focus: {len(f.edges)} edges selected", edges))
    if s is not None:
        steps.append(Node(f"{p}_synthesis", "synthesis", "Synthesis: " + s.content, s.content))
    for node in steps:
        cluster.nodes.append(node)
        d.edges.append(Edge(last, node.id))
        last = node.id
    return f"{p}_q", last


def _step_label(a: Analysis) -> str:
    if a.action:
        return f"{a.action} {a.arguments}" if a.arguments and a.arguments != "{}" else a.action
    return a.thought or "(no action)"


def _step_text(a: Analysis) -> str:
    parts = [("Thought", a.thought), ("Action", a.action), ("Arguments", a.arguments if a.action else ""),
             ("Observation", a.observation)]
    return "\n".join(f"{k}: {v}" for k, v in parts if v)


# -- Mermaid ------------------------------------------------------------------------

def mermaid_label(text: str) -> str:
    short = truncate(" ".join(text.split()), LABEL)
    for char, entity in (("&", "#amp;"), ('"', "#quot;"), ("<", "#lt;"), (">", "#gt;")):
        short = short.replace(char, entity)
    return short


_MERMAID_SHAPES = {"question": ('(["', '"])'), "conclusion": ('(["', '"])'), "synthesis": ('(["', '"])'),
                   "missing": ('{{"', '"}}')}


def mermaid(trace: Trace) -> str:
    """The trace as a Mermaid ``flowchart`` (renders on GitHub and in most Markdown viewers).

    :param trace: the trace (its sub-traces become ``subgraph`` blocks).
    :returns: the Mermaid source, ending with a newline.
    """
    return "\n".join(mermaid_lines(diagram(trace))) + "\n"


def mermaid_lines(d: Diagram, direction: str = "TD") -> list[str]:
    """The Mermaid lines of a diagram (shared with :mod:`provstream.read.diff`)."""
    lines = [f"flowchart {direction}"]
    lines += _mermaid_cluster(d.root, "  ", top=True)
    for e in d.edges:
        lines.append(f"  {e.source} {'-. sub-trace .->' if e.subtrace else '-->'} {e.target}")
    lines += ["  classDef question fill:#e8f0fe,stroke:#4a6fa5", "  classDef conclusion fill:#e6f4ea,stroke:#3c8d5a",
              "  classDef missing fill:#fdecea,stroke:#c0392b,stroke-dasharray:4"]
    for kind, cls in (("question", "question"), ("conclusion", "conclusion"), ("synthesis", "conclusion"),
                      ("missing", "missing")):
        ids = [n.id for n in d.root.all_nodes() if n.kind == kind]
        if ids:
            lines.append(f"  class {','.join(ids)} {cls}")
    return lines


def _mermaid_cluster(c: Cluster, indent: str, *, top: bool = False) -> list[str]:
    lines = [] if top else [f'{indent}subgraph {c.id}["{mermaid_label(c.title)}"]']
    inner = indent if top else indent + "  "
    for n in c.nodes:
        left, right = _MERMAID_SHAPES.get(n.kind, ('["', '"]'))
        lines.append(f"{inner}{n.id}{left}{mermaid_label(n.label)}{right}")
    for child in c.children:
        lines += _mermaid_cluster(child, inner)
    return lines if top else [*lines, f"{indent}end"]


# -- Graphviz DOT -------------------------------------------------------------------

def _dot_str(text: str) -> str:
    return json.dumps(truncate(" ".join(text.split()), LABEL), ensure_ascii=False)


_DOT_STYLE = {"question": 'shape=box, style="rounded,filled", fillcolor="#e8f0fe"',
              "conclusion": 'shape=box, style="rounded,filled", fillcolor="#e6f4ea"',
              "synthesis": 'shape=box, style="rounded,filled", fillcolor="#e6f4ea"',
              "missing": 'shape=hexagon, style="dashed", color="#c0392b"'}


_DOT_SUB = ' [style=dashed, label="sub-trace"]'


def dot(trace: Trace) -> str:
    """The trace as a Graphviz ``digraph`` (``dot -Tsvg``); sub-traces are ``cluster_`` subgraphs.

    :param trace: the trace.
    :returns: the DOT source, ending with a newline.
    """
    d = diagram(trace)
    lines = ["digraph trace {", "  rankdir=TB;", '  node [shape=box, fontname="Helvetica", fontsize=10];',
             f"  label={_dot_str(d.root.title)}; labelloc=t;"]
    lines += _dot_cluster(d.root, "  ", top=True)
    for e in d.edges:
        lines.append(f"  {e.source} -> {e.target}{_DOT_SUB if e.subtrace else ''};")
    return "\n".join([*lines, "}"]) + "\n"


def _dot_cluster(c: Cluster, indent: str, *, top: bool = False) -> list[str]:
    lines = [] if top else [f"{indent}subgraph cluster_{c.id} {{", f"{indent}  label={_dot_str(c.title)};",
                            f'{indent}  style="rounded,dashed";']
    inner = indent if top else indent + "  "
    for n in c.nodes:
        style = _DOT_STYLE.get(n.kind)
        lines.append(f"{inner}{n.id} [label={_dot_str(n.label)}{', ' + style if style else ''}];")
    for child in c.children:
        lines += _dot_cluster(child, inner)
    return lines if top else [*lines, f"{indent}}}"]


# -- HTML -----------------------------------------------------------------------------

_BOX_W, _BOX_H, _GAP, _INDENT = 360, 34, 16, 40
_FILL = {"question": "#e8f0fe", "conclusion": "#e6f4ea", "synthesis": "#e6f4ea", "missing": "#fdecea"}
_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{font-size:1.3em}.layout{display:flex;gap:2em;align-items:flex-start}svg{flex:none}
.steps{flex:1}.step{border-left:3px solid #4a6fa5;padding:.3em .8em;margin:.6em 0;background:#fafafa}
.step h3{margin:.1em 0;font-size:1em}.step pre{white-space:pre-wrap;margin:.2em 0;font:inherit}
.sub{margin-left:1.5em;border-color:#999}"""


def html(trace: Trace, *, text_width: int = 100) -> str:
    """One self-contained HTML page: the diagram as inline SVG and each step's text (no script, no network).

    :param trace: the trace.
    :param text_width: the width the plain-text rendering below the steps is wrapped to.
    :returns: the HTML document.
    """
    d = diagram(trace)
    svg = _svg(d)
    steps = "\n".join(_html_steps(d.root, 0))
    title = _html.escape(d.root.title)
    plain = _html.escape(render_trace(trace, text_width))
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>"
            f"<style>{_CSS}</style></head>\n<body><h1>{title}</h1>\n<div class=\"layout\">{svg}\n"
            f"<div class=\"steps\">{steps}</div></div>\n<details><summary>As text</summary><pre>{plain}</pre>"
            "</details>\n</body></html>\n")


def _html_steps(c: Cluster, depth: int) -> list[str]:
    out = []
    children = {child.nodes[0].id: child for child in c.children if child.nodes}
    for n in c.nodes:
        css = "step sub" if depth else "step"
        out.append(f'<div class="{css}" id="{n.id}"><h3>{_html.escape(n.label)}'
                   f'</h3><pre>{_html.escape(n.text)}</pre></div>')
    for child in children.values():
        out.append(f'<div class="step sub"><h3>{_html.escape(child.title)}</h3>')
        out += _html_steps(child, depth + 1)
        out.append("</div>")
    return out


def _svg(d: Diagram) -> str:
    """A top-down layout: one row per node in cluster order, sub-traces indented inside a dashed frame."""
    rows: dict[str, tuple[int, int]] = {}
    frames: list[tuple[int, int, int, str]] = []
    y = [_GAP]

    def place(c: Cluster, x: int) -> None:
        top = y[0]
        if c is not d.root:
            y[0] += 20
        for n in c.nodes:
            rows[n.id] = (x, y[0])
            y[0] += _BOX_H + _GAP
        for child in c.children:
            place(child, x + _INDENT)
        if c is not d.root:
            frames.append((x - 10, top - 6, y[0] - top, c.title))
            y[0] += _GAP

    place(d.root, 60)
    width = 60 + _BOX_W + _INDENT * 4 + 20
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y[0] + _GAP}" '
             f'font-family="system-ui,sans-serif" font-size="12">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>']
    for x, top, height, title in frames:
        parts.append(f'<rect x="{x}" y="{top}" width="{_BOX_W + 20}" height="{height}" rx="8" fill="none" '
                     f'stroke="#999" stroke-dasharray="5,4"/><text x="{x + 8}" y="{top + 14}" fill="#666">'
                     f'{_html.escape(truncate(title, LABEL))}</text>')
    for e in d.edges:
        if e.source not in rows or e.target not in rows:
            continue
        (x1, y1), (x2, y2) = rows[e.source], rows[e.target]
        dash = ' stroke-dasharray="4,3"' if e.subtrace else ""
        if x1 == x2 and y2 - y1 == _BOX_H + _GAP:
            parts.append(f'<line x1="{x1 + _BOX_W // 2}" y1="{y1 + _BOX_H}" x2="{x2 + _BOX_W // 2}" y2="{y2}" '
                         f'stroke="#555"{dash} marker-end="url(#arrow)"/>')
        else:  # a DAG or sub-trace edge: an arc on the left
            bend = max(x1, x2) - 40 - min(abs(y2 - y1) // 12, 40) if not e.subtrace else max(x1, x2) + _BOX_W + 30
            sx = x1 if not e.subtrace else x1 + _BOX_W
            tx = x2 if not e.subtrace else x2 + _BOX_W
            parts.append(f'<path d="M{sx},{y1 + _BOX_H // 2} C{bend},{y1 + _BOX_H // 2} {bend},{y2 + _BOX_H // 2} '
                         f'{tx},{y2 + _BOX_H // 2}" fill="none" stroke="#555"{dash} marker-end="url(#arrow)"/>')
    for n in d.root.all_nodes():
        x, y_ = rows[n.id]
        parts.append(f'<a href="#{n.id}"><rect x="{x}" y="{y_}" width="{_BOX_W}" height="{_BOX_H}" rx="6" '
                     f'fill="{_FILL.get(n.kind, "#fff")}" stroke="#4a6fa5"/><text x="{x + 8}" y="{y_ + 21}">'
                     f'{_html.escape(truncate(" ".join(n.label.split()), 55))}</text></a>')
    return "\n".join([*parts, "</svg>"])
