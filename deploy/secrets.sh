#!/usr/bin/env bash
# deploy/secrets.sh - the secrets of the secured local stack (PROVSTREAM_SECURE=1),
# made once, idempotent, every file mode 0600 (directories 0700):
#
#   $STACK/secrets/tls/ca.pem, ca.key          a local CA (openssl, RSA 3072, 825 days)
#   $STACK/secrets/tls/kafka.p12               the broker's key + certificate (CN=kafka-broker,
#                                              SAN 127.0.0.1/localhost), PKCS12 (openssl)
#   $STACK/secrets/tls/truststore.p12          the CA as a Java truststore (keytool)
#   $STACK/secrets/tls/store-password          the keystore/truststore password
#   $STACK/secrets/tls/neo4j.key, neo4j.crt    Neo4j's key (PKCS#8) and certificate (CN=neo4j)
#   $STACK/secrets/kafka/<role>                the SCRAM password of each principal:
#                                              admin emitter otlp worker sink reader
#
#   deploy/secrets.sh make        create whatever is missing
#   deploy/secrets.sh users       print the principal names, one a line
#
# Nothing here prints a secret. Errors: one line "provstream: secrets: <cause>", exit 1.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
STACK=${PROVSTREAM_STACK_DIR:-$REPO/.stack}
case $STACK in /*) ;; *) STACK=$PWD/$STACK ;; esac
SECRETS=$STACK/secrets
TLS=$SECRETS/tls
USERS_DIR=$SECRETS/kafka
USERS=(admin emitter otlp worker sink reader)
LOG=$STACK/logs/secrets.log

die() { echo "provstream: secrets: $*" >&2; exit 1; }

rand() { head -c 24 /dev/urandom | base64 | tr -d '/+=\n' | cut -c1-24; }

keytool_bin() {
    local jh=${PROVSTREAM_JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
    if [ -x "$jh/bin/keytool" ]; then echo "$jh/bin/keytool"; return; fi
    command -v keytool 2>/dev/null || die "keytool not found (a JDK 17 is needed; set PROVSTREAM_JAVA_HOME)"
}

server_cert() { # $1 name, $2 CN: key + certificate signed by the CA
    local name=$1 cn=$2 ext
    [ -s "$TLS/$name.crt" ] && [ -s "$TLS/$name.key" ] && return 0
    ext=$TLS/$name.ext
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n' >"$ext"
    openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$TLS/$name.key" >>"$LOG" 2>&1 \
        || die "openssl could not make the $name key (see $LOG)"
    openssl req -new -key "$TLS/$name.key" -subj "/CN=$cn" -out "$TLS/$name.csr" >>"$LOG" 2>&1 \
        || die "openssl could not make the $name request (see $LOG)"
    openssl x509 -req -in "$TLS/$name.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -CAcreateserial \
        -days 825 -sha256 -extfile "$ext" -out "$TLS/$name.crt" >>"$LOG" 2>&1 \
        || die "openssl could not sign the $name certificate (see $LOG)"
    rm -f "$TLS/$name.csr" "$ext"
}

do_make() {
    command -v openssl >/dev/null 2>&1 || die "openssl not found"
    umask 077
    mkdir -p "$TLS" "$USERS_DIR" "$(dirname "$LOG")"
    chmod 700 "$SECRETS" "$TLS" "$USERS_DIR"
    exec 8>"$SECRETS/.lock"
    flock -w 60 8 || die "another deploy/secrets.sh runs for $STACK"
    if [ ! -s "$TLS/ca.pem" ] || [ ! -s "$TLS/ca.key" ]; then
        rm -f "$TLS"/*.crt "$TLS"/*.key "$TLS"/*.p12
        openssl req -x509 -newkey rsa:3072 -nodes -keyout "$TLS/ca.key" -out "$TLS/ca.pem" -days 825 -sha256 \
            -subj "/CN=provstream local CA/O=provstream local stack" \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
            >>"$LOG" 2>&1 || die "openssl could not make the CA (see $LOG)"
    fi
    [ -s "$TLS/store-password" ] || rand >"$TLS/store-password"
    server_cert kafka kafka-broker
    server_cert neo4j neo4j
    local pw
    pw=$(cat "$TLS/store-password")
    if [ ! -s "$TLS/kafka.p12" ]; then
        # the password reaches openssl through its environment, never its command line
        STOREPASS=$pw openssl pkcs12 -export -in "$TLS/kafka.crt" -inkey "$TLS/kafka.key" -certfile "$TLS/ca.pem" \
            -name kafka-broker -passout env:STOREPASS -out "$TLS/kafka.p12" >>"$LOG" 2>&1 \
            || die "openssl could not write the broker keystore (see $LOG)"
    fi
    if [ ! -s "$TLS/truststore.p12" ]; then
        STOREPASS=$pw "$(keytool_bin)" -importcert -noprompt -alias provstream-ca -file "$TLS/ca.pem" \
            -keystore "$TLS/truststore.p12" -storetype PKCS12 -storepass:env STOREPASS >>"$LOG" 2>&1 \
            || die "keytool could not write the truststore (see $LOG)"
    fi
    local u
    for u in "${USERS[@]}"; do
        [ -s "$USERS_DIR/$u" ] || rand >"$USERS_DIR/$u"
    done
    chmod 600 "$TLS"/* "$USERS_DIR"/*
}

case ${1:-} in
    make) do_make ;;
    users) printf '%s\n' "${USERS[@]}" ;;
    *) echo "usage: $0 make|users" >&2; exit 2 ;;
esac
