"""``tg-invoke-agent``: ask the ReAct agent a question; every step is recorded as it happens.

Without ``PROVSTREAM_LLM_URL`` the built-in heuristic planner answers from the
bundled corpus (no model needed). The last line is ``session: <URI>`` for
``tg-show-explain-trace``. It returns once the trace (and its search
sub-traces) is queryable in Neo4j, so ``tg-list-explain-traces`` run right
after shows it; the wait is bounded by PROVSTREAM_INVOKE_WAIT_MS (default
60000), and ``--no-wait`` returns as soon as every step reached Kafka.

Exit status: 0 answered, 2 stopped without an answer (tool error, model
failure, step limit; the reason is recorded as the conclusion), 1 nothing
could run (e.g. Kafka unreachable, Neo4j refused the credentials), 3 answered
and recorded on Kafka but the trace was not queryable in Neo4j in time (are
the worker and the sink running? ``provstream stack status``).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Sequence
from dataclasses import replace

from provstream.agent.run import AgentRun, invoke
from provstream.cli.guard import guarded
from provstream.cli.options import add_scope, finish, scope
from provstream.core.request import DEFAULT_MAX_STEPS, AgentRequest
from provstream.settings import Settings

PREFIX = {"thought": "Thought: ", "action": "Action: ", "observation": "Observation: ", "answer": "Answer: "}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tg-invoke-agent", description=__doc__.splitlines()[0],
                                     epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-q", "--question", required=True, help="the question")
    add_scope(parser, " scope")
    parser.add_argument("--session-id", help="session id (default: a new UUID; '' records nothing)")
    parser.add_argument("--no-wait", action="store_true",
                        help="return once every step reached Kafka, without waiting for the trace to be "
                             "queryable in Neo4j")
    parser.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS,
                        help=f"most planner decisions before stopping (default: {DEFAULT_MAX_STEPS})")
    return parser


def request_from(args: argparse.Namespace, settings: Settings) -> AgentRequest:
    session_id = str(uuid.uuid4()) if args.session_id is None else args.session_id
    user, collection = scope(args, settings)
    return AgentRequest(args.question, user=user, collection=collection, session_id=session_id,
                        max_steps=args.max_steps)


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
    return guarded("tg-invoke-agent", invoke_command, finish(build_parser()).parse_args(argv))


def invoke_command(args: argparse.Namespace, settings: Settings) -> int:
    request = request_from(args, settings)
    result = run(settings, request)
    status = 0 if result.outcome.answered else 2
    if result.uri and not args.no_wait:
        status = wait_queryable(replace(settings, user=request.user, collection=request.collection), result) \
            or status
    print(f"session: {result.uri}" if result.uri else "session: (not recorded: empty --session-id)")
    return status


def wait_queryable(settings: Settings, result: AgentRun) -> int:
    """Wait until the run's trace and sub-traces are complete in Neo4j (``settings.invoke_wait_ms`` at most).

    :param settings: the scope (user, collection) the run was recorded in, and the bound.
    :param result: the run; its ``uri`` and ``subtraces`` are waited for.
    :returns: 0 once queryable; 3 after the bound (one line on stderr says what is missing and why).
    :raises StoreError: Neo4j refused the credentials (not worth waiting for).
    """
    from provstream.agent.demo import wait_for_sessions
    from provstream.errors import WaitTimeout

    try:
        wait_for_sessions(settings, [result.uri, *result.subtraces], timeout=settings.invoke_wait_ms / 1000,
                          poll=0.2)
    except WaitTimeout as exc:
        print(f"tg-invoke-agent: the trace is recorded on Kafka ({settings.kafka_bootstrap}) but not queryable: "
              f"{exc}; raise PROVSTREAM_INVOKE_WAIT_MS or pass --no-wait", file=sys.stderr, flush=True)
        return 3
    return 0
