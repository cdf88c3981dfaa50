"""Record LangChain / LangGraph agents step by step: :class:`ProvenanceCallbackHandler`.

One line added to an existing agent::

    from provstream import Emitter, Settings
    from provstream.connectors.langchain import ProvenanceCallbackHandler

    with Emitter(Settings.from_env()) as emitter:
        handler = ProvenanceCallbackHandler(emitter)
        agent.invoke({"messages": [("user", "Who directed Alien?")]}, config={"callbacks": [handler]})
        print(handler.last_session)            # urn:trustgraph:agent:{uuid}

Works with ``langchain.agents.create_agent``, LangGraph's prebuilt
``create_react_agent`` and hand-built ``StateGraph`` graphs with a
``ToolNode`` (tool calls in ``AIMessage.tool_calls``), sync or async.
Mapping (see ``docs/integrations.md``):

* the outermost chain/graph run is the Question (the last human message of its
  input, or its ``input`` string); when it ends, the Conclusion (the final
  model text); when it raises, the Conclusion records the error;
* each tool call is an Analysis step: thought = the text of the model message
  that asked for it, action = the tool name, arguments = the tool input as
  JSON, observation = the tool output (or the error it raised);
* a model turn with text and no tool call that is not the final answer is a
  thought-only step; parallel tool calls of one turn all derive from the
  previous turn's steps, and the next turn's steps derive from all of them;
* a retriever run inside a tool is a Document RAG session (question = the
  query, chunks = the documents' ids, synthesis = the tool output) linked as
  the step's sub-trace;
* an agent run (a graph invoked with ``messages``) inside a tool is an agent
  session of its own (its Question, steps and Conclusion) and the tool step's
  agent sub-trace: the step derives from its Conclusion (a nested agent wins
  over a retriever in the same tool; ``handler.links`` lists every nested run);
* an agent run's name (``create_agent(..., name=...)``, ``with_config(run_name=...)``)
  is its Question's ``agent_name``, unless it is LangGraph's default
  ``LangGraph`` or a ``Runnable...`` class name.

Callbacks only append to the emitter's in-process buffer (no network on the
agent's thread), never raise into the agent (a failure is logged once and
counted in :attr:`ProvenanceCallbackHandler.failures`), and are safe across
concurrent runs (state is keyed by run id, behind a lock).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from provstream.connectors._recording import RECENT, Guard, Recent, RunRecorder, error_text, guarded, json_arguments
from provstream.connectors.emitter import AgentSession, DocRagSession, Emitter, NullSession

__all__ = ["ProvenanceCallbackHandler"]

log = logging.getLogger(__name__)



@dataclass
class _Run:
    """One LangChain run the handler tracks: which agent run it belongs to, and the tool it is inside."""

    kind: str  # chain | tool | model | retriever
    context: RunRecorder | None  # the agent run it belongs to
    tool: _Run | None = None  # the outermost tool of that agent run it is inside (itself for that tool)
    root: bool = False  # the run that opened ``context``
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    docrag: list[DocRagSession | NullSession] = field(default_factory=list)
    nested: list[RunRecorder] = field(default_factory=list)
    session: DocRagSession | NullSession | None = None  # a retriever's DocRAG session


class ProvenanceCallbackHandler(BaseCallbackHandler):
    """A LangChain callback handler that records each agent run as a provenance session, step by step.

    Args:
        emitter: the :class:`~provstream.connectors.emitter.Emitter` the steps go through.
        user: the sessions' user (default: the emitter's settings).
        collection: the sessions' collection (default: the emitter's settings).

    Attributes:
        sessions: root run id -> session URI of the agent runs recorded (nested ones too; the last 1,024).
        links: ``(Analysis IRI of a tool step, URI of the agent session run inside that tool)`` pairs (the last 1,024).
        last_session: the URI of the most recent outermost run.

    Example::

        handler = ProvenanceCallbackHandler(emitter, collection="research")
        graph.invoke({"messages": [("user", question)]}, config={"callbacks": [handler]})
        handler.last_session   # -> "urn:trustgraph:agent:..."
    """

    raise_error = False
    run_inline = True  # async runs call it on the event loop, in order (it never blocks)

    def __init__(self, emitter: Emitter, user: str | None = None, collection: str | None = None) -> None:
        super().__init__()
        self.emitter = emitter
        self.user = user
        self.collection = collection
        self.sessions: Recent[UUID, str] = Recent()
        self.links: deque[tuple[str, str]] = deque(maxlen=RECENT)
        self.last_session = ""
        self._runs: dict[UUID, _Run] = {}
        self._lock = threading.Lock()
        self._guard = Guard(log)

    @property
    def failures(self) -> int:
        """How many callbacks failed to record their step (the first is logged)."""
        return self._guard.failures

    # -- bookkeeping -----------------------------------------------------

    def _register(self, run_id: UUID, parent_run_id: UUID | None, kind: str) -> _Run:
        with self._lock:
            parent = self._runs.get(parent_run_id) if parent_run_id is not None else None
        run = _Run(kind, parent.context if parent else None, parent.tool if parent else None)
        if kind == "tool" and run.context is not None and run.tool is None:
            run.tool = run
        with self._lock:
            self._runs[run_id] = run
        return run

    def _get(self, run_id: UUID) -> _Run | None:
        with self._lock:
            return self._runs.get(run_id)

    def _pop(self, run_id: UUID) -> _Run | None:
        with self._lock:
            return self._runs.pop(run_id, None)

    def _open(self, run: _Run, run_id: UUID, inputs: Any, name: Any) -> RunRecorder:
        session = self.emitter.agent(_question(inputs), user=self.user, collection=self.collection,
                                     agent_name=_agent_name(name))
        recorder = RunRecorder(session)
        run.context, run.tool, run.root = recorder, None, True
        self.sessions[run_id] = recorder.uri
        return recorder

    # -- chains (the agent run itself) -------------------------------------

    @guarded
    def on_chain_start(self, serialized: dict[str, Any] | None, inputs: Any, *, run_id: UUID,
                       parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        run = self._register(run_id, parent_run_id, "chain")
        with self._lock:
            parent = self._runs.get(parent_run_id) if parent_run_id is not None else None
        name = kwargs.get("name") or (serialized or {}).get("name")
        if parent is None:
            self._open(run, run_id, inputs, name)
            self.last_session = self.sessions[run_id]
        elif parent.kind == "tool" and parent.tool is parent and isinstance(inputs, Mapping) \
                and "messages" in inputs:
            parent.nested.append(self._open(run, run_id, inputs, name))

    @guarded
    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._pop(run_id)
        if run is not None and run.root and run.context is not None:
            run.context.finish(answer=_final_text(outputs))

    @guarded
    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._pop(run_id)
        if run is not None and run.root and run.context is not None:
            run.context.finish(error=error)

    # -- model turns -----------------------------------------------------------

    @guarded
    def on_chat_model_start(self, serialized: dict[str, Any] | None, messages: Any, *, run_id: UUID,
                            parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._model_start(run_id, parent_run_id)

    @guarded
    def on_llm_start(self, serialized: dict[str, Any] | None, prompts: Any, *, run_id: UUID,
                     parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self._model_start(run_id, parent_run_id)

    def _model_start(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        run = self._register(run_id, parent_run_id, "model")
        if run.context is not None and run.tool is None:
            run.context.model_started()

    @guarded
    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._pop(run_id)
        if run is None or run.context is None or run.tool is not None:
            return  # not a turn of an agent run (a model called inside a tool is part of that tool)
        generations = getattr(response, "generations", None) or [[]]
        first = generations[0][0] if generations and generations[0] else None
        message = getattr(first, "message", None)
        if message is not None:
            text, reasoning = _message_texts(message)
            calls = len(getattr(message, "tool_calls", None) or ())
        else:
            text, reasoning, calls = str(getattr(first, "text", "") or ""), "", 0
        run.context.model_turn(text=text, reasoning=reasoning, tool_calls=calls)

    @guarded
    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._pop(run_id)  # the agent run's own error (on_chain_error) records it

    # -- tools -------------------------------------------------------------------

    @guarded
    def on_tool_start(self, serialized: dict[str, Any] | None, input_str: str, *, run_id: UUID,
                      parent_run_id: UUID | None = None, inputs: dict[str, Any] | None = None,
                      **kwargs: Any) -> None:
        run = self._register(run_id, parent_run_id, "tool")
        run.name = str((serialized or {}).get("name") or kwargs.get("name") or "tool")
        run.arguments = json_arguments(inputs if inputs is not None else input_str)

    @guarded
    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_done(run_id, _text_of(output))

    @guarded
    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._tool_done(run_id, error_text(error))

    def _tool_done(self, run_id: UUID, observation: str) -> None:
        run = self._pop(run_id)
        if run is None or run.context is None or run.tool is not run:
            return  # a tool inside a tool is part of the outer step
        for docrag in run.docrag:
            docrag.synthesize(observation)
        for nested in run.nested:  # normally finished by its own on_chain_end; a run cut short ends here
            nested.finish(answer=observation)
        subtrace: AgentSession | DocRagSession | NullSession | None = None
        agents = [n for n in run.nested if isinstance(n.session, AgentSession)]
        if agents:
            subtrace = agents[-1].session
        elif run.docrag:
            subtrace = run.docrag[-1]
        step = run.context.tool_step(run.name, run.arguments, observation, subtrace=subtrace)
        for nested in run.nested:
            if step and nested.uri:
                self.links.append((step, nested.uri))

    # -- retrievers (Document RAG sub-traces of a tool step) ---------------------

    @guarded
    def on_retriever_start(self, serialized: dict[str, Any] | None, query: str, *, run_id: UUID,
                           parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        run = self._register(run_id, parent_run_id, "retriever")
        if run.tool is not None:
            run.session = self.emitter.docrag(str(query), user=self.user, collection=self.collection)
            run.tool.docrag.append(run.session)

    @guarded
    def on_retriever_end(self, documents: Sequence[Any], *, run_id: UUID, **kwargs: Any) -> None:
        run = self._pop(run_id)
        if run is not None and run.session is not None:
            run.session.explore(len(documents), [_document_id(d, i) for i, d in enumerate(documents, start=1)])

    @guarded
    def on_retriever_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        run = self._pop(run_id)
        if run is not None and run.session is not None:
            run.session.explore(0, [])


# -- reading LangChain values ---------------------------------------------------

def _message_texts(message: Any) -> tuple[str, str]:
    """``(text, reasoning)`` of a message: its text blocks and its reasoning blocks, each joined."""
    blocks = None
    try:
        blocks = message.content_blocks  # langchain-core 1.x standard blocks
    except Exception:  # noqa: BLE001 - older or custom messages
        blocks = None
    if not isinstance(blocks, list):
        content = getattr(message, "content", "")
        return (content if isinstance(content, str) else str(content)), ""
    text = "".join(b.get("text", "") for b in blocks if isinstance(b, Mapping) and b.get("type") == "text")
    reasoning = "\n".join(b.get("reasoning", "") for b in blocks
                          if isinstance(b, Mapping) and b.get("type") == "reasoning" and b.get("reasoning"))
    return text, reasoning


def _text_of(value: Any) -> str:
    """A tool output as text: a message's text, a string as is, anything else as JSON (or ``str``)."""
    if isinstance(value, str):
        return value
    if hasattr(value, "content"):
        return _message_texts(value)[0]
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _is_human(message: Any) -> tuple[bool, Any]:
    if isinstance(message, str):
        return True, message
    if isinstance(message, tuple | list) and len(message) == 2:
        return message[0] in ("human", "user"), message[1]
    if isinstance(message, Mapping):
        return message.get("role", message.get("type")) in ("human", "user"), message.get("content", "")
    return getattr(message, "type", None) == "human", message


