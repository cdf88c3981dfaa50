#!/usr/bin/env bash
# Peer benchmark, one command: the official Neo4j Connector for Kafka 5.5.0 (A: Kafka Connect 4.1.2
# standalone, Cypher strategy) vs `provstream sink` (B), same backlog, alternating A,B on a private stack.
#
# Not part of CI. From the repository root (it benchmarks the checkout it lives in):
#
#   make peer-bench                                                     warm-up 3 + 10 measured pairs
#   PAIRS=1 WARMUP=1 make peer-bench                                    quick check
#   A_BATCH=1000 A_POLL=500 bash bench/peer/neo4j_connector/run.sh      the connector's own defaults
#   PEER_CONNECTOR_WRITE=procedure bash bench/peer/neo4j_connector/run.sh  the connector calls the sink's
#                                                                       procedure (default: the Cypher)
#
# It assembles the connector plugin and the Connect runtime (once, assemble.sh), bootstraps the
# project's .venv if missing, starts a private Kafka + Neo4j with the project's deploy scripts on
# non-default ports, generates the backlog, runs the pairs, prints the tables and, as its last line,
#   peer ratio: R (provstream/connector sustained triples/s, median of N pairs); CPU ratio sink+neo4j: C
# and stops the stack. Knobs (environment variables) are listed in README.md.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "run.sh: $*" >&2; exit 1; }

# ---- where things are: the project (the checkout this script lives in), WORK, the data
PROJ=$(cd "${PROJ:-$HERE/../../..}" && pwd)
{ [ -f "$PROJ/deploy/kafka.sh" ] && [ -f "$PROJ/deploy/neo4j.sh" ] && [ -f "$PROJ/scripts/bootstrap" ] \
    && grep -q '^name = "provstream"' "$PROJ/pyproject.toml"; } 2>/dev/null \
  || die "$PROJ is not a provstream checkout (set PROJ to one)"
WORK=${WORK:-$PROJ/.stack/peer-neo4j-connector}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
export WORK
RESULTS_JSONL=${RESULTS_JSONL:-$WORK/results.jsonl}
DATA=${DATA:-$PROJ/provstream/data/react/hotpot_fever.jsonl}  # the bundled trajectories
[ -f "$DATA" ] || die "no ReAct trajectories at $DATA (set DATA to a hotpot_fever.jsonl)"
DATA=$(cd "$(dirname "$DATA")" && pwd)/$(basename "$DATA")

# ---- the private stack's ports (never the defaults) and the Java for the Connect worker
# Below Linux's ephemeral range (32768-60999) and used by no other stack of the project
# (tests/unit/test_private_ports.py reads these defaults); PROVSTREAM_PRIVATE_PORT_OFFSET moves them
# all, as it moves the other private stacks.
PEER_PROVSTREAM_KAFKA_PORT=19292 PEER_PROVSTREAM_KAFKA_CONTROLLER_PORT=19293
PEER_PROVSTREAM_NEO4J_BOLT_PORT=17887 PEER_PROVSTREAM_NEO4J_HTTP_PORT=17674 PEER_PROVSTREAM_CONNECT_PORT=18083
OFF=${PROVSTREAM_PRIVATE_PORT_OFFSET:-0}
export PROVSTREAM_STACK_DIR=$WORK/stack
export PROVSTREAM_KAFKA_PORT=${KAFKA_PORT:-$((PEER_PROVSTREAM_KAFKA_PORT + OFF))}
export PROVSTREAM_KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((PEER_PROVSTREAM_KAFKA_CONTROLLER_PORT + OFF))}
export PROVSTREAM_NEO4J_BOLT_PORT=${BOLT_PORT:-$((PEER_PROVSTREAM_NEO4J_BOLT_PORT + OFF))}
export PROVSTREAM_NEO4J_HTTP_PORT=${HTTP_PORT:-$((PEER_PROVSTREAM_NEO4J_HTTP_PORT + OFF))}
export PROVSTREAM_KAFKA_BOOTSTRAP=127.0.0.1:$PROVSTREAM_KAFKA_PORT
export PROVSTREAM_NEO4J_URI=bolt://127.0.0.1:$PROVSTREAM_NEO4J_BOLT_PORT
export PROVSTREAM_NEO4J_HTTP=http://127.0.0.1:$PROVSTREAM_NEO4J_HTTP_PORT
export PROVSTREAM_KAFKA_CDS=0 PROVSTREAM_NEO4J_CDS=0
CONNECT_PORT=${CONNECT_PORT:-$((PEER_PROVSTREAM_CONNECT_PORT + OFF))}
for p in "$PROVSTREAM_KAFKA_PORT" "$PROVSTREAM_KAFKA_CONTROLLER_PORT" "$PROVSTREAM_NEO4J_BOLT_PORT" \
         "$PROVSTREAM_NEO4J_HTTP_PORT" "$CONNECT_PORT"; do
  case $p in 9092|9093|7687|7474|8083) die "port $p is a default port; use private ones" ;; esac
  [ "$p" -lt 32768 ] || die "port $p is in Linux's ephemeral range (32768-60999); use one below 32768"
