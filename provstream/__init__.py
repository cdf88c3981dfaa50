"""provstream: W3C PROV-O provenance for AI agents and RAG queries, event-sourced on Kafka.

The emitter SDK is importable from the top level (loaded on first use, so
``import provstream`` stays light)::

    from provstream import Emitter, Settings

    with Emitter(Settings.from_env()) as emitter:
        session = emitter.agent("What is the capital of France?")
        session.conclude("Paris")

``provstream.connectors.emitter`` keeps working; these are the same objects.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY = {
    "Emitter": "provstream.connectors.emitter",
    "AgentSession": "provstream.connectors.emitter",
    "DocRagSession": "provstream.connectors.emitter",
    "GraphRagSession": "provstream.connectors.emitter",
    "NullSession": "provstream.connectors.emitter",
    "Settings": "provstream.settings",
}
__all__ = ["AgentSession", "DocRagSession", "Emitter", "GraphRagSession", "NullSession", "Settings", "__version__"]

if TYPE_CHECKING:
    from provstream.connectors.emitter import AgentSession, DocRagSession, Emitter, GraphRagSession, NullSession
    from provstream.settings import Settings


assert set(__all__) == {"__version__", *_LAZY}


def __getattr__(name: str) -> Any:
    """Import the SDK's names on first access (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'provstream' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
