"""Folding a batch in a helper process, so it overlaps Faust's per-message work.

The worker is CPU-bound in one Python process: part of its time is the fold
(decode, fold, encode), the rest Faust's and aiokafka's per-message work
(fetching, delivering to the stream, acks, producing; profile in BENCHMARKS.md). With a
:class:`FoldProcess` the worker hands a batch's raw messages and the states
of the sessions they name to one helper process and awaits the result; while
it waits, the event loop goes on fetching and delivering the next batch, so
on two cores both run at once.

The helper is pure: :func:`fold_in_helper` runs :func:`fold_batch` on what it
was given and returns plain tuples. State stays in the worker's Faust table:
the worker looks up the session of each message key (the fold rejects an
event whose key is not its session id, so those are all it needs); should the
fold still ask for another session, the helper reports which it lacked and
the worker asks again with them.

Transport: the helper is ``python -m provstream.streams.offload`` with its
stdin and stdout as pipes, read and written by the worker's event loop
(asyncio subprocess streams: no threads contending with the loop for the
GIL). Each request and reply is one frame: an 8-byte big-endian length and a
pickle. The helper writes frames to a copy of its stdout and points its own
stdout at stderr, so a stray print cannot corrupt a frame.

Lifetime: a helper that dies makes the call fail, which ends the worker
before the batch is acked (see ``_Fold._process``). The helper exits when
its stdin closes: when the worker closes it, or when the worker dies
(SIGKILL included), so nothing is left running. It ignores SIGTERM and SIGINT
sent to the whole process group: the worker stops it once the batch in hand
is published.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import signal
import sys
from collections.abc import Mapping, Sequence
from typing import IO, Any

from provstream.core.fold import FoldState
from provstream.streams.batch import Accepted, Message, Outcome, Rejected, fold_batch

StateDict = dict[str, Any]
# (session_id, triples) for an accepted message, (None, reason, internal) for a rejected one
WireOutcome = tuple[str, bytes] | tuple[None, str, bool]
Reply = tuple[list[WireOutcome], dict[str, StateDict]] | set[str]
_HEADER = 8
_READY = b"provstream fold helper ready"
_STOP_TIMEOUT_S = 10.0


class HelperFailed(RuntimeError):
    """The helper process exited or answered something that is not a frame."""


class FoldProcess:
    """One helper process running :func:`fold_in_helper`; start it, fold batches one at a time, close it."""

    def __init__(self) -> None:
        self._proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        """Start the helper and wait until it has imported the fold."""
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", __name__, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )
        if await self._read() != _READY:
            raise HelperFailed("the fold helper did not start")

    async def fold(
        self, messages: Sequence[tuple[bytes | None, bytes | None]], states: Mapping[str, StateDict | None],
        max_bytes: int,
    ) -> Reply:
        """The batch's outcomes and changed states, or the sessions whose state the helper lacked."""
        if self._proc is None:
            await self.start()
        assert self._proc is not None and self._proc.stdin is not None
        request = pickle.dumps((messages, states, max_bytes), protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self._proc.stdin.write(len(request).to_bytes(_HEADER, "big") + request)
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise HelperFailed(f"the fold helper exited ({self._proc.returncode})") from exc
        return pickle.loads(await self._read())  # type: ignore[no-any-return]

    async def _read(self) -> bytes:
        assert self._proc is not None and self._proc.stdout is not None
        try:
            header = await self._proc.stdout.readexactly(_HEADER)
            return await self._proc.stdout.readexactly(int.from_bytes(header, "big"))
        except asyncio.IncompleteReadError as exc:
            code = await self._proc.wait()
            raise HelperFailed(f"the fold helper exited with status {code}") from exc

    async def close(self) -> None:
        """Close the helper's stdin (it exits on that) and wait for it; kill it if it does not go."""
        proc, self._proc = self._proc, None
        if proc is None or proc.returncode is not None:
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), _STOP_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def fold_in_helper(
    messages: Sequence[tuple[bytes | None, bytes | None]], states: Mapping[str, StateDict | None], max_bytes: int,
) -> Reply:
    """Fold ``messages`` with ``states`` (every session it may name); the missing sessions if not."""
    missing: set[str] = set()

    def lookup(session_id: str) -> FoldState | None:
        if session_id not in states:
            missing.add(session_id)
            return None
        data = states[session_id]
        return None if data is None else FoldState.from_dict(data)

    result = fold_batch([Message(key, value) for key, value in messages], lookup, max_bytes)
    if missing:
        return missing
    return [_to_wire(o) for o in result.outcomes], {sid: s.to_dict() for sid, s in result.changed.items()}


def from_wire(outcomes: list[WireOutcome]) -> tuple[Outcome, ...]:
    """The helper's outcomes as :func:`fold_batch` gives them."""
    return tuple(Accepted(o[0], o[1]) if o[0] is not None else Rejected(o[1], o[2]) for o in outcomes)  # type: ignore[arg-type, misc]


def _to_wire(outcome: Outcome) -> WireOutcome:
    if isinstance(outcome, Accepted):
        return (outcome.session_id, outcome.triples)
    return (None, outcome.reason, outcome.internal)


def serve(requests: IO[bytes], replies: IO[bytes]) -> None:
    """The helper's loop: a frame in, :func:`fold_in_helper`'s answer out, until ``requests`` ends."""
    _write(replies, _READY)
    while header := requests.read(_HEADER):
        if len(header) < _HEADER:
            return
        request = requests.read(int.from_bytes(header, "big"))
        messages, states, max_bytes = pickle.loads(request)
        _write(replies, pickle.dumps(fold_in_helper(messages, states, max_bytes), protocol=pickle.HIGHEST_PROTOCOL))


def _write(out: IO[bytes], frame: bytes) -> None:
    out.write(len(frame).to_bytes(_HEADER, "big") + frame)
    out.flush()


def main() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the worker stops the helper: see the module
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints go to stderr, never into a frame
    try:
        serve(sys.stdin.buffer, replies)
    except BrokenPipeError:  # the worker is gone
        pass


if __name__ == "__main__":
    main()
