"""Folding in a helper process: the same outcomes and states as folding in place."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from provstream import testing
from provstream.codec import records as wire
from provstream.core.fold import FoldState
from provstream.data import REACT_TRAJECTORIES
from provstream.streams.batch import Accepted, Message, Rejected, fold_batch
from provstream.streams.offload import FoldProcess, fold_in_helper, from_wire

T0 = datetime(2025, 1, 2, tzinfo=UTC)


def session_events(sid: str, index: int = 0) -> list:
    record = testing.load_trajectories(REACT_TRAJECTORIES)[index]
    return list(testing.trajectory_events(record, sid, T0))


def raw(events: list, key: bytes | None = None) -> list[tuple[bytes | None, bytes | None]]:
    return [(key if key is not None else e.session_id.encode(), wire.encode_event(e)) for e in events]


def test_the_helper_gives_what_fold_batch_gives_in_place() -> None:
    first, second = session_events("h1"), session_events("h2", 1)
    messages = raw(first[:3]) + [(b"junk", b"not avro")] + raw(second) + raw(first[3:])
    in_place = fold_batch([Message(k, v) for k, v in messages], lambda _sid: None)
    folded = fold_in_helper(messages, {"h1": None, "h2": None}, 1_000_000)
    assert not isinstance(folded, set)
    outcomes, changed = folded
    assert from_wire(outcomes) == in_place.outcomes
    assert changed == {sid: state.to_dict() for sid, state in in_place.changed.items()}
    assert isinstance(in_place.outcomes[3], Rejected)


def test_stored_states_are_used_as_the_table_holds_them() -> None:
    events = session_events("h3")
    half = fold_batch([Message(k, v) for k, v in raw(events[:2])], lambda _sid: None)
    stored = {sid: state.to_dict() for sid, state in half.changed.items()}
    rest = fold_batch([Message(k, v) for k, v in raw(events[2:])], lambda sid: FoldState.from_dict(stored[sid]))
    folded = fold_in_helper(raw(events[2:]), stored, 1_000_000)
    assert not isinstance(folded, set)
    assert from_wire(folded[0]) == rest.outcomes
    assert folded[1] == {sid: state.to_dict() for sid, state in rest.changed.items()}


def test_a_session_whose_state_was_not_given_is_asked_for() -> None:
    events = session_events("h4")
    assert fold_in_helper(raw(events), {}, 1_000_000) == {"h4"}
    assert not isinstance(fold_in_helper(raw(events), {"h4": None}, 1_000_000), set)


def test_an_event_keyed_by_another_session_is_rejected_without_a_lookup() -> None:
    events = session_events("h7")
    folded = fold_in_helper(raw(events, key=b"other-key"), {"other-key": None}, 1_000_000)
    assert not isinstance(folded, set)
    assert all(isinstance(o, Rejected) and "is not the session id" in o.reason for o in from_wire(folded[0]))


def test_wire_outcomes_round_trip() -> None:
    outcomes = (Accepted("s", b"\x01\x02"), Rejected("DecodeError: x"), Rejected("internal error", internal=True))
    wired = [(o.session_id, o.triples) if isinstance(o, Accepted) else (None, o.reason, o.internal) for o in outcomes]
    assert from_wire(wired) == outcomes


def test_a_real_helper_process_folds_a_batch_and_stops() -> None:
    events = session_events("h5")
    helper = FoldProcess()

    async def run() -> object:
        await helper.start()
        try:
            return await helper.fold(raw(events), {"h5": None}, 1_000_000)
        finally:
            await helper.close()

    folded = asyncio.run(run())
    expected = fold_batch([Message(k, v) for k, v in raw(events)], lambda _sid: None)
    assert not isinstance(folded, set) and from_wire(folded[0]) == expected.outcomes  # type: ignore[index]


def test_an_oversized_result_is_rejected_in_the_helper_too() -> None:
    events = session_events("h6")
    folded = fold_in_helper(raw(events[:1]), {"h6": None}, 10)
    assert not isinstance(folded, set)
    [outcome] = from_wire(folded[0])
    assert isinstance(outcome, Rejected) and "over the 10-byte limit" in outcome.reason
    assert folded[1] == {}
