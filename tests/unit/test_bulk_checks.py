"""The bulk rebuild's sink-group check waits for a coordinator that is not ready yet (connectors.bulk)."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.errors import CoordinatorNotAvailableError, GroupAuthorizationFailedError, KafkaError

from provstream.connectors.bulk import describe_group


class Admin:
    """Answers ``describe_groups`` with the queued errors first, then a description."""

    def __init__(self, *errors: KafkaError) -> None:
        self.errors = list(errors)
        self.calls = 0

    def describe_groups(self, group_ids: list[str]) -> dict[str, Any]:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return {group_ids[0]: {"members": []}}


def test_a_coordinator_that_is_not_ready_yet_is_waited_for() -> None:
    admin, slept = Admin(CoordinatorNotAvailableError(), CoordinatorNotAvailableError()), []
    assert describe_group(admin, "g", sleep=slept.append) == {"g": {"members": []}}
    assert admin.calls == 3 and slept == [0.5, 0.5]


def test_a_coordinator_that_never_becomes_ready_raises_after_the_wait() -> None:
    admin = Admin(*[CoordinatorNotAvailableError() for _ in range(5)])
    with pytest.raises(CoordinatorNotAvailableError):
        describe_group(admin, "g", wait_s=0.0, sleep=lambda s: None)
    assert admin.calls == 1


def test_an_error_that_retrying_cannot_fix_is_raised_at_once() -> None:
    admin = Admin(GroupAuthorizationFailedError())
    with pytest.raises(GroupAuthorizationFailedError):
        describe_group(admin, "g", sleep=lambda s: pytest.fail("slept"))
    assert admin.calls == 1
