"""Restart a process that asks to be restarted: the worker's exit status 75.

The worker exits with 75 (``EX_TEMPFAIL``) rather than let Faust commit an
offset it did not fold (a delivery it could not complete, a hole in a
partition's offsets after a rebalance); a restart re-reads from the last
commit. :func:`supervise` runs a command and restarts it on that status,
with a growing pause (reset once a run lasted ``stable_s``); any other exit
status ends the supervisor with that status. SIGTERM and SIGINT are passed on
to the child, and the supervisor then waits for it and exits with its status,
restarting nothing.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

RESTART = 75
log = logging.getLogger("provstream.supervise")


@dataclass(frozen=True)
class Policy:
    restart_codes: frozenset[int] = frozenset({RESTART})
    first_pause_s: float = 1.0
    max_pause_s: float = 30.0
    stable_s: float = 60.0


def supervise(argv: Sequence[str], policy: Policy = Policy(),
              say: Callable[[str], None] = log.warning) -> int:
    """Run ``argv`` until it exits with a status other than a restart code (or is told to stop)."""
    stop = threading.Event()
    child: list[subprocess.Popen[bytes]] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()
        if child and child[0].poll() is None:
            child[0].send_signal(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        pause, restarts = policy.first_pause_s, 0
        while True:
            started = time.monotonic()
            child[:] = [subprocess.Popen(list(argv))]
            code = child[0].wait()
            if stop.is_set() or code not in policy.restart_codes:
                return code
            if time.monotonic() - started >= policy.stable_s:
                pause = policy.first_pause_s
            restarts += 1
            say(f"provstream supervise: {argv[-1] if argv else '?'} exited with {code}; "
                f"restart {restarts} in {pause:.1f}s")
            if stop.wait(pause):
                return code
            pause = min(pause * 2, policy.max_pause_s)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
