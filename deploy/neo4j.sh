#!/usr/bin/env bash
# deploy/neo4j.sh - assemble and run a Neo4j 5.26 Community server from Maven
# Central jars, as a plain `java` process (no Docker, no release tarball).
#
#   deploy/neo4j.sh resolve   fetch the jars into $STACK/lib/neo4j (once; marker file)
#   deploy/neo4j.sh up        resolve if needed, write config, set the initial
#                             password on first start, start, wait for Bolt + auth
#   deploy/neo4j.sh down      SIGTERM, wait up to 60 s, then SIGKILL
#   deploy/neo4j.sh status    one line; exit 0 if running, 3 if stopped
#   deploy/neo4j.sh password  print the password in use (nothing else)
#   deploy/neo4j.sh import ARGFILE
#                             offline import (neo4j-admin database import full) with
#                             the arguments in ARGFILE, one a line; the server must be
#                             stopped; output in $STACK/logs/neo4j-import.log
#
# Environment (defaults in brackets):
#   PROVSTREAM_STACK_DIR          [<repo>/.stack]
#   PROVSTREAM_NEO4J_BOLT_PORT    [7687]
#   PROVSTREAM_NEO4J_HTTP_PORT    [7474]
#   PROVSTREAM_NEO4J_HEAP         [1g]    (-Xms = -Xmx)
#   PROVSTREAM_NEO4J_PAGECACHE    [256m]
#   PROVSTREAM_NEO4J_IMPORT_MEMORY [512m] the importer's --max-off-heap-memory
#   PROVSTREAM_NEO4J_IMPORT_JIT   [auto]  c1: the importer's JVM compiles with C1 only (faster
#                                         below ~200 MB of CSV: C2's compiler threads compete with
#                                         the import for the cores), c2: the JVM's default
#                                         (tiered, faster on larger imports), auto: c1 below
#                                         PROVSTREAM_NEO4J_IMPORT_C1_MAX_MB [192] of input files
#   PROVSTREAM_JAVA_HOME          [/usr/lib/jvm/java-17-openjdk-amd64] (17 or 21)
#   PROVSTREAM_NEO4J_PASSWORD     [generated once into $STACK/secrets/neo4j-password]
#   PROVSTREAM_NEO4J_CDS          [1]     0 disables the class-data-sharing archive
#   PROVSTREAM_SECURE             [0]     1: Bolt over TLS only (tls_level REQUIRED) and HTTPS
#                                         instead of HTTP on the HTTP port, with the certificate
#                                         deploy/secrets.sh signs by the stack's CA (docs/security.md)
#
# Layout under $STACK: lib/neo4j/ (jars), neo4j/{conf,data,logs,run,import,
# plugins,licenses}/ (server home), logs/neo4j.log (server stdout/stderr),
# run/neo4j.pid, secrets/neo4j-password. See deploy/README-neo4j.md.
set -euo pipefail
shopt -u patsub_replacement 2>/dev/null || true   # bash 5.2: '&' literal in ${x//p/r}

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$SCRIPT_DIR")
TEMPLATE_DIR=$SCRIPT_DIR/neo4j
POM=$TEMPLATE_DIR/pom.xml

