#!/usr/bin/env bash
# deploy/kafka.sh - real Apache Kafka brokers (KRaft, combined broker +
# controller) assembled from Maven Central jars, run as plain java processes:
# one node by default, or a cluster of PROVSTREAM_KAFKA_BROKERS nodes forming
# one controller quorum. No Docker, no tarball.
#
#   deploy/kafka.sh resolve      fetch the jars into $STACK/lib/kafka (once; marker file)
#   deploy/kafka.sh up [ID]      resolve, write config, format storage once, start every broker
#                                that is not running (or only broker ID), wait until all are ready
#   deploy/kafka.sh down [ID]    stop (SIGTERM, up to 30 s, then SIGKILL) every broker, or only
#                                broker ID (1..N); harmless when stopped
#   deploy/kafka.sh status       one line per broker "kafka <version> [broker <id>] 127.0.0.1:<port>
#                                running|stopped"; exit 0 when all run, 3 otherwise
#
# Environment:
#   PROVSTREAM_STACK_DIR              default <repo>/.stack
#   PROVSTREAM_KAFKA_PORT             default 9092  (PLAINTEXT, 127.0.0.1 only)
#   PROVSTREAM_KAFKA_CONTROLLER_PORT  default 9093  (KRaft controller, 127.0.0.1 only)
#   PROVSTREAM_KAFKA_BROKERS          default 1; N > 1 starts N brokers, a N-voter quorum. Broker i
#                                     (1..N) listens on PORT+2(i-1), its controller on
#                                     CONTROLLER_PORT+2(i-1) (9092/9094/9096, 9093/9095/9097)
#   PROVSTREAM_KAFKA_REPLICATION_FACTOR default 0 = derived: min(N, 3)
#   PROVSTREAM_KAFKA_MIN_INSYNC_REPLICAS default 0 = derived: RF-1 (RF 3 -> 2), at least 1
#   PROVSTREAM_KAFKA_HEAP             default 768m (one broker), 320m per broker in a cluster
#   PROVSTREAM_JAVA_HOME              default /usr/lib/jvm/java-17-openjdk-amd64,
#                                     falls back to `java` on PATH (Java 17+ needed)
#   PROVSTREAM_KAFKA_READY_TIMEOUT    default 90 (seconds)
#   PROVSTREAM_KAFKA_OPTS             extra JVM options (optional)
#   PROVSTREAM_KAFKA_CDS              default 1; 0 disables the AppCDS archive (faster warm starts)
#   PROVSTREAM_SECURE                 default 0; 1: SASL_SSL (SCRAM-SHA-512 users bootstrapped at
#                                     format time), the KRaft StandardAuthorizer, an mTLS controller
#                                     listener; certificates and passwords from deploy/secrets.sh
#                                     (docs/security.md). A data directory keeps the mode it was
#                                     formatted with.
#
# Layout under $STACK: lib/kafka (jars), data/kafka (log.dirs + KRaft metadata),
# logs/kafka.log (server stdout/stderr; previous run kept as kafka.log.1),
# logs/kafka-resolve.log (Maven output), run/kafka.pid, conf/kafka/ (generated:
# server.properties, log4j2.xml, cluster.id), lib/kafka/cds (AppCDS archive).
# In a cluster each broker i has data/kafka-i, logs/kafka-i.log, run/kafka-i.pid
# and conf/kafka-i/ (see broker_layout); cluster.id stays in conf/kafka/.
#
# Errors are one line on stderr, "provstream: kafka: <cause> (see <log>)", exit 1.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
STACK=${PROVSTREAM_STACK_DIR:-$REPO/.stack}
case $STACK in /*) ;; *) STACK=$PWD/$STACK ;; esac
PORT=${PROVSTREAM_KAFKA_PORT:-9092}
CPORT=${PROVSTREAM_KAFKA_CONTROLLER_PORT:-9093}
# unset: the count this stack's running brokers were started with (conf/kafka/brokers), else 1
BROKERS=${PROVSTREAM_KAFKA_BROKERS:-}
if [ -z "$BROKERS" ]; then
    BROKERS=1
    if [ -s "$STACK/conf/kafka/brokers" ] && pgrep -f -- "-Dprovstream.kafka.stack=$STACK " >/dev/null 2>&1; then
        BROKERS=$(cat "$STACK/conf/kafka/brokers")
    fi
fi
RF=${PROVSTREAM_KAFKA_REPLICATION_FACTOR:-0}
MIN_ISR=${PROVSTREAM_KAFKA_MIN_INSYNC_REPLICAS:-0}
if [ "$BROKERS" = 1 ]; then HEAP=${PROVSTREAM_KAFKA_HEAP:-768m}; else HEAP=${PROVSTREAM_KAFKA_HEAP:-320m}; fi
READY_TIMEOUT=${PROVSTREAM_KAFKA_READY_TIMEOUT:-90}
STOP_TIMEOUT=30
TLS=$STACK/secrets/tls

TEMPLATES=$HERE/kafka
POM=$TEMPLATES/pom.xml
LIB=$STACK/lib/kafka
MARKER=$LIB/.resolved
LOGDIR=$STACK/logs
RESOLVE_LOG=$LOGDIR/kafka-resolve.log
RUN=$STACK/run
LOCKFILE=$RUN/kafka.lock
CONF=$STACK/conf/kafka  # cluster-wide: cluster.id, brokers (the count last started)
# PROVSTREAM_SECURE unset: the mode the (first broker's) data was formatted with (status/down just work)
if [ "$BROKERS" = 1 ]; then DATA1=$STACK/data/kafka; else DATA1=$STACK/data/kafka-1; fi
SECURE=${PROVSTREAM_SECURE:-$(cat "$DATA1/.provstream-secure" 2>/dev/null || echo 0)}
# Tag on the java command line: identifies this stack's processes for `down`.
TAG="-Dprovstream.kafka.stack=$STACK"

# ---------------------------------------------------------------- broker layout
# Everything that differs between the brokers of a stack is computed here, from
# the broker id (1..BROKERS). One broker (the default) keeps the historical
# names: data/kafka, logs/kafka.log, run/kafka.pid, conf/kafka/.
B_ID= B_PORT= B_CPORT= DATA= LOG= PIDFILE= BCONF= NODE_TAG=
broker_layout() { # $1 = broker id; sets the B_* and per-broker path variables
    local sfx=
    [ "$BROKERS" = 1 ] || sfx=-$1
    B_ID=$1
    B_PORT=$((PORT + 2 * ($1 - 1)))
    B_CPORT=$((CPORT + 2 * ($1 - 1)))
    DATA=$STACK/data/kafka$sfx
    LOG=$LOGDIR/kafka$sfx.log
    PIDFILE=$RUN/kafka$sfx.pid
    BCONF=$STACK/conf/kafka$sfx
    # a cluster's brokers also carry their id (one broker: the stack tag is enough)
    if [ "$BROKERS" = 1 ]; then NODE_TAG=; else NODE_TAG="-Dprovstream.kafka.node=$1"; fi
}

broker_ids() { seq 1 "$BROKERS"; }

voters() { # controller.quorum.voters: every broker is a voter
    local id out=
    for id in $(broker_ids); do out+="${out:+,}$id@127.0.0.1:$((CPORT + 2 * (id - 1)))"; done
    printf '%s' "$out"
}

effective_rf() { if [ "$RF" != 0 ]; then echo "$RF"; elif ((BROKERS < 3)); then echo "$BROKERS"; else echo 3; fi; }
effective_min_isr() {
    local rf
    rf=$(effective_rf)
    if [ "$MIN_ISR" != 0 ]; then echo "$MIN_ISR"; elif ((rf > 1)); then echo $((rf - 1)); else echo 1; fi
}

VERSION=$(sed -n 's:.*<kafka\.version>\(.*\)</kafka\.version>.*:\1:p' "$POM" | head -n 1)

# ---------------------------------------------------------------- helpers

show() { # path as the user typed it (relative to the cwd when below it)
    case $1 in "$PWD"/*) printf '%s' "${1#"$PWD"/}" ;; *) printf '%s' "$1" ;; esac
}

die() {
    echo "provstream: kafka: $*" >&2
    exit 1
}

validate_env() {
    local p id
    [[ $BROKERS =~ ^[1-9][0-9]?$ ]] || die "invalid PROVSTREAM_KAFKA_BROKERS '$BROKERS' (1..99)"
    [[ $RF =~ ^[0-9]+$ ]] && ((RF <= BROKERS)) || die "invalid PROVSTREAM_KAFKA_REPLICATION_FACTOR '$RF' (0 = derived, at most PROVSTREAM_KAFKA_BROKERS=$BROKERS)"
    [[ $MIN_ISR =~ ^[0-9]+$ ]] && ((MIN_ISR <= $(effective_rf))) || die "invalid PROVSTREAM_KAFKA_MIN_INSYNC_REPLICAS '$MIN_ISR' (0 = derived, at most the replication factor $(effective_rf))"
    for p in "$PORT" "$CPORT"; do
        [[ $p =~ ^[0-9]+$ ]] && ((p > 0 && p + 2 * (BROKERS - 1) < 65536)) || die "invalid port '$p' (PROVSTREAM_KAFKA_PORT / PROVSTREAM_KAFKA_CONTROLLER_PORT)"
    done
    local -A seen=()
    for id in $(broker_ids); do
        for p in $((PORT + 2 * (id - 1))) $((CPORT + 2 * (id - 1))); do
            [ -z "${seen[$p]:-}" ] || die "PROVSTREAM_KAFKA_PORT=$PORT and PROVSTREAM_KAFKA_CONTROLLER_PORT=$CPORT give port $p twice for $BROKERS brokers (broker i uses PORT+2(i-1) and CONTROLLER_PORT+2(i-1))"
            seen[$p]=1
        done
    done
    broker_layout 1
    [[ $HEAP =~ ^[0-9]+[kKmMgG]?$ ]] || die "invalid PROVSTREAM_KAFKA_HEAP '$HEAP' (e.g. 768m)"
    [[ $READY_TIMEOUT =~ ^[0-9]+$ ]] || die "invalid PROVSTREAM_KAFKA_READY_TIMEOUT '$READY_TIMEOUT'"
    [ -n "$VERSION" ] || die "no <kafka.version> in $(show "$POM")"
}

JAVA=
JAVA_HOME_SEL=
JAVA_ID=
find_java() {
    [ -z "$JAVA" ] || return 0
    local jh=${PROVSTREAM_JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64} cand out spec
    for cand in "$jh/bin/java" "$(command -v java 2>/dev/null || true)"; do
        [ -n "$cand" ] && [ -x "$cand" ] || continue
        out=$("$cand" -XshowSettings:properties -version 2>&1) || continue
        spec=$(sed -n 's/^ *java\.specification\.version = //p' <<<"$out" | head -n 1)
        [[ ${spec%%.*} =~ ^[0-9]+$ ]] || continue
        if ((${spec%%.*} < 17)); then
            die "Java $spec at $cand is too old, Kafka $VERSION needs Java 17+ (set PROVSTREAM_JAVA_HOME)"
        fi
        JAVA=$cand
        JAVA_HOME_SEL=$(sed -n 's/^ *java\.home = //p' <<<"$out" | head -n 1)
        [ -n "$JAVA_HOME_SEL" ] || JAVA_HOME_SEL=$(dirname "$(dirname "$(readlink -f "$cand")")")
        # identifies this JVM build (class-data-sharing archives are per JVM)
        JAVA_ID=$(printf '%s|%s' "$(readlink -f "$cand")" \
            "$(sed -n 's/^ *java\.vm\.version = //p' <<<"$out" | head -n 1)" | sha256sum | cut -c1-12)
        return 0
    done
    die "no working Java found (tried $jh/bin/java and java on PATH; set PROVSTREAM_JAVA_HOME)"
}

lock() { # serialise resolve/up/down of one stack
    mkdir -p "$RUN"
    exec 9>"$LOCKFILE"
    flock -w 180 9 || die "another deploy/kafka.sh is still running for $(show "$STACK") (lock $(show "$LOCKFILE"))"
}

alive() { # pid exists and is not a zombie
    local st
    [ -r "/proc/$1/stat" ] || return 1
    st=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || return 1
    [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

is_ours() { # pid is a live kafka.Kafka JVM of this stack
    alive "$1" || return 1
    local cmd
    cmd=$(tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null) || return 1
    grep -qxF -- "$TAG" <<<"$cmd" && grep -qxF -- kafka.Kafka <<<"$cmd" &&
        { [ -z "$NODE_TAG" ] || grep -qxF -- "$NODE_TAG" <<<"$cmd"; }
}

pid_from_file() { # prints the recorded pid if it is a live broker of this stack
    local pid
    [ -f "$PIDFILE" ] || return 1
    pid=$(head -n 1 "$PIDFILE" 2>/dev/null || true)
    [[ $pid =~ ^[0-9]+$ ]] && is_ours "$pid" || return 1
    echo "$pid"
}

find_pid() { # the broker of this stack: the recorded pid, else a tagged kafka.Kafka process
    local p
    if pid_from_file; then return 0; fi
    for p in $(stack_pids); do
        if is_ours "$p"; then echo "$p"; return 0; fi
    done
    return 1
}

stack_pids() { # every live process carrying this stack's tag (broker, storage tool)
    local re
    re=$(printf '%s' "$TAG" | sed 's/[][\\.*^$+?(){}|]/\\&/g')
    pgrep -f -- "${re}( |\$)" 2>/dev/null | while read -r p; do
        [ "$p" != "$$" ] && alive "$p" && echo "$p"
    done || true
}

port_open() { # something accepts TCP connections on 127.0.0.1:$1
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

kafka_answers() { # the broker answers on 127.0.0.1:$1 (secured: a verified TLS handshake)
    if [ "$SECURE" = 1 ]; then
        timeout 5 openssl s_client -connect "127.0.0.1:$1" -CAfile "$TLS/ca.pem" -verify_return_error \
            -verify_ip 127.0.0.1 </dev/null >/dev/null 2>&1
        return
    fi
    kafka_plain_answers "$1"
}

kafka_plain_answers() { # a Kafka ApiVersions v0 request on 127.0.0.1:$1 gets a response
    # request: size=12, api_key=18, api_version=0, correlation_id=0x70726f76, client_id="ps"
    # (any answer counts, even UNSUPPORTED_VERSION: it proves the request path works)
    local out
    out=$(timeout 3 bash -c '
        exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
        printf "\x00\x00\x00\x0c\x00\x12\x00\x00\x70\x72\x6f\x76\x00\x02ps" >&3
        head -c 8 <&3 | od -An -tx1' _ "$1" 2>/dev/null) || return 1
    out=$(tr -d ' \n' <<<"$out")
    [ "${out:8:8}" = 70726f76 ]
}

KILLED=0
stop_pids() { # SIGTERM, wait up to $1 s, then SIGKILL (sets KILLED=1)
    local timeout=$1 p left deadline
    shift
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null || true
    deadline=$((SECONDS + timeout))
    while :; do
        left=()
        for p in "$@"; do alive "$p" && left+=("$p"); done
        [ ${#left[@]} -gt 0 ] || return 0
        ((SECONDS < deadline)) || break
        sleep 0.25
    done
    KILLED=1
    kill -KILL "${left[@]}" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while ((SECONDS < deadline)); do
        left=()
        for p in "$@"; do alive "$p" && left+=("$p"); done
        [ ${#left[@]} -gt 0 ] || return 0
        sleep 0.2
    done
    return 1
}

# ---------------------------------------------------------------- resolve

resolve_stamp() {
    echo "kafka_2.13 $VERSION $(sha256sum "$POM" | cut -d' ' -f1)"
}

is_resolved() {
    [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "$(resolve_stamp)" ]
}

do_resolve() {
    is_resolved && return 0
    command -v mvn >/dev/null 2>&1 || die "Maven (mvn) not found; it is needed once to fetch the Kafka $VERSION jars into $(show "$LIB")"
    find_java
    mkdir -p "$LOGDIR" "$(dirname "$LIB")"
    local tmp=$LIB.tmp.$$
    rm -rf "$tmp"
    mkdir -p "$tmp"
    if ! JAVA_HOME=$JAVA_HOME_SEL mvn -B -q -Dstyle.color=never -f "$POM" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$tmp" >"$RESOLVE_LOG" 2>&1 </dev/null 9>&-; then
        rm -rf "$tmp"
        die "could not resolve org.apache.kafka:kafka_2.13:$VERSION from Maven (see $(show "$RESOLVE_LOG"))"
    fi
    if [ ! -f "$tmp/kafka_2.13-$VERSION.jar" ] || [ ! -f "$tmp/kafka-clients-$VERSION.jar" ]; then
        rm -rf "$tmp"
        die "Maven finished but kafka_2.13-$VERSION.jar is missing (see $(show "$RESOLVE_LOG"))"
    fi
    resolve_stamp >"$tmp/.resolved"
    rm -rf "$LIB"
    mv "$tmp" "$LIB"
}

# ---------------------------------------------------------------- up

sed_escape() { printf '%s' "$1" | sed 's/[\\&|]/\\&/g'; }

write_config() { # of the broker set by broker_layout
    mkdir -p "$CONF" "$BCONF" "$DATA"
    sed -e "s|@PORT@|$B_PORT|g" \
        -e "s|@CONTROLLER_PORT@|$B_CPORT|g" \
        -e "s|@NODE_ID@|$B_ID|g" \
        -e "s|@VOTERS@|$(voters)|g" \
        -e "s|@RF@|$(effective_rf)|g" \
        -e "s|@MIN_ISR@|$(effective_min_isr)|g" \
        -e "s|@DATA_DIR@|$(sed_escape "$DATA")|g" \
        "$TEMPLATES/server.properties.in" >"$BCONF/server.properties.tmp"
    if [ "$SECURE" = 1 ]; then
        secure_config "$BCONF/server.properties.tmp"
    fi
    mv "$BCONF/server.properties.tmp" "$BCONF/server.properties"
    cp "$TEMPLATES/log4j2.xml" "$BCONF/log4j2.xml"
}

secure_config() { # $1: a broker's rendered plain config, turned into the secured one (mode 0600: it holds passwords)
    local f=$1 storepass admin
    chmod 600 "$f"
    storepass=$(cat "$TLS/store-password")
    admin=$(cat "$STACK/secrets/kafka/admin")
    sed -i -e '/^listeners=/d' -e '/^advertised.listeners=/d' -e '/^inter.broker.listener.name=/d' \
        -e '/^listener.security.protocol.map=/d' "$f"
    cat >>"$f" <<EOF

# ---- PROVSTREAM_SECURE=1 (deploy/kafka.sh secure_config; docs/security.md) ----
# Clients: SASL_SSL with SCRAM-SHA-512 (users bootstrapped at format time).
# Controller: TLS with client certificates; the broker's certificate (CN=kafka-broker) is its principal.
listeners=SASL_SSL://127.0.0.1:$B_PORT,CONTROLLER://127.0.0.1:$B_CPORT
advertised.listeners=SASL_SSL://127.0.0.1:$B_PORT
inter.broker.listener.name=SASL_SSL
listener.security.protocol.map=CONTROLLER:SSL,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin";
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS/kafka.p12
ssl.keystore.password=$storepass
ssl.truststore.type=PKCS12
ssl.truststore.location=$TLS/truststore.p12
ssl.truststore.password=$storepass
ssl.endpoint.identification.algorithm=https
listener.name.controller.ssl.client.auth=required
ssl.principal.mapping.rules=RULE:^CN=([^,]*)\$/\$1/,DEFAULT
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:kafka-broker
allow.everyone.if.no.acl.found=false
EOF
}

jvm_common() {
    local cp
    # explicit, sorted class path (not "$LIB/*"): stable across runs, as AppCDS requires
    cp=$(printf '%s:' "$LIB"/*.jar)
    printf '%s\n' "$TAG" ${NODE_TAG:+"$NODE_TAG"} \
        "-Dlog4j2.configurationFile=$BCONF/log4j2.xml" \
        "-Dkafka.logs.dir=$LOGDIR" \
        -Djava.awt.headless=true \
        -cp "${cp%:}"
}

# AppCDS: the first broker run dumps the classes it loaded into a dynamic
# archive when it exits cleanly (`down`); later starts map it (-40 % startup
# time on 2 cores). The archive lives in $LIB/cds, so a new resolve drops it.
# A stale or unusable archive only costs a JVM warning (-Xshare:auto).
# PROVSTREAM_KAFKA_CDS=0 turns this off.
CDS_DIR=$LIB/cds
cds_opts() {
    [ "${PROVSTREAM_KAFKA_CDS:-1}" != 0 ] || return 0
    local jsa=$CDS_DIR/kafka-$JAVA_ID.jsa
    mkdir -p "$CDS_DIR"
    if [ -s "$jsa" ]; then
        echo "-XX:SharedArchiveFile=$jsa"
    elif [ "$B_ID" = 1 ]; then # in a cluster, broker 1 alone writes the archive
        rm -f "$jsa.tmp"
        echo "-XX:ArchiveClassesAtExit=$jsa.tmp"
    fi
}

cds_finish() { # $1 = 1 when the broker exited cleanly: keep the archive it wrote
    local f
    for f in "$CDS_DIR"/*.jsa.tmp; do
        [ -e "$f" ] || continue
        if [ "$1" = 1 ] && [ -s "$f" ]; then mv -f "$f" "${f%.tmp}"; else rm -f "$f"; fi
    done
}

cluster_id() { # the stack's cluster id (all brokers share it), created once
    local cid=
    mkdir -p "$CONF"
    [ -s "$CONF/cluster.id" ] && cid=$(cat "$CONF/cluster.id")
    # 16 random bytes, URL-safe base64 without padding (a Kafka Uuid). Like
    # Kafka's own Uuid.randomUuid, never one starting with '-': the storage
    # tool would read it as an option (1 start in 64 failed that way).
    while [ -z "${cid:-}" ] || [ "${cid:0:1}" = - ]; do
        cid=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
        echo "$cid" >"$CONF/cluster.id"
    done
    printf '%s' "$cid"
}

format_storage() { # $@ = broker ids; once per broker: KRaft needs a formatted log dir (meta.properties)
    local cid id
    local -a todo=() common
    for id in "$@"; do
        broker_layout "$id"
        [ -f "$DATA/meta.properties" ] || todo+=("$id")
    done
    [ ${#todo[@]} -gt 0 ] || return 0
    cid=$(cluster_id)
    local -a scram=()
    if [ "$SECURE" = 1 ]; then
        # SCRAM users in the bootstrap metadata (KIP-900): the principals exist before the first start.
        local u
        for u in $(bash "$HERE/secrets.sh" users); do
            scram+=(--add-scram "SCRAM-SHA-512=[name=$u,password=$(cat "$STACK/secrets/kafka/$u")]")
        done
    fi
    # Static quorum (controller.quorum.voters): no --standalone. The brokers are
    # formatted side by side (a JVM start each).
    for id in "${todo[@]}"; do
        broker_layout "$id"
        mapfile -t common < <(jvm_common)
        "$JAVA" -Xmx256m "${common[@]}" kafka.tools.StorageTool format \
            -t "$cid" -c "$BCONF/server.properties" --ignore-formatted "${scram[@]}" >>"$LOG" 2>&1 </dev/null 9>&- &
    done
    local failed=
    for id in "${todo[@]}"; do wait -n || failed=1; done
    for id in "${todo[@]}"; do
        broker_layout "$id"
        [ -z "$failed" ] || [ -f "$DATA/meta.properties" ] || die "formatting the storage in $(show "$DATA") failed (see $(show "$LOG"))"
        [ -f "$DATA/meta.properties" ] || die "storage format wrote no meta.properties in $(show "$DATA") (see $(show "$LOG"))"
        echo "$SECURE" >"$DATA/.provstream-secure"
    done
}

check_mode() { # the broker set by broker_layout: a data directory keeps the security mode it was formatted with
    [ -f "$DATA/meta.properties" ] || return 0
    local was
    was=$(cat "$DATA/.provstream-secure" 2>/dev/null || echo 0)
    [ "$was" = "$SECURE" ] || die "the data in $(show "$DATA") was formatted with PROVSTREAM_SECURE=$was, not $SECURE (use another PROVSTREAM_STACK_DIR, or remove $(show "$DATA"))"
}

STARTED=() # "id:pid" of the brokers this call started
on_abort() {
    local entry
    for entry in "${STARTED[@]}"; do
        broker_layout "${entry%%:*}"
        stop_pids 10 "${entry#*:}" || true
        rm -f "$PIDFILE"
    done
    [ ${#STARTED[@]} -eq 0 ] || cds_finish 0
    echo "provstream: kafka: interrupted while starting, stopped what was started (see $(show "$LOG"))" >&2
    exit 130
}

first_error() { # the first ERROR/FATAL line of this run's log (+ its exception), shortened
    local line
    line=$(awk '
        /^\[[^]]*\] (ERROR|FATAL) / && !hit { sub(/^\[[^]]*\] /, ""); msg = $0; hit = 1; next }
        hit == 1 { if ($0 ~ /^[a-zA-Z0-9_.$]+(Exception|Error)(: |$)/) msg = msg " - " $0; hit = 2 }
        END { if (msg != "") print msg }' "$LOG" 2>/dev/null || true)
    [ -n "$line" ] || line=$(grep -m 1 -E '^(Error|Exception)|Exception in thread' "$LOG" 2>/dev/null || true)
    printf '%s' "${line:0:240}"
}

broker_ready() { # the broker set by broker_layout: started (log) and answering
    grep -q 'Kafka Server started' "$LOG" 2>/dev/null && kafka_answers "$B_PORT"
}

WAIT_FAILED= WAIT_RC=0
wait_ready() { # $@ = "id:pid"; 0 when all are ready, else WAIT_FAILED=id and 1 (process died) or 2 (timeout)
    local deadline=$((SECONDS + READY_TIMEOUT)) entry
    local -a pending=("$@") left
    while [ ${#pending[@]} -gt 0 ]; do
        left=()
        for entry in "${pending[@]}"; do
            broker_layout "${entry%%:*}"
            alive "${entry#*:}" || { WAIT_FAILED=${entry%%:*}; return 1; }
            broker_ready || left+=("$entry")
        done
        pending=("${left[@]}")
        [ ${#pending[@]} -gt 0 ] || return 0
        if ((SECONDS >= deadline)); then WAIT_FAILED=${pending[0]%%:*}; return 2; fi
        sleep 0.5
    done
}

name() { # "broker N " in a cluster, nothing for one broker
    [ "$BROKERS" = 1 ] || printf 'broker %s ' "$B_ID"
}

start_broker() { # the broker set by broker_layout; appends "id:pid" to STARTED
    local -a common opts cds
    mapfile -t common < <(jvm_common)
    mapfile -t cds < <(cds_opts)
    opts=("${cds[@]}" -Xms"$HEAP" -Xmx"$HEAP"
        -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35
        -XX:+ExplicitGCInvokesConcurrent -XX:MaxInlineLevel=15 -XX:+ExitOnOutOfMemoryError)
    if [ -n "${PROVSTREAM_KAFKA_OPTS:-}" ]; then
        local -a extra
        read -r -a extra <<<"$PROVSTREAM_KAFKA_OPTS"
        opts+=("${extra[@]}")
    fi
    # setsid: own session, no controlling terminal, survives this script.
    # The inner bash records its own pid, then execs java (same pid).
    local tmppid=$PIDFILE.tmp.$$
    rm -f "$tmppid"
    setsid bash -c 'echo $$ >"$0"; exec "$@"' "$tmppid" \
        "$JAVA" "${opts[@]}" "${common[@]}" kafka.Kafka "$BCONF/server.properties" \
        >>"$LOG" 2>&1 </dev/null 9>&- &
    local spawned=$! _i pid
    for _i in $(seq 1 100); do
        [ -s "$tmppid" ] && break
        sleep 0.05
    done
    if [ -s "$tmppid" ]; then pid=$(cat "$tmppid"); else pid=$spawned; fi
    rm -f "$tmppid"
    echo "$pid" >"$PIDFILE"
    STARTED+=("$B_ID:$pid")
}

do_up() { # $1 = broker id (optional): start only that broker of the cluster
    validate_env
    [ -z "${1:-}" ] || { [[ $1 =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= BROKERS)); } || die "no broker '$1' (1..$BROKERS, PROVSTREAM_KAFKA_BROKERS)"
    mkdir -p "$STACK" "$LOGDIR" "$RUN"
    lock
    local pid t0=$SECONDS rc id entry
    local -a todo=() waiting=() up_already=()
    # a stack started with another broker count must be stopped first
    local before
    before=$(cat "$CONF/brokers" 2>/dev/null || echo 1)
    if [ "$before" != "$BROKERS" ] && [ -n "$(stack_pids)" ]; then
        die "kafka of this stack runs with $before broker(s), not PROVSTREAM_KAFKA_BROKERS=$BROKERS (run deploy/kafka.sh down first)"
    fi
    for id in ${1:-$(broker_ids)}; do
        broker_layout "$id"
        # pid file missing or stale: adopt a broker of this stack if one runs
        pid=$(find_pid) || pid=
        if [ -z "$pid" ]; then
            rm -f "$PIDFILE"
            todo+=("$id")
            continue
        fi
        echo "$pid" >"$PIDFILE"
        local running_port
        running_port=$(sed -n 's|^listeners=[A-Z_]*://[^:]*:\([0-9]*\).*|\1|p' "$BCONF/server.properties" 2>/dev/null | tail -n 1 || true)
        if [ -n "$running_port" ] && [ "$running_port" != "$B_PORT" ]; then
            die "kafka $(name)of this stack already runs on 127.0.0.1:$running_port, not :$B_PORT (run deploy/kafka.sh down first; see $(show "$LOG"))"
        fi
        if kafka_answers "$B_PORT"; then up_already+=("$id"); else waiting+=("$id:$pid"); fi
    done
    if [ ${#todo[@]} -eq 0 ] && [ ${#waiting[@]} -eq 0 ]; then
        if [ "$BROKERS" = 1 ]; then echo "kafka already running"; else echo "kafka already running ($BROKERS brokers)"; fi
        return 0
    fi

    if [ ${#todo[@]} -gt 0 ]; then
        do_resolve
        find_java
        local p
        for id in "${todo[@]}"; do
            broker_layout "$id"
            for p in "$B_PORT" "$B_CPORT"; do
                if port_open "$p"; then
                    die "port $p is already in use (see $(show "$LOG"))"
                fi
            done
        done
        for id in "${todo[@]}"; do
            broker_layout "$id"
            check_mode
        done
        if [ "$SECURE" = 1 ]; then bash "$HERE/secrets.sh" make; fi
        mkdir -p "$CONF"
        echo "$BROKERS" >"$CONF/brokers"
        for id in "${todo[@]}"; do
            broker_layout "$id"
            write_config
            [ -f "$LOG" ] && mv -f "$LOG" "$LOG.1"
            : >"$LOG"
        done
        format_storage "${todo[@]}"
        trap on_abort INT TERM HUP
        for id in "${todo[@]}"; do
            broker_layout "$id"
            start_broker
        done
    fi

    rc=0
    wait_ready "${STARTED[@]}" "${waiting[@]}" || rc=$?
    if [ $rc -eq 0 ]; then
        trap - INT TERM HUP
        if [ "$BROKERS" = 1 ] && [ ${#STARTED[@]} -eq 1 ]; then
            echo "kafka $VERSION started on 127.0.0.1:$PORT$([ "$SECURE" = 1 ] && echo ' SASL_SSL') (pid ${STARTED[0]#*:}, $((SECONDS - t0)) s)"
        elif [ ${#STARTED[@]} -eq 0 ]; then
            echo "kafka already running"
        else
            local what=
            for entry in "${STARTED[@]}"; do
                broker_layout "${entry%%:*}"
                what+="${what:+, }broker $B_ID 127.0.0.1:$B_PORT (pid ${entry#*:})"
            done
            echo "kafka $VERSION started: $what; $BROKERS-voter quorum, RF $(effective_rf), min ISR $(effective_min_isr) ($((SECONDS - t0)) s)"
        fi
        return 0
    fi
    # a failure: stop what this call started (and a wedged broker it waited for), name the culprit
    local failed=$WAIT_FAILED why
    broker_layout "$failed"
    why=$(first_error)
    for entry in "${STARTED[@]}" "${waiting[@]}"; do
        broker_layout "${entry%%:*}"
        stop_pids "$([ $rc = 1 ] && echo 5 || echo "$STOP_TIMEOUT")" "${entry#*:}" || true
        rm -f "$PIDFILE"
    done
    cds_finish 0
    broker_layout "$failed"
    if [ $rc = 1 ]; then
        die "the $(name)broker exited during startup${why:+: ${why}} (see $(show "$LOG"))"
    fi
    die "$(name)not ready within $READY_TIMEOUT s, stopped it (see $(show "$LOG"))"
}

# ---------------------------------------------------------------- down / status

do_down() { # $1 = broker id (optional): stop only that broker
    mkdir -p "$RUN"
    lock
    local -a pids=()
    local pid p id
    if [ -n "${1:-}" ]; then
        [[ $1 =~ ^[0-9]+$ ]] && (($1 >= 1 && $1 <= BROKERS)) || die "no broker '$1' (1..$BROKERS, PROVSTREAM_KAFKA_BROKERS)"
        broker_layout "$1"
        if pid=$(find_pid); then pids+=("$pid"); fi
    else
        for id in $(broker_ids); do
            broker_layout "$id"
            if pid=$(pid_from_file); then pids+=("$pid"); fi
        done
        for p in $(stack_pids); do
            [[ " ${pids[*]} " == *" $p "* ]] || pids+=("$p")
        done
    fi
    if [ ${#pids[@]} -eq 0 ]; then
        [ -n "${1:-}" ] || rm -f "$RUN"/kafka.pid "$RUN"/kafka-[0-9]*.pid
        echo "kafka ${1:+broker $1 }not running"
        return 0
    fi
    if ! stop_pids "$STOP_TIMEOUT" "${pids[@]}"; then
        die "could not stop pid(s) ${pids[*]} even with SIGKILL (see $(show "$LOG"))"
    fi
    if [ -n "${1:-}" ]; then rm -f "$PIDFILE"; else rm -f "$RUN"/kafka.pid "$RUN"/kafka-[0-9]*.pid; fi
    if [ $KILLED = 1 ]; then cds_finish 0; else cds_finish 1; fi
    echo "kafka ${1:+broker $1 }stopped"
}

do_status() {
    validate_env
    local id rc=0
    for id in $(broker_ids); do
        broker_layout "$id"
        if find_pid >/dev/null && kafka_answers "$B_PORT"; then
            echo "kafka $VERSION $(name)127.0.0.1:$B_PORT running"
        else
            echo "kafka $VERSION $(name)127.0.0.1:$B_PORT stopped"
            rc=3
        fi
    done
    return $rc
}

case ${1:-} in
    resolve)
        validate_env
        mkdir -p "$RUN"
        lock
        if is_resolved; then
            echo "kafka $VERSION already resolved in $(show "$LIB")"
        else
            do_resolve
            echo "kafka $VERSION resolved into $(show "$LIB") ($(find "$LIB" -name '*.jar' | wc -l) jars)"
        fi
        ;;
    up) do_up "${2:-}" ;;
    down)
        validate_env
        do_down "${2:-}"
        ;;
    status)
        rc=0
        do_status || rc=$?
        exit $rc
        ;;
    *)
        echo "usage: $0 resolve|up [broker id]|down [broker id]|status" >&2
        exit 2
        ;;
esac
