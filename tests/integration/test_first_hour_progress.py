"""Issue 17 item 10 on the real stack: ``replay`` and ``emit`` redraw their
progress with ``\\r`` (bar, rate, ETA) only on a terminal; piped, no ``\\r``."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from dataclasses import fields
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sink_support import produce_events

from provstream import testing as samples
from provstream.data import REACT_TRAJECTORIES
from provstream.settings import Settings

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
TRAJECTORIES = samples.load_trajectories(REACT_TRAJECTORIES)


def env_of(settings: Settings) -> dict[str, str]:
    env = {k: val for k, val in os.environ.items() if not k.startswith("PROVSTREAM_")}
    for f in fields(settings):
        env["PROVSTREAM_" + f.name.upper()] = str(getattr(settings, f.name))
    return env


def on_a_terminal(settings: Settings, *args: str) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal; return the status, stdout and what the terminal got."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(BIN / args[0]), *args[1:]], env=env_of(settings), stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.stdout is not None
    out = proc.stdout.read().decode()
    proc.stdout.close()
    return proc.wait(timeout=300), out, seen.decode(errors="replace")


@pytest.fixture
def many_events(isolated: Settings, unique: str) -> Settings:
    events = [e for n in range(250) for e in samples.scenario(
        TRAJECTORIES, f"{unique}-{n}", start=datetime(2025, 1, 1, tzinfo=UTC), user=isolated.user,
        collection=isolated.collection)]
    produce_events(isolated, events)
    return isolated


def test_replay_draws_a_progress_bar_only_on_a_terminal(many_events: Settings) -> None:
    settings = many_events
    piped = subprocess.run([str(BIN / "provstream"), "replay", "--from-beginning"], env=env_of(settings),
                           capture_output=True, timeout=300, check=False)  # bytes: text mode would turn \r into \n
    assert piped.returncode == 0, piped.stderr
    assert b"\r" not in piped.stderr and piped.stdout.startswith(b"replayed "), piped.stderr
    status, out, terminal = on_a_terminal(settings, "provstream", "replay", "--from-beginning")
    assert status == 0 and out.startswith("replayed "), terminal
    frames = [f for f in terminal.replace("\r\n", "\n").split("\r") if f.strip()]
    assert len(frames) >= 2, terminal  # redrawn in place
    assert all("events/s" in f for f in frames) and "[" in frames[-1] and "(100.0%)" in frames[-1], frames
    assert any("ETA " in f for f in frames[:-1]), frames  # while it runs: the time left


def test_emit_shows_its_progress_on_a_terminal_only(isolated: Settings, tmp_path: Path) -> None:
    runs = tmp_path / "runs.jsonl"
    runs.write_text("".join(json.dumps(t) + "\n" for t in TRAJECTORIES * 20))
    piped = subprocess.run([str(BIN / "provstream"), "emit", "--jsonl", str(runs)], env=env_of(isolated),
                           capture_output=True, timeout=300, check=False)
    assert piped.returncode == 0 and b"\r" not in piped.stderr, piped.stderr
    status, out, terminal = on_a_terminal(isolated, "provstream", "emit", "--jsonl", str(runs))
    assert status == 0 and len(out.splitlines()) == len(TRAJECTORIES) * 20, terminal
    assert "\r" in terminal and f"{len(TRAJECTORIES) * 20}/{len(TRAJECTORIES) * 20} runs (100.0%)" in terminal, \
        terminal
    assert "runs/s" in terminal


def test_export_all_shows_what_it_is_doing_on_a_terminal(many_events: Settings, tmp_path: Path) -> None:
    settings = many_events
    replayed = subprocess.run([str(BIN / "provstream"), "replay", "--from-beginning"], env=env_of(settings),
                              capture_output=True, timeout=300, check=False)
    assert replayed.returncode == 0, replayed.stderr
    out = tmp_path / "all.ttl"
    status, _, terminal = on_a_terminal(settings, "provstream", "export", "--all", "--format", "turtle",
                                        "-o", str(out))
    assert status == 0 and out.stat().st_size > 0, terminal
    assert "\rexport: writing " in terminal and " triples as turtle ... 0:0" in terminal, terminal
    piped = subprocess.run([str(BIN / "provstream"), "export", "--all", "--format", "turtle", "-o", str(out)],
                           env=env_of(settings), capture_output=True, timeout=300, check=False)
    assert piped.returncode == 0 and piped.stderr == b"", piped.stderr  # a short run writes nothing when piped