STACK=${PROVSTREAM_STACK_DIR:-$REPO_DIR/.stack}
case $STACK in /*) ;; *) STACK=$PWD/$STACK ;; esac
STACK=${STACK%/}

LIB_DIR=$STACK/lib/neo4j
MARKER=$LIB_DIR/.resolved
N4J_HOME=$STACK/neo4j
CONF_DIR=$N4J_HOME/conf
LOG_FILE=$STACK/logs/neo4j.log
RESOLVE_LOG=$STACK/logs/neo4j-resolve.log
PID_FILE=$STACK/run/neo4j.pid
LOCK_FILE=$STACK/run/neo4j.lock
SECRETS_DIR=$STACK/secrets
PW_FILE=$SECRETS_DIR/neo4j-password

SECURE=${PROVSTREAM_SECURE:-$(cat "$N4J_HOME/.provstream-secure" 2>/dev/null || echo 0)}
TLS_DIR=$STACK/secrets/tls
BOLT_PORT=${PROVSTREAM_NEO4J_BOLT_PORT:-7687}
HTTP_PORT=${PROVSTREAM_NEO4J_HTTP_PORT:-7474}
HEAP=${PROVSTREAM_NEO4J_HEAP:-1g}
PAGECACHE=${PROVSTREAM_NEO4J_PAGECACHE:-256m}
IMPORT_MEMORY=${PROVSTREAM_NEO4J_IMPORT_MEMORY:-512m}
IMPORT_LOG=$STACK/logs/neo4j-import.log
JAVA_HOME_DIR=${PROVSTREAM_JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
START_TIMEOUT=120
STOP_TIMEOUT=60
MAIN_CLASS=org.neo4j.server.CommunityEntryPoint

NEO4J_VERSION=$(sed -n 's:.*<neo4j\.version>\([^<]*\)</neo4j\.version>.*:\1:p' "$POM" 2>/dev/null | head -n 1)
NEO4J_VERSION=${NEO4J_VERSION:-unknown}

# ---------------------------------------------------------------- helpers ---

rel() {   # path as shown in messages: relative to the repo when inside it
  case $1 in "$REPO_DIR"/*) printf '%s' "${1#"$REPO_DIR"/}" ;; *) printf '%s' "$1" ;; esac
}

die() {   # one line on stderr, non-zero exit
  printf 'provstream: neo4j: %s\n' "$1" >&2
  exit "${2:-1}"
}

see_log() { printf '(see %s)' "$(rel "$LOG_FILE")"; }

validate_env() {
  local p
  for p in "$BOLT_PORT" "$HTTP_PORT"; do
    if ! [[ $p =~ ^[0-9]+$ ]] || ((p < 1 || p > 65535)); then
      die "invalid port '$p' (PROVSTREAM_NEO4J_BOLT_PORT / PROVSTREAM_NEO4J_HTTP_PORT)"
    fi
  done
  [[ $BOLT_PORT != "$HTTP_PORT" ]] || die "Bolt and HTTP ports are both $BOLT_PORT"
  [[ $HEAP =~ ^[0-9]+[kKmMgG]$ ]] || die "invalid PROVSTREAM_NEO4J_HEAP '$HEAP' (e.g. 1g, 512m)"
  [[ $PAGECACHE =~ ^[0-9]+[kKmMgG]$ ]] || die "invalid PROVSTREAM_NEO4J_PAGECACHE '$PAGECACHE' (e.g. 256m)"
}

JAVA='' JAVA_MAJOR=''
check_java() {
  JAVA=$JAVA_HOME_DIR/bin/java
  [[ -x $JAVA ]] || die "Java not found at $JAVA (set PROVSTREAM_JAVA_HOME to a Java 17 or 21 JDK)"
  JAVA_MAJOR=$("$JAVA" -version 2>&1 | sed -n '1s/.*version "\([0-9]*\).*/\1/p') || true
  case $JAVA_MAJOR in
    17 | 21) ;;
    *) die "Neo4j $NEO4J_VERSION needs Java 17 or 21, but $JAVA is Java ${JAVA_MAJOR:-unknown} (set PROVSTREAM_JAVA_HOME)" ;;
  esac
}

take_lock() {   # serialise resolve/up/down of this stack
  mkdir -p "$STACK/run"
  exec 9>>"$LOCK_FILE"
  flock -w 300 9 || die "another deploy/neo4j.sh holds $(rel "$LOCK_FILE")"
}

# PIDs of this stack's server: java processes running $MAIN_CLASS with our --home-dir.
stack_pids() {
  local d a main home
  local -a args
  for d in /proc/[0-9]*; do
    [[ -r $d/cmdline ]] || continue
    mapfile -d '' -t args <"$d/cmdline" 2>/dev/null || continue
    main=0 home=0
    for a in "${args[@]}"; do
      [[ $a == "$MAIN_CLASS" ]] && main=1
      [[ $a == "--home-dir=$N4J_HOME" ]] && home=1
    done
    ((main && home)) && printf '%s\n' "${d#/proc/}"
  done
  return 0
}

running_pids() {   # our pid file's pid first (if it is really ours), then any other
  local pids pid
  pids=$(stack_pids)
  [[ -n $pids ]] || return 0
  if [[ -s $PID_FILE ]]; then
    pid=$(<"$PID_FILE")
    grep -qx -- "$pid" <<<"$pids" && printf '%s\n' "$pid"
    grep -vx -- "$pid" <<<"$pids" || true
  else
    printf '%s\n' "$pids"
  fi
}

port_in_use() {   # something accepts connections on 127.0.0.1:$1
  # shellcheck disable=SC2016  # $1 is expanded by the inner bash
  timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$1" 2>/dev/null
}

# -------------------------------------------------------------- password ---

