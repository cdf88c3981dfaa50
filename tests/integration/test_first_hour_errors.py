"""Issue 17 item 8 on the real stack: a wrong Neo4j URI scheme or refused
credentials give one clear line naming the setting to fix (no traceback, no
"see debug log")."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from provstream.settings import Settings

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
READERS = (("tg-list-explain-traces",), ("tg-show-explain-trace", "urn:trustgraph:agent:nothing-here"),
           ("provstream", "export", "--all", "--format", "turtle"))


def run(settings: Settings, prog: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: val for k, val in os.environ.items() if not k.startswith("PROVSTREAM_")}
    for f in fields(settings):
        env["PROVSTREAM_" + f.name.upper()] = str(getattr(settings, f.name))
    env.update(extra)
    return subprocess.run([str(BIN / prog), *args], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def assert_one_line(done: subprocess.CompletedProcess[str], prog: str, *wanted: str) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"{prog}: ") and "Traceback" not in done.stderr, done.stderr
    for text in wanted:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("uri", ["http://127.0.0.1:7474", "https://example.org:7473", "127.0.0.1:7687"])
@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c[:2]))
def test_a_uri_that_is_not_bolt_is_refused_in_one_line(isolated: Settings, uri: str, command: tuple[str, ...]) -> None:
    done = run(isolated, *command, PROVSTREAM_NEO4J_URI=uri)
    assert_one_line(done, command[0], "PROVSTREAM_NEO4J_URI", "bolt://", repr(uri))


def test_invoke_agent_refuses_a_uri_that_is_not_bolt(isolated: Settings) -> None:
    done = run(isolated, "tg-invoke-agent", "-q", "What is 2+2?", PROVSTREAM_NEO4J_URI="http://127.0.0.1:7474")
    assert_one_line(done, "tg-invoke-agent", "PROVSTREAM_NEO4J_URI")


# A user that does not exist fails exactly as a wrong password does (Neo.ClientError.Security.Unauthorized)
# without counting failed attempts against the shared stack's 'neo4j' user (Neo4j locks it after 3).
@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c[:2]))
def test_refused_credentials_name_the_password_setting(isolated: Settings, command: tuple[str, ...]) -> None:
    done = run(isolated, *command, PROVSTREAM_NEO4J_USER="provstream-no-such-user",
               PROVSTREAM_NEO4J_PASSWORD="not-the-password")
    line = assert_one_line(done, command[0], "PROVSTREAM_NEO4J_PASSWORD", "provstream-no-such-user")
    assert "debug log" not in line and "not-the-password" not in line
