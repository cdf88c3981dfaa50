"""Neo4j CPU per triple of the sink's write statement against variants of it (a script, not a test).

Each round writes ``--sessions`` fresh agent sessions (a collection of their
own: every node is new, as in a sustained run) with :meth:`Neo4jStore.write`
in batches of ``sink_batch_size``, once per variant, alternating, and takes
the Neo4j server's CPU (utime + stime from ``/proc``) over each write. Every
variant is written once before the measured rounds (plan and JIT). The
variants change only the statement's text, so they measure what a clause
costs the server, not whether the graph stays the same:

* ``current``: :data:`.cypher.WRITE_BATCH_QUERY`, the Cypher statement;
* ``procedure``: :data:`.cypher.WRITE_BATCH_PROCEDURE`, the same write through
  the ``provstream.writeBatch`` procedure (the server must have it: the stack's
  ``up`` installs it);
* ``no-lineage``: without the offset lineage (the four ``eventPartition`` ...
  properties), to price them;
* ``lineage-on-create``: the lineage set by ``ON CREATE SET`` and, for a
  node that exists, ``coalesce`` under ``ON MATCH`` (no ``FOREACH``);
* ``lineage-array``: the four offsets as one ``long[]`` property;
* ``no-types``: a new node without its ``types`` list, to price it;
* ``no-props``: without ``SET n += row.props`` (a node's scope and literal
  properties, and so the index entries of its scope), to price them.

Usage (a running private stack, ``PROVSTREAM_*`` set as for ``provstream stack up``):
``.venv/bin/python bench/bench_statement.py [--sessions 2000] [--rounds 8] [--variants no-lineage ...]``.
Prints one line per write and ``<variant>: median <us> us/triple`` per variant.
The scopes it writes are deleted at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from typing import LiteralString, cast

from bench_sink import cpu_seconds, make_data, neo4j_pid

from provstream.connectors.neo4j import cypher as q
from provstream.connectors.neo4j.rows import lineage_rows, triple_count
from provstream.connectors.neo4j.store import Neo4jStore
from provstream.core.triples import StepTriples
from provstream.settings import Settings

_LINEAGE = ("eventPartition", "eventOffset", "triplesPartition", "triplesOffset")
_CREATE = "ON CREATE SET n.graph = row.graph, n.types = row.types, n.selectedChunk = row.chunks, " \
          "n.extraLiterals = row.extra"


def _without_lineage(statement: str) -> str:
    start = statement.index("FOREACH (l IN CASE WHEN row.lineage IS NULL")
    return statement[:start] + statement[statement.index("WITH collect([n, row]) AS written"):]


def _lineage_on_create(statement: str) -> str:
    out = _without_lineage(statement).replace(_CREATE, _CREATE + ", n += coalesce(row.lineage, {})")
    return out.replace("ON MATCH SET\n", "ON MATCH SET\n" + "".join(
        f"  n.{name} = coalesce(n.{name}, row.lineage.{name}),\n" for name in _LINEAGE))


def _lineage_array(statement: str) -> str:
    start = statement.index("FOREACH (l IN CASE WHEN row.lineage IS NULL")
    return (statement[:start] + "FOREACH (l IN CASE WHEN row.lineage IS NULL THEN [] ELSE [row.lineage] END |\n"
            "  SET n.offsets = coalesce(n.offsets, [l.eventPartition, l.eventOffset, l.triplesPartition, "
            "l.triplesOffset]))\n" + statement[statement.index("WITH collect([n, row]) AS written"):])


VARIANTS: dict[str, Callable[[str], str]] = {
    "current": lambda s: s, "no-lineage": _without_lineage, "lineage-on-create": _lineage_on_create,
    "lineage-array": _lineage_array,
    "no-types": lambda s: s.replace("n.types = row.types, ", ""),
    "no-props": lambda s: s.replace("SET n += row.props, ", "SET "),
    "procedure": lambda s: q.WRITE_BATCH_PROCEDURE,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--variants", nargs="+", default=["no-lineage"], choices=sorted(set(VARIANTS) - {"current"}))
    args = parser.parse_args()
    base = Settings.from_env().with_stack_secret()
    server = neo4j_pid(base)
    if server is None:
        raise SystemExit(f"no Neo4j server of the stack in {base.stack_dir}")
    statements = {name: cast(LiteralString, VARIANTS[name](q.WRITE_BATCH_QUERY))
                  for name in ["current", *args.variants]}
    size = base.sink_batch_size
    scopes: list[Settings] = []
    cpu: dict[str, list[float]] = {name: [] for name in statements}

    def data(tag: str, sessions: int) -> list[StepTriples]:
        scope = replace(base, collection=f"bench-statement-{os.getpid()}-{tag}")
        scopes.append(scope)
        return make_data(scope, sessions)[1]

    with Neo4jStore(base) as store:
        store.setup()

        def write(statement: LiteralString, messages: list[StepTriples]) -> None:
            store.write_statement = statement
            for i in range(0, len(messages), size):
                batch = messages[i:i + size]
                lineage = [row for j, m in enumerate(batch) for row in lineage_rows(m, (0, i + j), (0, i + j))]
                store.write(batch, lineage)

        try:
            for name, statement in statements.items():
                write(statement, data(f"warm-{name}", 500))
            for round_ in range(args.rounds):
                for name, statement in statements.items():
                    messages = data(f"{round_}-{name}", args.sessions)
                    triples = triple_count(messages)
                    began, wall = cpu_seconds(server), time.perf_counter()
                    write(statement, messages)
                    cpu[name].append((cpu_seconds(server) - began) / triples * 1e6)
                    print(f"round {round_ + 1} {name}: {triples} triples in {time.perf_counter() - wall:.2f} s, "
                          f"neo4j {cpu[name][-1]:.1f} us/triple", flush=True)
        finally:
            for scope in scopes:
                store.reset_graph(user=scope.user, collection=scope.collection)
    for name, values in cpu.items():
        print(f"{name}: median {statistics.median(values):.1f} us/triple ({', '.join(f'{x:.1f}' for x in values)})")
    print(f"load {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