PW=
load_password() {
  if [[ -n ${PROVSTREAM_NEO4J_PASSWORD:-} ]]; then
    PW=$PROVSTREAM_NEO4J_PASSWORD
    ((${#PW} >= 8)) || die "PROVSTREAM_NEO4J_PASSWORD must have at least 8 characters"
    return 0
  fi
  if [[ -s $PW_FILE ]]; then
    PW=$(<"$PW_FILE")
    return 0
  fi
  return 1
}

auth_initialised() {   # users already exist (system db) or an initial password is pending
  [[ -e $N4J_HOME/data/databases/system || -e $N4J_HOME/data/dbms/auth.ini ]]
}

ensure_password() {
  load_password && return 0
  auth_initialised && die "no password known for the existing data in $(rel "$N4J_HOME/data") ($(rel "$PW_FILE") is missing; set PROVSTREAM_NEO4J_PASSWORD or remove the data directory)"
  local pw
  pw=$(LC_ALL=C tr -dc 'A-Za-z0-9' < <(head -c 4096 /dev/urandom) | head -c 24) || true
  ((${#pw} == 24)) || die "could not generate a password from /dev/urandom"
  (umask 077 && mkdir -p "$SECRETS_DIR")
  chmod 700 "$SECRETS_DIR"
  (umask 077 && printf '%s\n' "$pw" >"$PW_FILE.tmp.$$")
  chmod 600 "$PW_FILE.tmp.$$"
  mv -f "$PW_FILE.tmp.$$" "$PW_FILE"
  PW=$pw
}

# --------------------------------------------------------------- resolve ---

pom_hash() { sha256sum "$POM" | cut -d ' ' -f 1; }

is_resolved() {
  [[ -f $MARKER && -f $LIB_DIR/neo4j-$NEO4J_VERSION.jar ]] && [[ $(<"$MARKER") == "$(pom_hash)" ]]
}

do_resolve() {
  is_resolved && return 0
  [[ -f $POM ]] || die "missing $(rel "$POM")"
  command -v mvn >/dev/null 2>&1 || die "Maven (mvn) not found; it is needed once to fetch the Neo4j jars from Maven Central"
  [[ -z $(running_pids) ]] || die "neo4j is running on the old jars; run 'deploy/neo4j.sh down' before resolving again"
  mkdir -p "$STACK/lib" "$STACK/logs"
  local tmp=$LIB_DIR.tmp.$$ t0=$SECONDS
  rm -rf "$tmp"
  if ! (
    [[ -d $JAVA_HOME_DIR ]] && export JAVA_HOME=$JAVA_HOME_DIR
    mvn -B -q -f "$POM" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp"
  ) >"$RESOLVE_LOG" 2>&1; then
    rm -rf "$tmp"
    die "could not resolve Neo4j $NEO4J_VERSION from Maven Central (see $(rel "$RESOLVE_LOG"))"
  fi
  local j
  for j in "neo4j-$NEO4J_VERSION.jar" "neo4j-server-$NEO4J_VERSION.jar" "neo4j-command-line-$NEO4J_VERSION.jar"; do
    [[ -f $tmp/$j ]] || { rm -rf "$tmp"; die "resolution did not produce $j (see $(rel "$RESOLVE_LOG"))"; }
  done
  pom_hash >"$tmp/.resolved"
  rm -rf "$LIB_DIR"
  mv "$tmp" "$LIB_DIR"
  printf 'resolved Neo4j %s: %s jars in %s (%ss)\n' "$NEO4J_VERSION" \
    "$(find "$LIB_DIR" -maxdepth 1 -name '*.jar' | wc -l)" "$(rel "$LIB_DIR")" "$((SECONDS - t0))" >>"$RESOLVE_LOG"
}

# ---------------------------------------------------------------- browser --

# provstream's Browser style and guide (deploy/neo4j/browser/*) are served by
# the server itself, under /browser/provstream/, from a copy of the Browser jar
# with them added (a new file: the jars may be hard links shared with another
# stack). Redone only when the files change; a changed jar invalidates the
# class-data-sharing archive, so that is dropped and dumped again.
install_browser_files() {
  local src=$TEMPLATE_DIR/browser stamp jar tmp jartool
  stamp=$(cat "$src"/* | sha256sum | cut -c1-16)
  [[ $(cat "$LIB_DIR/.browser-files" 2>/dev/null) == "$stamp" ]] && return 0
  jar=$(find "$LIB_DIR" -maxdepth 1 -name 'neo4j-browser-*.jar' | head -n 1)
  [[ -n $jar ]] || die "no neo4j-browser jar in $(rel "$LIB_DIR") (resolve again: rm -rf $(rel "$LIB_DIR"))"
  jartool=$JAVA_HOME_DIR/bin/jar
  [[ -x $jartool ]] || jartool=$(command -v jar 2>/dev/null) || die "the JDK's jar tool is missing (install a JDK 17, not only a JRE)"
  tmp=$(mktemp -d "$STACK/run/browser-files.XXXXXX")
  mkdir -p "$tmp/browser/provstream"
  cp "$src"/* "$tmp/browser/provstream/"
  cp "$jar" "$tmp/browser.jar"
  # an earlier copy of our files is replaced (jar u overwrites entries of the same name)
  if ! "$jartool" uf "$tmp/browser.jar" -C "$tmp" browser/provstream >>"$RESOLVE_LOG" 2>&1; then
    rm -rf "$tmp"
    die "could not add the provstream Browser files to $(rel "$jar") (see $(rel "$RESOLVE_LOG"))"
  fi
  mv -f "$tmp/browser.jar" "$jar"
  rm -rf "$tmp"
  rm -f "$LIB_DIR"/cds-java*.jsa "$LIB_DIR"/cds-java*.jsa.off
  echo "$stamp" >"$LIB_DIR/.browser-files"
}

# provstream.writeBatch (connectors/neo4j/procedure/WriteBatch.java), the sink's batch write on the
# kernel API: compiled against this server's own jars into $STACK/lib/provstream-procedure/ when
# the source or the server version changes, and copied into the server's plugins directory on
# every `up`. The sink falls back to the Cypher statement on a server without it.
install_procedure() {
  local src=$REPO_DIR/connectors/neo4j/procedure/WriteBatch.java out=$STACK/lib/provstream-procedure
  local name=provstream-procedure.jar stamp tmp javac jartool
  stamp=$( { cat "$src"; echo "$NEO4J_VERSION"; } | sha256sum | cut -c1-16)
  if [[ $(cat "$out/.stamp" 2>/dev/null) != "$stamp" || ! -f $out/$name ]]; then
    javac=$JAVA_HOME_DIR/bin/javac
    [[ -x $javac ]] || javac=$(command -v javac 2>/dev/null) || die "the JDK's javac is missing (install a JDK 17, not only a JRE)"
    jartool=$JAVA_HOME_DIR/bin/jar
    [[ -x $jartool ]] || jartool=$(command -v jar 2>/dev/null) || die "the JDK's jar tool is missing (install a JDK 17, not only a JRE)"
    tmp=$(mktemp -d "$STACK/run/procedure.XXXXXX")
    if ! { "$javac" --release 17 -nowarn -cp "$LIB_DIR/*" -d "$tmp/classes" "$src" \
           && "$jartool" cf "$tmp/$name" -C "$tmp/classes" .; } >>"$RESOLVE_LOG" 2>&1; then
      rm -rf "$tmp"
      die "could not compile $(rel "$src") (see $(rel "$RESOLVE_LOG"))"
    fi
    echo "$stamp" >"$tmp/.stamp"
    rm -rf "$tmp/classes" "$out"
    mv "$tmp" "$out"
  fi
  mkdir -p "$N4J_HOME/plugins"
  cp -f "$out/$name" "$N4J_HOME/plugins/$name"
}

# ---------------------------------------------------------------- config ---

secure_config() {   # $1: the rendered plain config; prints the secured one
  local pol
  for pol in bolt https; do
    mkdir -p "$N4J_HOME/certificates/$pol/trusted"
    install -m 600 "$TLS_DIR/neo4j.key" "$N4J_HOME/certificates/$pol/private.key"
    install -m 644 "$TLS_DIR/neo4j.crt" "$N4J_HOME/certificates/$pol/public.crt"
    install -m 644 "$TLS_DIR/ca.pem" "$N4J_HOME/certificates/$pol/trusted/ca.pem"
  done
  printf '%s\n' "$1" | sed -e '/^server.bolt.tls_level=/d' -e '/^server.http.enabled=/d' \
    -e '/^server.https.enabled=/d' -e "s|http://127.0.0.1:$HTTP_PORT/|https://127.0.0.1:$HTTP_PORT/|g"
  cat <<EOF

# ---- PROVSTREAM_SECURE=1 (deploy/neo4j.sh secure_config; docs/security.md) ----
server.bolt.tls_level=REQUIRED
dbms.ssl.policy.bolt.enabled=true
dbms.ssl.policy.bolt.base_directory=$N4J_HOME/certificates/bolt
dbms.ssl.policy.bolt.private_key=private.key
dbms.ssl.policy.bolt.public_certificate=public.crt
dbms.ssl.policy.bolt.client_auth=NONE
server.http.enabled=false
server.https.enabled=true
server.https.listen_address=127.0.0.1:$HTTP_PORT
server.https.advertised_address=127.0.0.1:$HTTP_PORT
dbms.ssl.policy.https.enabled=true
dbms.ssl.policy.https.base_directory=$N4J_HOME/certificates/https
dbms.ssl.policy.https.private_key=private.key
dbms.ssl.policy.https.public_certificate=public.crt
dbms.ssl.policy.https.client_auth=NONE
EOF
}

render_config() {
  mkdir -p "$CONF_DIR" "$N4J_HOME"/{data,logs,run,import,plugins,licenses} "$STACK/logs" "$STACK/run"
  local conf
  conf=$(<"$TEMPLATE_DIR/neo4j.conf.in")
  conf=${conf//@NEO4J_HOME@/$N4J_HOME}
  conf=${conf//@NEO4J_LIB@/$LIB_DIR}
  conf=${conf//@BOLT_PORT@/$BOLT_PORT}
  conf=${conf//@HTTP_PORT@/$HTTP_PORT}
  conf=${conf//@HEAP@/$HEAP}
  conf=${conf//@PAGECACHE@/$PAGECACHE}
  if [[ $SECURE == 1 ]]; then
    conf=$(secure_config "$conf")
  fi
  printf '%s\n' "$conf" >"$CONF_DIR/neo4j.conf.tmp.$$"
  mv -f "$CONF_DIR/neo4j.conf.tmp.$$" "$CONF_DIR/neo4j.conf"
  cp -f "$TEMPLATE_DIR/server-logs.xml" "$TEMPLATE_DIR/user-logs.xml" "$CONF_DIR/"
}

set_initial_password() {
  auth_initialised && return 0
  # neo4j-admin dbms set-initial-password (takes effect at the first start).
  # The arguments go through a picocli @argument file in the 0700 secrets
  # directory, so the password never appears on a command line (ps). The
  # tool's output (no password in it) goes to the log.
  local argfile=$SECRETS_DIR/.admin-args.$$ p rc=0
  p=${PW//\\/\\\\}
  p=${p//\"/\\\"}
  (umask 077 && mkdir -p "$SECRETS_DIR")
  chmod 700 "$SECRETS_DIR"
  trap 'rm -f "$argfile"' EXIT
  (umask 077 && printf 'dbms\nset-initial-password\n"%s"\n' "$p" >"$argfile")
  NEO4J_HOME=$N4J_HOME NEO4J_CONF=$CONF_DIR \
    "$JAVA" -Xmx256m -Dfile.encoding=UTF-8 -cp "$LIB_DIR/*" org.neo4j.cli.AdminTool "@$argfile" \
    >>"$LOG_FILE" 2>&1 </dev/null 9>&- || rc=$?
  rm -f "$argfile"
  trap - EXIT
  if ((rc != 0)) || [[ ! -f $N4J_HOME/data/dbms/auth.ini ]]; then
    local hint
    hint=$(last_error)
    die "neo4j-admin dbms set-initial-password failed${hint:+: $hint} $(see_log)"
  fi
  chmod 600 "$N4J_HOME/data/dbms/auth.ini"   # salted hash only, still private
}

# ------------------------------------------------------------- readiness ---

curl_auth_config() {   # curl -K config line; keeps the password off the command line
  local p=${PW//\\/\\\\}
  p=${p//\"/\\\"}
  printf 'user = "neo4j:%s"\n' "$p"
}

HTTP_CODE='' HTTP_BODY=''
if [[ $SECURE == 1 ]]; then HTTP_SCHEME=https CURL_TLS=(--cacert "$TLS_DIR/ca.pem"); else HTTP_SCHEME=http CURL_TLS=(); fi
http_probe() {   # authenticated RETURN 1; sets HTTP_CODE ("000": no answer) and HTTP_BODY
  local out
  out=$(curl_auth_config | curl -s -K - --max-time 30 -w '\n%{http_code}' \
    -H 'Content-Type: application/json' -H 'Accept: application/json' \
    -d '{"statements":[{"statement":"RETURN 1"}]}' \
    "${CURL_TLS[@]}" "$HTTP_SCHEME://127.0.0.1:$HTTP_PORT/db/neo4j/tx/commit" 2>/dev/null) || true
  if [[ $out == *$'\n'* ]]; then
    HTTP_BODY=${out%$'\n'*} HTTP_CODE=${out##*$'\n'}
  else
    HTTP_BODY='' HTTP_CODE=000
  fi
}

bolt_probe() {   # Bolt handshake: magic 6060B017, proposals 5.8..5.0 and 4.4..4.0 (secured: a verified TLS handshake)
  if [[ $SECURE == 1 ]]; then
    timeout 5 openssl s_client -connect "127.0.0.1:$BOLT_PORT" -CAfile "$TLS_DIR/ca.pem" -verify_return_error \
      -verify_ip 127.0.0.1 </dev/null >/dev/null 2>&1
    return
  fi
  local reply
  reply=$(
    exec 2>/dev/null
    exec 3<>"/dev/tcp/127.0.0.1/$BOLT_PORT" || exit 1
    printf '\x60\x60\xb0\x17\x00\x08\x08\x05\x00\x04\x04\x04\x00\x00\x00\x00\x00\x00\x00\x00' >&3
    timeout 5 head -c 4 <&3 | od -An -tx1 | tr -d ' \n'
  ) || return 1
  [[ $reply =~ ^0000[0-9a-f]{4}$ && $reply != 00000000 ]]
}

# 0 ready, 1 timeout, 2 process exited, 3 password rejected
wait_ready() {
  local pid=$1 deadline=$((SECONDS + START_TIMEOUT)) unauthorised=0
  while :; do
    kill -0 "$pid" 2>/dev/null || return 2
    http_probe
    if [[ $HTTP_CODE == 200 && $HTTP_BODY == *'"errors":[]'* ]]; then
      bolt_probe && return 0
    elif [[ $HTTP_CODE == 401 ]]; then
      # Wrong password. Give a second chance in case of a transient answer.
      ((++unauthorised >= 2)) && return 3
    else
      unauthorised=0
    fi
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

last_error() {   # a short hint: first ERROR / exception line after the last start banner
  [[ -f $LOG_FILE ]] || return 0
  awk '/^==== .* deploy\/neo4j.sh up:/ {buf=""; found=0}
       !found && / ERROR |Exception|Error:/ {buf=$0; found=1}
       END {print buf}' "$LOG_FILE" |
    sed -e 's/^[0-9T:. +-]*[0-9]\{4\} //' -e 's/^Exception in thread "[^"]*" //' -e 's/[[:space:]]\+/ /g' | cut -c 1-200
}

# ------------------------------------------------------------- start/stop ---

# Class-data sharing (AppCDS): the first start dumps the loaded classes into an
# archive at JVM exit (a clean `down`, which then takes 10-30 s longer, once);
# later starts map it (-Xshare:auto: a stale or mismatching archive is ignored
# with a warning, never fatal). It lives in the jar directory, so a new
# `resolve` drops it. Warm starts go from ~25-40 s to ~11-19 s on 2 cores.
# If a dumping server had to be SIGKILLed at `down`, a .off marker stops
# further attempts (no 60 s `down` every time on a slow machine).
cds_file() { printf '%s/cds-java%s.jsa' "$LIB_DIR" "${1:-$JAVA_MAJOR}"; }

JVM_FLAGS=()
build_jvm_flags() {
  # Heap plus the server.jvm.additional defaults of the 5.26 release's
  # conf/neo4j.conf (bin/neo4j would apply them; we must do it ourselves), minus
  # -XX:+AlwaysPreTouch (slower start for a dev/CI server), plus
  # -XX:+ExitOnOutOfMemoryError and the -Dfile.encoding=UTF-8 the launcher adds.
  JVM_FLAGS=(
    "-Xms$HEAP" "-Xmx$HEAP"
    -XX:+UseG1GC
    -XX:-OmitStackTraceInFastThrow
    -XX:+UnlockExperimentalVMOptions
    -XX:+TrustFinalNonStaticFields
    -XX:+DisableExplicitGC
    -XX:+ExitOnOutOfMemoryError
    -Djdk.nio.maxCachedBufferSize=1024
    -Dio.netty.tryReflectionSetAccessible=true
    -Djdk.tls.ephemeralDHKeySize=2048
    -Djdk.tls.rejectClientInitiatedRenegotiation=true
    -XX:FlightRecorderOptions=stackdepth=256
    -XX:+UnlockDiagnosticVMOptions
    -XX:+DebugNonSafepoints
    --add-opens=java.base/java.nio=ALL-UNNAMED
    --add-opens=java.base/java.io=ALL-UNNAMED
    --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
    --enable-native-access=ALL-UNNAMED
    -Dlog4j2.disable.jmx=true
    -Dlog4j.layout.jsonTemplate.maxStringLength=32768
    -Dfile.encoding=UTF-8
  )
  if [[ ${PROVSTREAM_NEO4J_CDS:-1} != 0 ]]; then
    local cds
    cds=$(cds_file)
    if [[ -s $cds ]]; then
      JVM_FLAGS+=("-XX:SharedArchiveFile=$cds")
    elif [[ ! -e $cds.off ]]; then
      # Empty placeholder: tells cds_after_stop that this run dumps (the JVM
      # only creates the file at the end of a complete dump).
      : >"$cds.new"
      # -Xlog:cds*=off: the dump lists ~1300 skipped classes (signed jars, old
      # class files) as warnings on stdout, i.e. in logs/neo4j.log.
      JVM_FLAGS+=("-XX:ArchiveClassesAtExit=$cds.new" "-Xlog:cds*=off")
    fi
  fi
}

cds_after_stop() {   # $1: clean (exited on SIGTERM) | killed (SIGKILL at down) | aborted
  local new
  for new in "$LIB_DIR"/cds-java*.jsa.new; do
    [[ -e $new ]] || continue
    if [[ $1 == clean && -s $new ]]; then
      mv -f "$new" "${new%.new}"
    else
      rm -f "$new"
      [[ $1 == killed ]] && : >"${new%.new}.off"
    fi
  done
  return 0
}

KILLED=0
stop_pids() {   # TERM, wait up to STOP_TIMEOUT s, then KILL; $@ = pids
  local pid deadline=$((SECONDS + STOP_TIMEOUT)) alive
  KILLED=0
  (($#)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  while :; do
    alive=()
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    ((${#alive[@]})) || return 0
    ((SECONDS < deadline)) || break
    sleep 0.5
  done
  KILLED=1
  kill -KILL "${alive[@]}" 2>/dev/null || true
  deadline=$((SECONDS + 10))
  while ((SECONDS < deadline)); do
    alive=()
    for pid in "$@"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    ((${#alive[@]})) || return 0
    sleep 0.2
  done
  return 1
}

abort_start() {   # stop what we started, then die with one line
  local pid=$1 msg=$2
  local -a pids
  mapfile -t pids < <(stack_pids)
  stop_pids "$pid" "${pids[@]}" >/dev/null 2>&1 || true
  rm -f "$PID_FILE"
  cds_after_stop aborted
  die "$msg $(see_log)"
}

do_up() {
  validate_env
  take_lock
  if [[ -n $(running_pids) ]]; then
    echo "neo4j already running"
    return 0
  fi
  rm -f "$PID_FILE"
  check_java
  do_resolve
  install_browser_files
  install_procedure
  local p
  for p in "$BOLT_PORT" "$HTTP_PORT"; do
    port_in_use "$p" && die "port $p is already in use $(see_log)"
  done
  ensure_password
  if [[ -d $N4J_HOME/data/databases && $(cat "$N4J_HOME/.provstream-secure" 2>/dev/null || echo 0) != "$SECURE" ]]; then
    die "the data in $(rel "$N4J_HOME/data") was made with PROVSTREAM_SECURE=$(cat "$N4J_HOME/.provstream-secure" 2>/dev/null || echo 0), not $SECURE (use another PROVSTREAM_STACK_DIR)"
  fi
  [[ $SECURE == 1 ]] && bash "$SCRIPT_DIR/secrets.sh" make
  render_config
  echo "$SECURE" >"$N4J_HOME/.provstream-secure"
  mkdir -p "$STACK/logs"
  printf '\n==== %s deploy/neo4j.sh up: Neo4j %s, Java %s, bolt 127.0.0.1:%s, http 127.0.0.1:%s ====\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$NEO4J_VERSION" "$JAVA_HOME_DIR" "$BOLT_PORT" "$HTTP_PORT" >>"$LOG_FILE"
  set_initial_password
  build_jvm_flags

  local t0=$SECONDS pid
  (
    cd "$N4J_HOME"
    exec setsid nohup "$JAVA" "${JVM_FLAGS[@]}" -cp "$LIB_DIR/*" "$MAIN_CLASS" \
      --home-dir="$N4J_HOME" --config-dir="$CONF_DIR" --console-mode
  ) >>"$LOG_FILE" 2>&1 </dev/null 9>&- &
  pid=$!
  printf '%s\n' "$pid" >"$PID_FILE"
  # Interrupted while waiting (Ctrl-C, or a caller's timeout): leave nothing behind.
  trap 'trap - INT TERM; abort_start "$pid" "interrupted during startup"' INT TERM

  local rc=0
  wait_ready "$pid" || rc=$?
  trap - INT TERM
  case $rc in
    0) ;;
    1) abort_start "$pid" "not ready after $START_TIMEOUT s" ;;
    2)
      local hint
      local -a pids
      hint=$(last_error)
      rm -f "$PID_FILE"
      mapfile -t pids < <(stack_pids)
      stop_pids "${pids[@]}" >/dev/null 2>&1 || true
      cds_after_stop aborted
      die "exited during startup${hint:+: $hint} $(see_log)"
      ;;
    3) abort_start "$pid" "the server rejected the password (data in $(rel "$N4J_HOME/data") was initialised with another one)" ;;
  esac
  printf '==== %s deploy/neo4j.sh up: ready after %ss (pid %s) ====\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$((SECONDS - t0))" "$pid" >>"$LOG_FILE"
  if [[ $SECURE == 1 ]]; then
    echo "neo4j $NEO4J_VERSION started (pid $pid) bolt+s://127.0.0.1:$BOLT_PORT https://127.0.0.1:$HTTP_PORT"
  else
    echo "neo4j $NEO4J_VERSION started (pid $pid) bolt://127.0.0.1:$BOLT_PORT http://127.0.0.1:$HTTP_PORT"
  fi
}

do_down() {
  take_lock
  local -a pids
  mapfile -t pids < <(running_pids)
  if ((${#pids[@]} == 0)); then
    rm -f "$PID_FILE"
    echo "neo4j not running"
    return 0
  fi
  if ! stop_pids "${pids[@]}"; then
    die "could not stop pid(s) ${pids[*]}"
  fi
  rm -f "$PID_FILE"
  if ((KILLED)); then cds_after_stop killed; else cds_after_stop clean; fi
  printf '==== %s deploy/neo4j.sh down: stopped ====\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$LOG_FILE" 2>/dev/null || true
  echo "neo4j stopped"
}

do_status() {
  local state=stopped
  [[ -n $(running_pids) ]] && state=running
  if [[ $SECURE == 1 ]]; then
    echo "neo4j $NEO4J_VERSION bolt+s://127.0.0.1:$BOLT_PORT https://127.0.0.1:$HTTP_PORT $state"
  else
    echo "neo4j $NEO4J_VERSION bolt://127.0.0.1:$BOLT_PORT http://127.0.0.1:$HTTP_PORT $state"
  fi
  [[ $state == running ]] || exit 3
}

do_password() {
  ensure_password
  printf '%s\n' "$PW"
}

# c1 or c2: which JIT the importer's JVM gets for the files named in ARGFILE (see the header;
# do_import has checked the two variables).
import_jit() {
  local argfile=$1 mode=${PROVSTREAM_NEO4J_IMPORT_JIT:-auto} max=${PROVSTREAM_NEO4J_IMPORT_C1_MAX_MB:-192}
  local line path bytes=0
  [[ $mode == auto ]] || { echo "$mode"; return 0; }
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line =~ ^--(nodes|relationships)=(.*)$ ]] || continue
    path=${BASH_REMATCH[2]}
    if [[ -f $path ]]; then bytes=$((bytes + $(stat -c %s "$path"))); fi
  done <"$argfile"
  if ((bytes < max * 1024 * 1024)); then echo c1; else echo c2; fi
}

# The offline importer (AdminTool `database import full`, in neo4j-import-tool, already among the
# jars). Arguments come from a file (one a line, as written by provstream's bulk rebuild), passed
# to picocli as an @argument file; the server's own configuration is used (same store format).
do_import() {
  local argfile=$1 quoted line rc=0 t0=$SECONDS
  validate_env
  [[ $IMPORT_MEMORY =~ ^[0-9]+[kKmMgG]$ ]] || die "invalid PROVSTREAM_NEO4J_IMPORT_MEMORY '$IMPORT_MEMORY' (e.g. 512m)"
  [[ ${PROVSTREAM_NEO4J_IMPORT_JIT:-auto} =~ ^(auto|c1|c2)$ ]] ||
    die "invalid PROVSTREAM_NEO4J_IMPORT_JIT '$PROVSTREAM_NEO4J_IMPORT_JIT' (auto, c1 or c2)"
  [[ ${PROVSTREAM_NEO4J_IMPORT_C1_MAX_MB:-192} =~ ^[0-9]+$ ]] ||
    die "invalid PROVSTREAM_NEO4J_IMPORT_C1_MAX_MB '$PROVSTREAM_NEO4J_IMPORT_C1_MAX_MB' (megabytes, e.g. 192)"
  [[ -f $argfile ]] || die "import: no argument file $argfile"
  take_lock
  [[ -z $(running_pids) ]] || die "neo4j is running: the offline importer needs it stopped (deploy/neo4j.sh down)"
  check_java
  do_resolve
  render_config
  mkdir -p "$STACK/logs"
  quoted=$STACK/run/import-args.$$
  trap 'rm -f "$quoted"' EXIT
  { printf 'database\nimport\nfull\n'
    while IFS= read -r line || [[ -n $line ]]; do
      line=${line//\\/\\\\}
      printf '"%s"\n' "${line//\"/\\\"}"
    done <"$argfile"
    # --verbose: the root cause of a failure in the log (the hint below)
    printf '"--max-off-heap-memory=%s"\n"--report-file=%s"\n"--verbose"\n' "$IMPORT_MEMORY" "$STACK/logs/neo4j-import.report"
  } >"$quoted"
  printf '\n==== %s deploy/neo4j.sh import ====\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >>"$IMPORT_LOG"
  # Class-data sharing as for the server (cds_file): the first import dumps its own archive at exit.
  local cds=$LIB_DIR/cds-import-java$JAVA_MAJOR.jsa
  local -a cds_flags=() jit_flags=()
  if [[ ${PROVSTREAM_NEO4J_CDS:-1} != 0 ]]; then
    if [[ -s $cds ]]; then cds_flags=("-XX:SharedArchiveFile=$cds"); else cds_flags=("-XX:ArchiveClassesAtExit=$cds.new" "-Xlog:cds*=off"); fi
  fi
  [[ $(import_jit "$argfile") == c1 ]] && jit_flags=(-XX:TieredStopAtLevel=1)
  NEO4J_HOME=$N4J_HOME NEO4J_CONF=$CONF_DIR \
    "$JAVA" "-Xms$HEAP" "-Xmx$HEAP" -XX:+UseG1GC "${cds_flags[@]}" "${jit_flags[@]}" -Dfile.encoding=UTF-8 -cp "$LIB_DIR/*" \
    org.neo4j.cli.AdminTool "@$quoted" >>"$IMPORT_LOG" 2>&1 </dev/null 9>&- || rc=$?
  if ((rc == 0)) && [[ -s $cds.new ]]; then mv -f "$cds.new" "$cds"; else rm -f "$cds.new"; fi
  rm -f "$quoted"
  trap - EXIT
  if ((rc != 0)) || ! tail -n 40 "$IMPORT_LOG" | grep -q '^IMPORT DONE'; then
    local hint
    # the root cause ("Caused by: ...") when the importer gives one, else its first error line
    hint=$(awk '/^==== .* deploy\/neo4j.sh import/ {buf=""; cause=""; found=0}
                /^Caused by: / {cause=$0}
                !found && /Exception|ERROR|Error|Invalid|Missing|Duplicate/ {buf=$0; found=1}
                END {print (cause != "" ? cause : buf)}' "$IMPORT_LOG" | sed -e 's/[[:space:]]\+/ /g' | cut -c 1-240)
    die "import failed${hint:+: $hint} (see $(rel "$IMPORT_LOG"))"
  fi
  printf 'neo4j: imported %s (%ss)\n' \
    "$(tail -n 40 "$IMPORT_LOG" | awk '/^Imported:/ {on=1; next} on && /nodes|relationships|properties/ {printf "%s%s", sep, $0; sep=","} /^Peak/ {on=0}' | sed 's/^ *//; s/, */, /g')" \
    "$((SECONDS - t0))"
}

usage() {
  echo "usage: deploy/neo4j.sh resolve|up|down|status|password|import ARGFILE" >&2
  exit 2
}

if [[ ${1:-} == import ]]; then
  [[ $# -eq 2 ]] || usage
  do_import "$2"
  exit 0
fi
[[ $# -eq 1 ]] || usage
case $1 in
  resolve)
    take_lock
    do_resolve
    ;;
  up) do_up ;;
  down) do_down ;;
  status) do_status ;;
  password) do_password ;;
  *) usage ;;
esac
