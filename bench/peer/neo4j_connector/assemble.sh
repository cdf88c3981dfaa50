#!/usr/bin/env bash
# Assemble the Neo4j Connector for Kafka 5.5.0 plugin folder and an Apache Kafka Connect 4.1.2
# runtime under $WORK/connect, once (run.sh calls this; it is also safe to run by hand).
#
#   $WORK/connect/plugins/neo4j   the plugin folder: jars/*.jar (not on Maven Central, see jars/NOTICE)
#                                 + `mvn -P plugin dependency:copy-dependencies` of pom.xml
#   $WORK/connect/lib             the Connect worker's class path: `mvn -P runtime ...` of pom.xml
#
# Environment:
#   WORK              default <repository>/.stack/peer-neo4j-connector (created on demand)
#   MAVEN_REPO_LOCAL  Maven local repository (default: Maven's own, normally ~/.m2/repository)
#
# Maven needs to reach Maven Central only. A stamp file keyed on pom.xml and jars/ makes the
# next run skip all of this; delete $WORK/connect to force it.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORK=${WORK:-$HERE/../../../.stack/peer-neo4j-connector}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
OUT=$WORK/connect
PLUGIN=$OUT/plugins/neo4j
LIB=$OUT/lib
LOG=$OUT/assemble.log

die() { echo "assemble: $*" >&2; exit 1; }
command -v mvn >/dev/null 2>&1 || die "Maven (mvn) is required"
ls "$HERE"/jars/*.jar >/dev/null 2>&1 || die "no jars in $HERE/jars"

KEY=$(cat "$HERE/pom.xml" "$HERE"/jars/*.jar | sha256sum | cut -c1-16)
STAMP=$OUT/.assembled-$KEY
if [ -f "$STAMP" ]; then
  echo "assemble: cached ($(ls "$PLUGIN"/*.jar | wc -l) plugin jars, $(ls "$LIB"/*.jar | wc -l) runtime jars under $OUT)"
  exit 0
fi

rm -rf "$OUT"
mkdir -p "$OUT/mvn" "$PLUGIN" "$LIB"
cp "$HERE/pom.xml" "$OUT/mvn/pom.xml"   # Maven may write target/ beside its pom: keep that out of the checkout
MVN=(mvn -B -q -Dstyle.color=never -f "$OUT/mvn/pom.xml")
[ -z "${MAVEN_REPO_LOCAL:-}" ] || MVN+=("-Dmaven.repo.local=$MAVEN_REPO_LOCAL")
: >"$LOG"
resolve() { # $1 profile, $2 output folder
  "${MVN[@]}" -P "$1" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$2" >>"$LOG" 2>&1 \
    || { tail -30 "$LOG" >&2; die "mvn -P $1 dependency:copy-dependencies failed (see $LOG)"; }
}
echo "assemble: resolving the connector's Central dependencies and Kafka Connect from Maven Central"
resolve plugin "$PLUGIN"
resolve runtime "$LIB"
cp "$HERE"/jars/*.jar "$PLUGIN/"

# A plugin folder must not carry its own Connect API, Kafka clients or SLF4J: the worker provides them.
for j in "$PLUGIN"/connect-api-*.jar "$PLUGIN"/kafka-clients-*.jar "$PLUGIN"/slf4j-api-*.jar; do
  [ ! -e "$j" ] || die "unexpected $(basename "$j") in the plugin folder"
done
[ -f "$PLUGIN/sink-connector-5.5.0.jar" ] || die "sink-connector-5.5.0.jar missing from the plugin folder"
[ -f "$LIB/connect-runtime-4.1.2.jar" ] || die "connect-runtime-4.1.2.jar missing from the runtime"
touch "$STAMP"
echo "assemble: connector 5.5.0 -> $PLUGIN ($(ls "$PLUGIN"/*.jar | wc -l) jars);" \
     "Kafka Connect 4.1.2 -> $LIB ($(ls "$LIB"/*.jar | wc -l) jars)"
