"""Issue 17 item 7: Neo4j Browser as shipped shows a readable trace, without a click.

Drives Debian's chromium (headless, through Playwright) to the stack's
Browser in a fresh profile: log in, check that the server's
``browser.post_connect_cmd`` loaded provstream's style and guide, run the
documented query for an agent trace and read the captions and colours off
the rendered SVG. A screenshot is left in the test's tmp dir (the one in
docs/browser-trace.png was taken this way).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlparse

import pytest

from provstream import testing as samples
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core import vocab as v
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.browser]

CHROMIUM = "/usr/bin/chromium"
QUESTION_COLOUR = "#F79767"
CONCLUSION_COLOUR = "#4C8EDA"


def documented_query(iri: str) -> str:
    """The query scripts/demo prints for drawing a trace (on one line)."""
    return (f'MATCH p = (c:Resource)-[:wasDerivedFrom|wasGeneratedBy*0..]->(q:Question {{iri: "{iri}"}}) '
            "OPTIONAL MATCH e = (c)-[:wasDerivedFrom]->(:Synthesis)-[:wasDerivedFrom|wasGeneratedBy*]->(:Question) "
            "RETURN p, e")


@pytest.fixture
def agent_trace(isolated: Settings, unique: str) -> Iterator[tuple[Settings, str, dict]]:  # type: ignore[type-arg]
    trajectory = samples.load_trajectories(REACT_TRAJECTORIES)[0]
    events = samples.agent_events(trajectory, unique, start=datetime(2025, 3, 1, tzinfo=UTC),
                                  user=isolated.user, collection=isolated.collection)
    with Neo4jStore(isolated) as store:
        store.setup()
        store.write(samples.fold_all(events))
        try:
            yield isolated, v.question_iri(v.Mechanism.AGENT, unique), trajectory
        finally:
            store.reset_graph(user=isolated.user, collection=isolated.collection)


def test_a_fresh_browser_shows_the_trace_with_captions_and_fixed_colours(
        agent_trace: tuple[Settings, str, dict], tmp_path: Path) -> None:  # type: ignore[type-arg]
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run scripts/browser-deps (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    settings, iri, trajectory = agent_trace
    bolt = urlparse(settings.neo4j_uri)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(f"{settings.neo4j_http.rstrip('/')}/browser/?dbms=bolt://{bolt.hostname}:{bolt.port}"
                      "&preselectAuthMethod=NATIVE")
            page.wait_for_selector('[data-testid="password"]', timeout=60_000)
            page.fill('[data-testid="username"]', settings.neo4j_user)
            page.fill('[data-testid="password"]', settings.neo4j_password)
            page.click('[data-testid="connect"]')
            # nothing clicked: the server's post_connect_cmd ran :style and :play
            try:
                page.wait_for_selector("text=provstream traces", timeout=30_000)
            except Exception:
                page.screenshot(path=str(tmp_path / "no-guide.png"))
                pytest.fail("the provstream guide did not open on connect: is this Neo4j running with "
                            "deploy/neo4j/neo4j.conf.in's browser settings? (restart it: make down; make up)")
            page.click('[data-testid="activeEditor"]')
            page.keyboard.insert_text(documented_query(iri))
            page.keyboard.press("Control+Enter")
            page.wait_for_selector("svg .node", timeout=60_000)
            page.wait_for_timeout(2_000)  # the force layout settles
            captions = [" ".join(t.split()) for t in page.locator("svg .node text").all_text_contents()]
            fills = page.locator("svg .node circle").evaluate_all("cs => cs.map(c => c.getAttribute('fill'))")
            page.screenshot(path=str(tmp_path / "browser-trace.png"))
        finally:
            browser.close()
    text = " ".join(captions)
    steps = len(trajectory["steps"])
    for n in range(1, steps + 1):
        assert f"i{n} · " in text, f"no caption for step i{n} in {captions}"
    assert trajectory["question"].split()[0] in text  # the question's text (wrapped over lines)
    assert "answer:" in text
    assert "urn:trust" not in text
    upper = {str(f).upper() for f in fills}
    assert QUESTION_COLOUR in upper and CONCLUSION_COLOUR in upper, fills


def test_the_list_browser_link_opens_the_scope_query_in_the_editor(
        agent_trace: tuple[Settings, str, dict], tmp_path: Path) -> None:  # type: ignore[type-arg]
    """Issue 17 item 10: the link under tg-list-explain-traces's table connects and fills the editor."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} is missing: run scripts/browser-deps (apt-get install chromium)")
    import subprocess
    import sys
    from dataclasses import fields

    from playwright.sync_api import sync_playwright

    settings, _, _ = agent_trace
    env = {k: val for k, val in os.environ.items() if not k.startswith("PROVSTREAM_")}
    env.update({"PROVSTREAM_" + f.name.upper(): str(getattr(settings, f.name)) for f in fields(settings)})
    listed = subprocess.run([str(Path(sys.executable).parent / "tg-list-explain-traces")], env=env,
                            capture_output=True, text=True, timeout=120, check=False)
    assert listed.returncode == 0, listed.stderr
    link = listed.stdout.splitlines()[-1].removeprefix("Neo4j Browser: ")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
            page.goto(link)
            page.wait_for_selector('[data-testid="password"]', timeout=60_000)
            page.fill('[data-testid="username"]', settings.neo4j_user)
            page.fill('[data-testid="password"]', settings.neo4j_password)
            page.click('[data-testid="connect"]')
            editor = ""
            for _ in range(60):  # connected, then the editor filled from the link's cmd=edit
                page.wait_for_timeout(500)
                editor = " ".join(page.locator('[data-testid="activeEditor"]').inner_text().split())
                if "MATCH" in editor:
                    break
            page.screenshot(path=str(tmp_path / "list-link.png"))
        finally:
            browser.close()
    assert f'q.collection = "{settings.collection}"' in editor, editor
