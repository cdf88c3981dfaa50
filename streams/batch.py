"""Folding raw Kafka messages: the pure step between the Faust adapter and the fold.

:func:`fold_batch` takes the raw bytes of a batch of messages and a read-only
view of the state table, and returns, in input order, an :class:`Accepted`
(the encoded triples message) or a :class:`Rejected` (the reason, for the
dead-letter topic) per message, plus the session states the batch changed.
No I/O: the adapter reads the table through ``lookup`` and writes ``changed``
back once per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from provstream.codec import records as wire
from provstream.core.fold import FoldState, fold
from provstream.core.frozen import quick_init
from provstream.errors import DecodeError, EncodeError, InvalidEvent

Lookup = Callable[[str], FoldState | None]


@quick_init
@dataclass(frozen=True, slots=True)
class Message:
    """What the fold needs of a Kafka message: its key and value bytes."""

    key: bytes | None
    value: bytes | None


@quick_init
@dataclass(frozen=True, slots=True)
class Accepted:
    session_id: str
    triples: bytes  # an encoded provstream.StepTriples


@quick_init
@dataclass(frozen=True, slots=True)
class Rejected:
    """A message for the dead-letter topic; ``internal`` means a bug, not bad input."""

    reason: str
    internal: bool = False


Outcome = Accepted | Rejected


@dataclass(frozen=True)
class BatchResult:
    outcomes: tuple[Outcome, ...]
    changed: dict[str, FoldState] = field(default_factory=dict)


def fold_batch(messages: Sequence[Message], lookup: Lookup, max_bytes: int = 1_000_000) -> BatchResult:
    """Fold ``messages`` in order; a bad message is rejected and the others go on.

    A message whose triples would not fit in ``max_bytes`` is rejected too (the
    broker would refuse it), and its state change is dropped with it.
    """
    states: dict[str, FoldState | None] = {}
    changed: dict[str, FoldState] = {}
    outcomes: list[Outcome] = []
    for message in messages:
        try:
            session_id, state, triples = _fold_one(message, states, lookup)
            if len(triples) > max_bytes:
                raise InvalidEvent(f"its triples take {len(triples)} bytes, over the {max_bytes}-byte limit")
        except (DecodeError, InvalidEvent, EncodeError) as exc:
            outcomes.append(Rejected(f"{type(exc).__name__}: {exc}"))
            continue
        except Exception as exc:  # a bug must not stop the stream: park the message, keep going
            outcomes.append(Rejected(f"internal error {type(exc).__name__}: {exc}", internal=True))
            continue
        if state != states[session_id]:
            states[session_id] = changed[session_id] = state
        outcomes.append(Accepted(session_id, triples))
    return BatchResult(tuple(outcomes), changed)


def _fold_one(
    message: Message, states: dict[str, FoldState | None], lookup: Lookup
) -> tuple[str, FoldState, bytes]:
    if message.value is None:
        raise DecodeError("empty message (tombstone) on the events topic")
    event = wire.decode_event(message.value)
    if message.key != event.session_id.encode():
        raise InvalidEvent(f"message key {message.key!r} is not the session id {event.session_id!r}")
    if event.session_id not in states:
        states[event.session_id] = lookup(event.session_id)
    state, step = fold(states[event.session_id], event)
    return event.session_id, state, wire.encode_triples(step)
