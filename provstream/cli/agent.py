"""``tg-invoke-agent``: ask the ReAct agent a question; every step is recorded as it happens.

Without ``PROVSTREAM_LLM_URL`` the built-in heuristic planner answers from the
bundled corpus (no model needed). The last line is ``session: <URI>`` for
``tg-show-explain-trace``. Exit status: 0 answered, 2 stopped without an answer
(tool error, model failure, step limit; the reason is recorded as the
conclusion), 1 nothing could run (e.g. Kafka unreachable).
"""

from __future__ import annotations

import argparse
import uuid
from collections.abc import Sequence
from dataclasses import replace

from provstream.agent.run import AgentRun, invoke
from provstream.cli.guard import guarded
from provstream.core.request import DEFAULT_MAX_STEPS, AgentRequest
from provstream.settings import Settings

PREFIX = {"thought": "Thought: ", "action": "Action: ", "observation": "Observation: ", "answer": "Answer: "}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tg-invoke-agent", description=__doc__.splitlines()[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-q", "--question", required=True, help="the question")
    parser.add_argument("-U", "--user", help="user scope (default: trustgraph)")
    parser.add_argument("-C", "--collection", help="collection scope (default: default)")
    parser.add_argument("--session-id", help="session id (default: a new UUID; '' records nothing)")
    parser.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS,
                        help=f"most planner decisions before stopping (default: {DEFAULT_MAX_STEPS})")
    return parser


def request_from(args: argparse.Namespace, settings: Settings) -> AgentRequest:
    session_id = str(uuid.uuid4()) if args.session_id is None else args.session_id
    return AgentRequest(args.question, user=args.user or settings.user,
                        collection=args.collection or settings.collection,
                        session_id=session_id, max_steps=args.max_steps)


def report(kind: str, text: str) -> None:
    if text:
        print(f"{PREFIX.get(kind, '')}{text}", flush=True)


def run(settings: Settings, request: AgentRequest) -> AgentRun:
    """Connect (only if recording), run, and make sure every step reached Kafka."""
    from provstream.connectors.emitter import Emitter
    from provstream.connectors.transport import KafkaTransport

    with Emitter(replace(settings, user=request.user, collection=request.collection)) as emitter:
        if request.records and isinstance(emitter.transport, KafkaTransport):
            emitter.transport.wait_connected(settings.emit_block_ms / 1000)
        banner(settings)
        result = invoke(emitter, settings, request, report)
        emitter.flush()
    return result


def banner(settings: Settings) -> None:
    if settings.llm_url:
        print(f"[LLM] {settings.llm_model or 'default model'} at {settings.llm_url}", flush=True)
    else:
        print("[heuristic planner] no LLM endpoint configured (PROVSTREAM_LLM_URL): "
              "answering from the bundled corpus", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    return guarded("tg-invoke-agent", invoke_command, build_parser().parse_args(argv))


def invoke_command(args: argparse.Namespace, settings: Settings) -> int:
    result = run(settings, request_from(args, settings))
    print(f"session: {result.uri}" if result.uri else "session: (not recorded: empty --session-id)")
    return 0 if result.outcome.answered else 2
