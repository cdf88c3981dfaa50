"""provstream's own exception hierarchy.

Third-party errors (fastavro, kafka-python, aiokafka, the Neo4j driver) are
translated into these at the boundary that meets them. ``retryable`` says
whether trying the same operation again later may succeed.
"""

from __future__ import annotations


class ProvstreamError(Exception):
    """Base class of every error provstream raises on purpose."""

    retryable: bool = False


class ConfigError(ProvstreamError):
    """A setting is missing or malformed."""


class DecodeError(ProvstreamError):
    """Bytes that are not a valid provstream message (names the problem)."""


class EncodeError(ProvstreamError):
    """A value that cannot be written with its schema."""


class InvalidEvent(ProvstreamError):
    """A well-formed event that breaks the contract (bad ids, scope change, ...)."""


class EmitError(ProvstreamError):
    """The emitter could not accept or deliver a step."""


class EmitTimeout(EmitError):
    """The emitter's buffer stayed full (Kafka unreachable) past the timeout."""

    retryable = True


class DeliveryFailed(EmitError):
    """Kafka refused or never acknowledged a buffered step."""

    retryable = True


class InvalidStep(EmitError, ValueError):
    """A step rejected at the emitter call (bad ids, arguments not JSON, ...); nothing was recorded."""


class StepTooLarge(InvalidStep):
    """A step whose encoded size exceeds the broker's message limit."""


class InvalidInput(ProvstreamError, ValueError):
    """Malformed input data: a request's wire form, a line of a trajectory file (names where)."""


class AgentError(ProvstreamError):
    """The ReAct agent could not go on; the message becomes the session's recorded conclusion."""


class LlmError(AgentError):
    """The chat endpoint failed (HTTP error, unreachable, not an OpenAI-style answer)."""

    retryable = True


class ReplyFormatError(AgentError):
    """The model's reply has neither an action nor a final answer in the ReAct format."""


class ToolError(AgentError):
    """A tool call failed: unknown tool, bad input, or the tool itself refused."""


class WaitTimeout(ProvstreamError):
    """Something awaited (e.g. sessions reaching Neo4j) did not happen in time."""

    retryable = True


class StoreUnavailable(ProvstreamError):
    """Neo4j cannot be reached right now; the operation may be retried."""

    retryable = True


class StoreError(ProvstreamError):
    """Neo4j refused an operation (not retryable: bad data or bad query)."""


class TraceNotFound(ProvstreamError):
    """No trace with that IRI in the given scope."""