def _question(inputs: Any) -> str:
    """The question of an agent run: the last human message of ``messages``, or ``input``, or the input itself."""
    if isinstance(inputs, str):
        return inputs
    if isinstance(inputs, Mapping):
        messages = inputs.get("messages")
        if isinstance(messages, Sequence) and not isinstance(messages, str):
            for message in reversed(messages):
                human, content = _is_human(message)
                if human:
                    return content if isinstance(content, str) else _text_of(content)
        if isinstance(inputs.get("input"), str):
            return str(inputs["input"])
    return _text_of(inputs)


def _final_text(outputs: Any) -> str:
    """The last AI message's text of an agent run's output (``messages``), or the ``output`` string."""
    if isinstance(outputs, Mapping):
        messages = outputs.get("messages")
        if isinstance(messages, Sequence) and messages and not isinstance(messages, str):
            last = messages[-1]
            if getattr(last, "type", None) == "ai":
                return _message_texts(last)[0]
        if isinstance(outputs.get("output"), str):
            return str(outputs["output"])
    if isinstance(outputs, str):
        return outputs
    return ""


def _agent_name(name: Any) -> str | None:
    """An agent run's name as its ``agent_name``; LangGraph's default ``LangGraph`` and ``Runnable...`` names are none.

    >>> _agent_name("researcher"), _agent_name("LangGraph"), _agent_name("RunnableSequence")
    ('researcher', None, None)
    """
    if not isinstance(name, str) or not name or name == "LangGraph" or name.startswith("Runnable"):
        return None
    return name


def _document_id(document: Any, number: int) -> str:
    """A retrieved document's chunk id: its ``id``, else ``metadata['id']`` / ``['source']``, else its rank."""
    doc_id = getattr(document, "id", None)
    if doc_id:
        return str(doc_id)
    metadata = getattr(document, "metadata", None) or {}
    for key in ("id", "chunk_id", "source"):
        if metadata.get(key):
            return str(metadata[key])
    return f"document-{number}"
