"""Issue 17 item 10, the command-line points, on the real stack: ``-U ""``
refused, ``--help`` without Sphinx markup, ``--version`` everywhere, ``list``
filters and its Browser link, ``follow`` printing IRIs that ``show`` takes."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from test_read_follow import _collect, _interrupt, _produce, _running, _wait_for

from provstream import testing as samples
from provstream.cli import build_parser
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core import events as ev
from provstream.core import vocab as v
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
TRAJECTORY = samples.load_trajectories(REACT_TRAJECTORIES)[0]
VERBS = sorted(next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices)
COMMANDS = [("provstream",), *(("provstream", verb) for verb in VERBS),
            ("tg-list-explain-traces",), ("tg-show-explain-trace",), ("tg-invoke-agent",)]
MARKUP = re.compile(r"``|:(class|func|mod|meth|data|attr|exc):`")


def run(settings: Settings, prog: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: val for k, val in os.environ.items() if not k.startswith("PROVSTREAM_")}
    for f in fields(settings):
        env["PROVSTREAM_" + f.name.upper()] = str(getattr(settings, f.name))
    env.update(extra, COLUMNS="200")
    return subprocess.run([str(BIN / prog), *args], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.mark.parametrize("command", [
    ("tg-list-explain-traces",), ("tg-show-explain-trace", "urn:trustgraph:agent:x"),
    ("provstream", "export", "--all", "--format", "turtle"), ("provstream", "follow"),
    ("tg-invoke-agent", "-q", "What is 6*7?", "--no-wait"), ("provstream", "demo", "--delay", "0"),
], ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize("flag", ["-U", "-C"])
def test_an_empty_user_or_collection_is_refused(isolated: Settings, command: tuple[str, ...], flag: str) -> None:
    done = run(isolated, *command, flag, "")
    assert done.returncode == 1, (done.stdout, done.stderr)
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and "must not be empty" in err[0], done.stderr
    assert done.stdout.strip() == ""


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_has_no_sphinx_markup_and_every_command_has_version(isolated: Settings, command: tuple[str, ...]) -> None:
    helped = run(isolated, *command, "--help")
    assert helped.returncode == 0, helped.stderr
    assert not MARKUP.search(helped.stdout), helped.stdout
    versioned = run(isolated, *command, "--version")
    assert versioned.returncode == 0, versioned.stderr
    assert re.fullmatch(rf"{' '.join(command)} \d+\.\d+\S*\n", versioned.stdout), versioned.stdout


@pytest.fixture
def recorded(isolated: Settings, unique: str) -> Iterator[tuple[Settings, dict[str, str]]]:
    """Four traces: an old complete agent, a recent open agent, a recent DocRAG, a recent GraphRAG."""
    now = datetime.now(UTC).replace(microsecond=0)
    scope = {"user": isolated.user, "collection": isolated.collection}
    old = samples.agent_events(TRAJECTORY, f"{unique}-old", start=now - timedelta(days=10), **scope)
    open_ = samples.agent_events(TRAJECTORY, f"{unique}-open", start=now - timedelta(minutes=5), **scope)[:3]
    doc = samples.docrag_events(f"{unique}-doc", "q?", ["c1"], "a", start=now - timedelta(minutes=4), **scope)
    edges = [ev.SelectedEdge("http://ex.org/a", "http://ex.org/p", "x")]
    graph = samples.graphrag_events(f"{unique}-graph", "q?", 3, edges, "a", start=now - timedelta(minutes=3), **scope)
    iris = {"old": v.question_iri(v.Mechanism.AGENT, f"{unique}-old"),
            "open": v.question_iri(v.Mechanism.AGENT, f"{unique}-open"),
            "doc": v.question_iri(v.Mechanism.DOCRAG, f"{unique}-doc"),
            "graph": v.question_iri(v.Mechanism.GRAPHRAG, f"{unique}-graph")}
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(samples.fold_all([*old, *open_, *doc, *graph]))
        try:
            yield isolated, iris
        finally:
            store.reset_graph(user=isolated.user, collection=isolated.collection)


def listed(settings: Settings, *args: str) -> list[str]:
    done = run(settings, "tg-list-explain-traces", "--format", "json", *args)
    assert done.returncode == 0, done.stderr
    return [row["session_id"] for row in json.loads(done.stdout)]


def test_list_filters_by_status_type_and_since(recorded: tuple[Settings, dict[str, str]]) -> None:
    settings, iris = recorded
    assert listed(settings) == [iris["graph"], iris["doc"], iris["open"], iris["old"]]
    assert listed(settings, "--status", "open") == [iris["open"]]
    assert listed(settings, "--status", "complete", "--type", "agent") == [iris["old"]]
    assert listed(settings, "--type", "DocRAG") == [iris["doc"]]
    assert listed(settings, "--since", "1h") == [iris["graph"], iris["doc"], iris["open"]]
    day = (datetime.now(UTC) - timedelta(days=1)).date().isoformat()
    assert listed(settings, "--since", day, "--type", "graphrag") == [iris["graph"]]
    bad = run(settings, "tg-list-explain-traces", "--since", "last tuesday")
    assert bad.returncode == 1 and bad.stderr.count("\n") == 1 and "--since" in bad.stderr


def test_list_ends_with_a_browser_link_for_its_scope(recorded: tuple[Settings, dict[str, str]]) -> None:
    settings, _ = recorded
    done = run(settings, "tg-list-explain-traces")
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]
    assert last.startswith(f"Neo4j Browser: {settings.neo4j_http}/browser/?"), last
    query = parse_qs(urlparse(last.split(": ", 1)[1]).query)
    assert query["dbms"] == [settings.neo4j_uri] and query["db"] == [settings.neo4j_database]
    assert query["cmd"] == ["edit"]
    assert f'q.collection = "{settings.collection}"' in query["arg"][0]


def test_follow_prints_trace_iris_that_show_accepts(isolated: Settings, unique: str) -> None:
    msgs = samples.fold_all(samples.agent_events(TRAJECTORY, f"{unique}-live", start=datetime.now(UTC),
                                                 user=isolated.user, collection=isolated.collection))
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(msgs)
    with _running([BIN / "provstream", "follow", "-C", isolated.collection], isolated) as (proc, out, err):
        _wait_for(err, "following")
        _produce(isolated, msgs)
        lines = _collect(out, len(msgs))
        assert _interrupt(proc) == 0
    first = {line.split()[0] for line in lines}
    assert first == {v.question_iri(v.Mechanism.AGENT, f"{unique}-live")}, lines
    shown = run(isolated, "tg-show-explain-trace", first.pop(), "-C", isolated.collection)
    assert shown.returncode == 0 and shown.stdout.startswith("Agent trace  urn:trustgraph:agent:"), shown.stderr
