"""Issue 17 item 9 on the real stack: the seed's verification run exactly as
written (``tg-invoke-agent -q`` then at once ``tg-list-explain-traces``) shows
the new trace, and a trace's step count is the same in the demo, the listing,
``show`` and the Question node Neo4j Browser displays."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import fields, replace
from pathlib import Path

import pytest
from sink_support import cypher, sink_process
from worker_support import running_worker

from provstream.agent.demo import stream_trajectories
from provstream.connectors.emitter import Emitter
from provstream.data import DATA_DIR
from provstream.settings import Settings

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


def run(settings: Settings, prog: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: val for k, val in os.environ.items() if not k.startswith("PROVSTREAM_")}
    for f in fields(settings):
        env["PROVSTREAM_" + f.name.upper()] = str(getattr(settings, f.name))
    env.update(extra)
    return subprocess.run([str(BIN / prog), *args], env=env, capture_output=True, text=True, timeout=180,
                          check=False)


def listed(settings: Settings) -> dict[str, dict[str, object]]:
    done = run(settings, "tg-list-explain-traces", "--format", "json")
    assert done.returncode == 0, done.stderr
    return {row["session_id"]: row for row in json.loads(done.stdout)}


def test_invoke_returns_once_its_trace_is_listed_and_step_counts_agree(isolated: Settings, tmp_path: Path) -> None:
    # a sink that writes every 3 s: a slow pipeline, as on a busy machine, which the list would otherwise outrun
    with running_worker(replace(isolated, stack_dir=tmp_path)), sink_process(isolated, PROVSTREAM_SINK_BATCH_MS="3000"):
        done = run(isolated, "tg-invoke-agent", "-q", "Who was Milhouse named after?")
        assert done.returncode == 0, done.stderr
        uri = done.stdout.splitlines()[-1].removeprefix("session: ")
        rows = listed(isolated)  # at once, as the seed's verification does
        assert uri in rows, f"{uri} not listed right after tg-invoke-agent returned: {sorted(rows)}"
        assert rows[uri]["status"] == "complete" and rows[uri]["subtraces"][0]["status"] == "complete"

        # the demo's progress lines, the listing, show and the Question node all give the same step count
        lines: list[str] = []
        with Emitter(isolated) as emitter:
            uris = stream_trajectories(emitter, DATA_DIR / "react" / "hotpot_fever.jsonl", lambda: None,
                                       lines.append)
        demo = {m[1]: int(m[2]) for m in (re.search(r"\] (\S+)  (\d+) steps  ", line) for line in lines) if m}
        assert sorted(demo) == sorted(uris)
        deadline = time.monotonic() + 120
        while not all(listed(isolated).get(u, {}).get("status") == "complete" for u in uris):
            assert time.monotonic() < deadline, "the demo's agent sessions did not reach Neo4j"
            time.sleep(1)
        rows = listed(isolated)
        with cypher(isolated) as query:
            nodes = {r["iri"]: r["steps"] for r in query(
                "MATCH (q:Question) WHERE q.iri IN $iris RETURN q.iri AS iri, q.steps AS steps", iris=uris)}
        for u in uris[:3]:
            shown = run(isolated, "tg-show-explain-trace", u)
            assert f"complete · {demo[u]} steps" in shown.stdout, (demo[u], shown.stdout[:400])
            as_json = json.loads(run(isolated, "tg-show-explain-trace", u, "--format", "json").stdout)
            assert as_json["steps"] == demo[u]
        assert {u: rows[u]["steps"] for u in uris} == demo == nodes


def test_invoke_says_in_one_line_when_its_trace_is_not_queryable_in_time(isolated: Settings) -> None:
    # nothing folds these isolated topics: the steps reach Kafka, the trace never reaches Neo4j
    started = time.monotonic()
    done = run(isolated, "tg-invoke-agent", "-q", "What is 6*7?", PROVSTREAM_INVOKE_WAIT_MS="2000")
    assert done.returncode == 3, (done.stdout, done.stderr)
    assert time.monotonic() - started < 60
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and "PROVSTREAM_INVOKE_WAIT_MS" in err[0] and "--no-wait" in err[0], done.stderr
    assert done.stdout.splitlines()[-1].startswith("session: urn:trustgraph:agent:")


def test_no_wait_returns_once_the_steps_reached_kafka(isolated: Settings) -> None:
    done = run(isolated, "tg-invoke-agent", "-q", "What is 6*7?", "--no-wait", PROVSTREAM_INVOKE_WAIT_MS="600000")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.splitlines()[-1].startswith("session: urn:trustgraph:agent:")