done
if [ -n "${PROVSTREAM_JAVA_HOME:-}" ]; then JAVA=$PROVSTREAM_JAVA_HOME/bin/java
elif [ -n "${JAVA_HOME:-}" ]; then JAVA=$JAVA_HOME/bin/java
else JAVA=$(command -v java || true); fi
JAVA_SPEC=$("${JAVA:-java}" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p' \
            || true)
[ -n "$JAVA_SPEC" ] && [ "${JAVA_SPEC%%.*}" -ge 17 ] 2>/dev/null \
  || die "Kafka Connect needs Java 17+ (found '${JAVA:-no java}' ${JAVA_SPEC:-not working}; set PROVSTREAM_JAVA_HOME)"

# ---- 1. the connector plugin and the Kafka Connect runtime (jars/ + Maven Central, cached in WORK)
bash "$HERE/assemble.sh"

# ---- 2. the project's interpreter
[ -x "$PROJ/.venv/bin/provstream" ] || bash "$PROJ/scripts/bootstrap"
PY=$PROJ/.venv/bin/python
cd "$PROJ"
echo "run.sh: provstream $(git log --oneline -1 2>/dev/null || echo '(not a git checkout)'); data $DATA;" \
     "Connect on Java $JAVA_SPEC; WORK $WORK"

# ---- 3. the private stack (the project's deploy scripts tag their processes with the stack dir,
#         so `down` stops only this one)
started=0
cleanup() {
  local rc=$?
  if [ $started = 1 ] && [ "${KEEP_STACK:-0}" != 1 ]; then
    bash deploy/neo4j.sh down >/dev/null 2>&1 || true
    bash deploy/kafka.sh down >/dev/null 2>&1 || true
  fi
  exit $rc
}
trap cleanup EXIT INT TERM
started=1
bash deploy/kafka.sh up
bash deploy/neo4j.sh up

# ---- 4. data, benchmark, report
# The run id names the topics and the sessions' IRIs; HHMMSS as in the recorded runs (a longer id would
# lengthen every IRI and the backlog). A WORK reused on another day must not reuse a topic: skip ids seen.
RUN_ID=$(date -u +%H%M%S)
while [ -e "$WORK/meta-$RUN_ID.json" ]; do sleep 1; RUN_ID=$(date -u +%H%M%S); done
META=$WORK/meta-$RUN_ID.json
"$PY" "$HERE/peerbench.py" gen --sessions "${SESSIONS:-7100}" --data "$DATA" --run-id "$RUN_ID" --meta "$META"
if [ "${PEER_CONNECTOR_WRITE:-cypher}" = cypher ] && ! "$PY" -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["cypher"].strip() != open(sys.argv[2]).read().strip())' \
     "$META" "$HERE/connector-cypher.cypher"; then
  echo "run.sh: note: this checkout's statements give a different connector Cypher than connector-cypher.cypher" \
       "(the template behind the recorded figures); the run uses this checkout's (in $META); regenerate the" \
       "file with: .venv/bin/python bench/peer/neo4j_connector/peerbench.py cypher > bench/peer/neo4j_connector/connector-cypher.cypher"
fi
"$PY" "$HERE/peerbench.py" bench --meta "$META" --out "$RESULTS_JSONL" --work "$WORK" --connect-port "$CONNECT_PORT" \
  --java "$JAVA" --pairs "${PAIRS:-10}" --warmup "${WARMUP:-3}" \
  --a-batch-size "${A_BATCH:-2000}" --a-poll-records "${A_POLL:-2000}"
echo "run.sh: records appended to $RESULTS_JSONL; the tables below are also in $WORK/results-$RUN_ID.md"
[ "${KEEP_STACK:-0}" != 1 ] || echo "run.sh: KEEP_STACK=1: the stack stays up (PROVSTREAM_STACK_DIR=$PROVSTREAM_STACK_DIR)"
"$PY" "$HERE/peerbench.py" report --out "$RESULTS_JSONL" --run-id "$RUN_ID" --md "$WORK/results-$RUN_ID.md"
