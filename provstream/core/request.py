"""The agent request and its wire form.

Next to ``user`` an :class:`AgentRequest` carries ``collection`` (default
``"default"``) and ``session_id`` (default ``""``). An empty ``session_id``
means "record no provenance": callers that predate these fields keep working
unchanged and record nothing. :meth:`AgentRequest.from_wire` accepts those old
wire dicts (missing keys take the defaults) and ignores keys it does not know.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from provstream.core.vocab import valid_session_id
from provstream.errors import InvalidInput

DEFAULT_USER = "trustgraph"
DEFAULT_COLLECTION = "default"
DEFAULT_MAX_STEPS = 10


@dataclass(frozen=True, slots=True)
class AgentRequest:
    """A question for the ReAct agent, with its provenance scope."""

    question: str
    user: str = DEFAULT_USER
    collection: str = DEFAULT_COLLECTION
    session_id: str = ""
    max_steps: int = DEFAULT_MAX_STEPS

    def __post_init__(self) -> None:
        _check(self)

    @property
    def records(self) -> bool:
        """Whether this request records provenance (a non-empty session id)."""
        return self.session_id != ""

    def to_wire(self) -> dict[str, Any]:
        """A JSON-able dict; :meth:`from_wire` gives the same request back."""
        return {
            "question": self.question,
            "user": self.user,
            "collection": self.collection,
            "session_id": self.session_id,
            "max_steps": self.max_steps,
        }

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> AgentRequest:
        """Read a wire dict; missing ``user``/``collection``/``session_id``/``max_steps`` take the defaults."""
        if not isinstance(data, Mapping):
            raise InvalidInput(f"an agent request must be a JSON object, got {type(data).__name__}")
        if "question" not in data:
            raise InvalidInput("an agent request needs a 'question'")
        return cls(
            question=data["question"],
            user=data.get("user", DEFAULT_USER),
            collection=data.get("collection", DEFAULT_COLLECTION),
            session_id=data.get("session_id", ""),
            max_steps=data.get("max_steps", DEFAULT_MAX_STEPS),
        )


def _check(req: AgentRequest) -> None:
    for name in ("question", "user", "collection", "session_id"):
        value = getattr(req, name)
        if not isinstance(value, str):
            raise InvalidInput(f"agent request field {name!r} must be a string, got {type(value).__name__}")
    if not req.user or not req.collection:
        raise InvalidInput("agent request user and collection must not be empty")
    if req.session_id and not valid_session_id(req.session_id):
        raise InvalidInput(
            f"invalid session id {req.session_id!r}: use 1-128 of [A-Za-z0-9._-], or '' to record nothing"
        )
    if isinstance(req.max_steps, bool) or not isinstance(req.max_steps, int) or req.max_steps < 1:
        raise InvalidInput(f"agent request max_steps must be a positive integer, got {req.max_steps!r}")
