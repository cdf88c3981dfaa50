"""The supervisor restarts a command on exit 75 only, and passes a stop on."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from provstream.supervisor import Policy, supervise

FAST = Policy(first_pause_s=0.01, max_pause_s=0.05)


def script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "child.py"
    path.write_text(body)
    return [sys.executable, str(path)]


def test_exit_75_is_restarted_until_another_status(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    argv = script(tmp_path, f"""
import sys, pathlib
p = pathlib.Path({str(runs)!r}); n = int(p.read_text()) + 1 if p.exists() else 1; p.write_text(str(n))
sys.exit(75 if n < 3 else 4)
""")
    said: list[str] = []
    assert supervise(argv, FAST, say=said.append) == 4
    assert runs.read_text() == "3"
    assert len(said) == 2 and "exited with 75; restart 1" in said[0] and "restart 2" in said[1]


def test_a_clean_exit_or_a_crash_is_not_restarted(tmp_path: Path) -> None:
    for code in (0, 1):
        assert supervise(script(tmp_path, f"import sys; sys.exit({code})"), FAST, say=lambda _l: None) == code


def test_sigterm_reaches_the_child_and_nothing_restarts(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    argv = script(tmp_path, f"""
import signal, sys, time, pathlib
signal.signal(signal.SIGTERM, lambda *_: sys.exit(75))  # even a restart status is not restarted after a stop
pathlib.Path({str(ready)!r}).write_text("1")
time.sleep(60)
""")

    def stop_when_ready() -> None:
        while not ready.exists():
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=stop_when_ready, daemon=True).start()
    started = time.monotonic()
    assert supervise(argv, FAST, say=lambda _l: None) == 75
    assert time.monotonic() - started < 30
    assert signal.getsignal(signal.SIGTERM) == before, "the supervisor's handlers are removed again"
