"""The pure batch step between Faust and the fold: raw bytes in, triples or rejections out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from provstream import testing
from provstream.codec import records as wire
from provstream.core.fold import FoldState
from provstream.core.triples import SessionState
from provstream.data import REACT_TRAJECTORIES
from provstream.streams.batch import Accepted, Message, Rejected, fold_batch

T0 = datetime(2025, 1, 2, tzinfo=UTC)


def session_messages(sid: str, index: int = 0) -> list[Message]:
    record = testing.load_trajectories(REACT_TRAJECTORIES)[index]
    return [Message(sid.encode(), wire.encode_event(e)) for e in testing.trajectory_events(record, sid, T0)]


def no_state(_sid: str) -> FoldState | None:
    return None


def test_a_session_folds_to_one_triples_message_per_step() -> None:
    msgs = session_messages("t1")
    result = fold_batch(msgs, no_state)
    assert all(isinstance(o, Accepted) and o.session_id == "t1" for o in result.outcomes)
    last = wire.decode_triples(result.outcomes[-1].triples)  # type: ignore[union-attr]
    assert last.status.state is SessionState.CONCLUDED and last.status.steps == len(msgs)
    assert set(result.changed) == {"t1"}


def test_bad_messages_are_rejected_and_the_rest_goes_on() -> None:
    good = session_messages("t2")
    bad = [
        Message(b"t2", b"not an avro single-object message"),
        Message(b"t2", None),
        Message(b"not-the-session", good[0].value),
    ]
    result = fold_batch([bad[0], good[0], bad[1], bad[2], *good[1:]], no_state)
    kinds = [type(o) for o in result.outcomes]
    assert kinds == [Rejected, Accepted, Rejected, Rejected] + [Accepted] * (len(good) - 1)
    reasons = [o.reason for o in result.outcomes if isinstance(o, Rejected)]
    assert reasons[0].startswith("DecodeError: wrong magic")
    assert "tombstone" in reasons[1] and "is not the session id" in reasons[2]


def test_state_comes_from_the_table_and_only_changes_are_written_back() -> None:
    msgs = session_messages("t3")
    first = fold_batch(msgs[:2], no_state)
    table = {k: s.to_dict() for k, s in first.changed.items()}

    def lookup(sid: str) -> FoldState | None:
        return FoldState.from_dict(table[sid]) if sid in table else None

    again = fold_batch(msgs[:2], lookup)  # redelivery: nothing new
    assert again.changed == {}
    assert all(wire.decode_triples(o.triples).duplicate for o in again.outcomes)  # type: ignore[union-attr]
    rest = fold_batch(msgs[2:], lookup)
    assert wire.decode_triples(rest.outcomes[-1].triples).status.state is SessionState.CONCLUDED  # type: ignore[union-attr]


def test_a_conflicting_step_is_rejected_without_touching_the_state() -> None:
    msgs = session_messages("t4")
    e = wire.decode_event(msgs[1].value)  # type: ignore[arg-type]
    conflict = Message(b"t4", wire.encode_event(replace(e, event_id="other")))
    result = fold_batch([msgs[0], msgs[1], conflict], no_state)
    assert isinstance(result.outcomes[2], Rejected) and "conflicting step" in result.outcomes[2].reason
    assert len(result.changed["t4"].steps) == 2


def test_oversized_triples_are_rejected() -> None:
    result = fold_batch(session_messages("t5")[:1], no_state, max_bytes=50)
    assert isinstance(result.outcomes[0], Rejected) and "over the 50-byte limit" in result.outcomes[0].reason
    assert result.changed == {}
