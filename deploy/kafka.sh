#!/usr/bin/env bash
# deploy/kafka.sh - a real single-node Apache Kafka broker (KRaft, combined
# broker + controller) assembled from Maven Central jars, run as a plain java
# process. No Docker, no tarball.
#
#   deploy/kafka.sh resolve   fetch the jars into $STACK/lib/kafka (once; marker file)
#   deploy/kafka.sh up        resolve, write config, format storage once, start, wait until ready
#   deploy/kafka.sh down      stop (SIGTERM, up to 30 s, then SIGKILL); harmless when stopped
#   deploy/kafka.sh status    one line "kafka <version> 127.0.0.1:<port> running|stopped";
#                             exit 0 when running, 3 when stopped
#
# Environment:
#   PROVSTREAM_STACK_DIR              default <repo>/.stack
#   PROVSTREAM_KAFKA_PORT             default 9092  (PLAINTEXT, 127.0.0.1 only)
#   PROVSTREAM_KAFKA_CONTROLLER_PORT  default 9093  (KRaft controller, 127.0.0.1 only)
#   PROVSTREAM_KAFKA_HEAP             default 768m
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
#
# Errors are one line on stderr, "provstream: kafka: <cause> (see <log>)", exit 1.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
STACK=${PROVSTREAM_STACK_DIR:-$REPO/.stack}
case $STACK in /*) ;; *) STACK=$PWD/$STACK ;; esac
PORT=${PROVSTREAM_KAFKA_PORT:-9092}
CPORT=${PROVSTREAM_KAFKA_CONTROLLER_PORT:-9093}
HEAP=${PROVSTREAM_KAFKA_HEAP:-768m}
READY_TIMEOUT=${PROVSTREAM_KAFKA_READY_TIMEOUT:-90}
STOP_TIMEOUT=30
TLS=$STACK/secrets/tls

TEMPLATES=$HERE/kafka
POM=$TEMPLATES/pom.xml
LIB=$STACK/lib/kafka
MARKER=$LIB/.resolved
DATA=$STACK/data/kafka
LOGDIR=$STACK/logs
LOG=$LOGDIR/kafka.log
RESOLVE_LOG=$LOGDIR/kafka-resolve.log
RUN=$STACK/run
PIDFILE=$RUN/kafka.pid
LOCKFILE=$RUN/kafka.lock
CONF=$STACK/conf/kafka
# PROVSTREAM_SECURE unset: the mode the data was formatted with (status/down of a secured stack just work)
SECURE=${PROVSTREAM_SECURE:-$(cat "$DATA/.provstream-secure" 2>/dev/null || echo 0)}
# Tag on the java command line: identifies this stack's processes for `down`.
TAG="-Dprovstream.kafka.stack=$STACK"

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
    local p
    for p in "$PORT" "$CPORT"; do
        [[ $p =~ ^[0-9]+$ ]] && ((p > 0 && p < 65536)) || die "invalid port '$p' (PROVSTREAM_KAFKA_PORT / PROVSTREAM_KAFKA_CONTROLLER_PORT)"
    done
    [ "$PORT" != "$CPORT" ] || die "PROVSTREAM_KAFKA_PORT and PROVSTREAM_KAFKA_CONTROLLER_PORT are both $PORT"
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
    grep -qxF -- "$TAG" <<<"$cmd" && grep -qxF -- kafka.Kafka <<<"$cmd"
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

write_config() {
    mkdir -p "$CONF" "$DATA"
    sed -e "s|@PORT@|$PORT|g" \
        -e "s|@CONTROLLER_PORT@|$CPORT|g" \
        -e "s|@DATA_DIR@|$(sed_escape "$DATA")|g" \
        "$TEMPLATES/server.properties.in" >"$CONF/server.properties.tmp"
    if [ "$SECURE" = 1 ]; then
        secure_config "$CONF/server.properties.tmp"
    fi
    mv "$CONF/server.properties.tmp" "$CONF/server.properties"
    cp "$TEMPLATES/log4j2.xml" "$CONF/log4j2.xml"
}

secure_config() { # $1: the rendered plain config, turned into the secured one (mode 0600: it holds passwords)
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
listeners=SASL_SSL://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=SASL_SSL://127.0.0.1:$PORT
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
    printf '%s\n' "$TAG" \
        "-Dlog4j2.configurationFile=$CONF/log4j2.xml" \
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
    else
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

format_storage() { # once: KRaft needs a formatted log dir (meta.properties)
    [ -f "$DATA/meta.properties" ] && return 0
    local cid
    [ -s "$CONF/cluster.id" ] && cid=$(cat "$CONF/cluster.id")
    # 16 random bytes, URL-safe base64 without padding (a Kafka Uuid). Like
    # Kafka's own Uuid.randomUuid, never one starting with '-': the storage
    # tool would read it as an option (1 start in 64 failed that way).
    while [ -z "${cid:-}" ] || [ "${cid:0:1}" = - ]; do
        cid=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
        echo "$cid" >"$CONF/cluster.id"
    done
    local -a common scram=()
    mapfile -t common < <(jvm_common)
    if [ "$SECURE" = 1 ]; then
        # SCRAM users in the bootstrap metadata (KIP-900): the principals exist before the first start.
        local u
        for u in $(bash "$HERE/secrets.sh" users); do
            scram+=(--add-scram "SCRAM-SHA-512=[name=$u,password=$(cat "$STACK/secrets/kafka/$u")]")
        done
    fi
    # Static quorum (controller.quorum.voters): no --standalone.
    if ! "$JAVA" -Xmx256m "${common[@]}" kafka.tools.StorageTool format \
        -t "$cid" -c "$CONF/server.properties" --ignore-formatted "${scram[@]}" >>"$LOG" 2>&1 </dev/null 9>&-; then
        die "formatting the storage in $(show "$DATA") failed (see $(show "$LOG"))"
    fi
    [ -f "$DATA/meta.properties" ] || die "storage format wrote no meta.properties in $(show "$DATA") (see $(show "$LOG"))"
    echo "$SECURE" >"$DATA/.provstream-secure"
}

check_mode() { # a data directory keeps the security mode it was formatted with
    [ -f "$DATA/meta.properties" ] || return 0
    local was
    was=$(cat "$DATA/.provstream-secure" 2>/dev/null || echo 0)
    [ "$was" = "$SECURE" ] || die "the data in $(show "$DATA") was formatted with PROVSTREAM_SECURE=$was, not $SECURE (use another PROVSTREAM_STACK_DIR, or remove $(show "$DATA"))"
}

STARTED=
on_abort() {
    if [ -n "$STARTED" ]; then
        stop_pids 10 "$STARTED" || true
        rm -f "$PIDFILE"
        cds_finish 0
    fi
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

wait_ready() { # $1 = pid; 0 when ready, 1 when the process died, 2 on timeout
    local pid=$1 deadline=$((SECONDS + READY_TIMEOUT))
    while :; do
        alive "$pid" || return 1
        if grep -q 'Kafka Server started' "$LOG" 2>/dev/null && kafka_answers "$PORT"; then
            return 0
        fi
        ((SECONDS < deadline)) || return 2
        sleep 0.5
    done
}

do_up() {
    validate_env
    mkdir -p "$STACK" "$LOGDIR" "$RUN"
    lock
    local pid t0=$SECONDS rc
    # pid file missing or stale: adopt a broker of this stack if one runs
    pid=$(find_pid) || pid=
    [ -z "$pid" ] || echo "$pid" >"$PIDFILE"
    if [ -n "$pid" ]; then
        local running_port
        running_port=$(sed -n 's|^listeners=[A-Z_]*://[^:]*:\([0-9]*\).*|\1|p' "$CONF/server.properties" 2>/dev/null | tail -n 1 || true)
        if [ -n "$running_port" ] && [ "$running_port" != "$PORT" ]; then
            die "kafka of this stack already runs on 127.0.0.1:$running_port, not :$PORT (run deploy/kafka.sh down first; see $(show "$LOG"))"
        fi
        if kafka_answers "$PORT"; then
            echo "kafka already running"
            return 0
        fi
        # alive but not answering (still starting, or wedged): give it the usual time
        rc=0
        wait_ready "$pid" || rc=$?
        if [ $rc -eq 0 ]; then
            echo "kafka already running"
            return 0
        fi
        stop_pids "$STOP_TIMEOUT" "$pid" || true
        rm -f "$PIDFILE"
        die "the running broker (pid $pid) did not answer on 127.0.0.1:$PORT within $READY_TIMEOUT s and was stopped (see $(show "$LOG"))"
    fi
    rm -f "$PIDFILE"

    do_resolve
    find_java

    local p
    for p in "$PORT" "$CPORT"; do
        if port_open "$p"; then
            die "port $p is already in use (see $(show "$LOG"))"
        fi
    done

    check_mode
    if [ "$SECURE" = 1 ]; then bash "$HERE/secrets.sh" make; fi
    write_config
    [ -f "$LOG" ] && mv -f "$LOG" "$LOG.1"
    : >"$LOG"
    format_storage

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

    trap on_abort INT TERM HUP
    # setsid: own session, no controlling terminal, survives this script.
    # The inner bash records its own pid, then execs java (same pid).
    local tmppid=$PIDFILE.tmp.$$
    rm -f "$tmppid"
    setsid bash -c 'echo $$ >"$0"; exec "$@"' "$tmppid" \
        "$JAVA" "${opts[@]}" "${common[@]}" kafka.Kafka "$CONF/server.properties" \
        >>"$LOG" 2>&1 </dev/null 9>&- &
    local spawned=$! _i
    for _i in $(seq 1 100); do
        [ -s "$tmppid" ] && break
        sleep 0.05
    done
    if [ -s "$tmppid" ]; then STARTED=$(cat "$tmppid"); else STARTED=$spawned; fi
    rm -f "$tmppid"
    echo "$STARTED" >"$PIDFILE"

    rc=0
    wait_ready "$STARTED" || rc=$?
    case $rc in
        0)
            trap - INT TERM HUP
            echo "kafka $VERSION started on 127.0.0.1:$PORT$([ "$SECURE" = 1 ] && echo ' SASL_SSL') (pid $STARTED, $((SECONDS - t0)) s)"
            return 0
            ;;
        1)
            stop_pids 5 "$STARTED" || true
            wait "$spawned" 2>/dev/null || true
            rm -f "$PIDFILE"
            cds_finish 0
            local why
            why=$(first_error)
            die "the broker exited during startup${why:+: ${why}} (see $(show "$LOG"))"
            ;;
        *)
            stop_pids "$STOP_TIMEOUT" "$STARTED" || true
            wait "$spawned" 2>/dev/null || true
            rm -f "$PIDFILE"
            cds_finish 0
            die "not ready within $READY_TIMEOUT s, stopped it (see $(show "$LOG"))"
            ;;
    esac
}

# ---------------------------------------------------------------- down / status

do_down() {
    mkdir -p "$RUN"
    lock
    local -a pids=()
    local pid p
    if pid=$(pid_from_file); then pids+=("$pid"); fi
    for p in $(stack_pids); do
        [[ " ${pids[*]} " == *" $p "* ]] || pids+=("$p")
    done
    if [ ${#pids[@]} -eq 0 ]; then
        rm -f "$PIDFILE"
        echo "kafka not running"
        return 0
    fi
    if ! stop_pids "$STOP_TIMEOUT" "${pids[@]}"; then
        die "could not stop pid(s) ${pids[*]} even with SIGKILL (see $(show "$LOG"))"
    fi
    rm -f "$PIDFILE"
    if [ $KILLED = 1 ]; then cds_finish 0; else cds_finish 1; fi
    echo "kafka stopped"
}

do_status() {
    validate_env
    if find_pid >/dev/null && kafka_answers "$PORT"; then
        echo "kafka $VERSION 127.0.0.1:$PORT running"
        return 0
    fi
    echo "kafka $VERSION 127.0.0.1:$PORT stopped"
    return 3
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
    up) do_up ;;
    down) do_down ;;
    status)
        rc=0
        do_status || rc=$?
        exit $rc
        ;;
    *)
        echo "usage: $0 resolve|up|down|status" >&2
        exit 2
        ;;
esac
