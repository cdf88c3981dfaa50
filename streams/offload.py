"""Folding a batch in a helper process, so it overlaps Faust's per-message work.

The worker is CPU-bound in one Python process: about 40 % of its time is the
fold (decode, fold, encode), the rest Faust's and aiokafka's per-message work
(fetching, delivering to the stream, acks, producing). With a
:class:`FoldProcess` the agent hands a batch's raw messages and the states
of the sessions they name to one helper process and awaits the result; while
it waits, the event loop goes on fetching and delivering the next batch, so
on two cores both run at once.

The helper is pure: :func:`fold_in_helper` runs :func:`fold_batch` on what it
was given and returns plain tuples. State stays in the worker's Faust table:
the worker looks up the session of each message key (the fold rejects an
event whose key is not its session id, so those are all it needs); should the
fold still ask for another session, the helper reports which it lacked and
the worker asks again with them.

A helper that dies makes the call fail, which ends the worker before the
batch is acked (see ``_Fold.handle``); a helper whose worker died (SIGKILL)
notices within a second and exits, so nothing is left running.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from provstream.streams.batch import Accepted, Message, Outcome, Rejected, fold_batch
from provstream.streams.fold import FoldState

StateDict = dict[str, Any]
# (session_id, triples) for an accepted message, (None, reason, internal) for a rejected one
WireOutcome = tuple[str, bytes] | tuple[None, str, bool]


class FoldProcess:
    """One helper process running :func:`fold_in_helper`; ``close()`` stops it."""

    def __init__(self) -> None:
        self._pool = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("spawn"),
            initializer=_watch_parent, initargs=(os.getpid(),),
        )

    async def start(self) -> None:
        """Start the helper now rather than on the first batch (it takes a moment to import)."""
        await asyncio.get_running_loop().run_in_executor(self._pool, _ready)

    async def fold(
        self, messages: Sequence[tuple[bytes | None, bytes | None]], states: Mapping[str, StateDict | None],
        max_bytes: int,
    ) -> tuple[list[WireOutcome], dict[str, StateDict]] | set[str]:
        """The batch's outcomes and changed states, or the sessions whose state the helper lacked."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, fold_in_helper, messages, states, max_bytes)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def fold_in_helper(
    messages: Sequence[tuple[bytes | None, bytes | None]], states: Mapping[str, StateDict | None], max_bytes: int,
) -> tuple[list[WireOutcome], dict[str, StateDict]] | set[str]:
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


def _ready() -> bool:
    return True


def _watch_parent(parent: int) -> None:
    """In the helper: exit as soon as the worker that started it is gone."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="provstream-parent-watch", daemon=True).start()
