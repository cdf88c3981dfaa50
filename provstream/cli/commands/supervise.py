"""``provstream supervise COMMAND [ARGS...]``: run a provstream command, restarting it when it exits 75.

The worker exits with status 75 when it must not go on without re-reading
from its last commit (see README, "Guarantees"); ``provstream stack`` runs it
as ``provstream supervise worker``. Any other status ends the supervisor with
that status; SIGTERM/SIGINT are passed on to the command.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from provstream.settings import Settings


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("supervise", help="run a provstream command, restarting it when it exits 75",
                              description=__doc__)
    p.add_argument("--max-pause", type=float, default=30.0, help="longest pause between restarts, seconds (default 30)")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="COMMAND [ARGS...]",
                   help="the provstream command to run, e.g. worker --batch-size 2000")
    p.set_defaults(func=run)


def run(args: argparse.Namespace, settings: Settings) -> int:
    from provstream.supervisor import Policy, supervise

    if not args.argv:
        print("provstream supervise: name the command to run, e.g. `provstream supervise worker`", file=sys.stderr)
        return 2

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    policy = Policy(max_pause_s=args.max_pause)
    return supervise([sys.executable, "-m", "provstream", *args.argv], policy, say=say)
