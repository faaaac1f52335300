#!/usr/bin/env bash
# Kafka for qdeck's broker tests, idempotent: fetch the Kafka 4.4.0 jars if missing, compile the
# Java test scenes (tests/fixtures/kafka/src) if missing or older than their source, start one
# broker with scripts/kafka.sh --secure on $QDECK_KAFKA_PORT (default 19092) unless something
# listens there already, then print the lines to export:
#
#   QDECK_TEST_KAFKA_BOOTSTRAP=127.0.0.1:19092
#   QDECK_TEST_KAFKA_SCENES=<classpath: compiled scenes + Kafka's jars>
#   QDECK_TEST_KAFKA_SASL=127.0.0.1:19102        SASL_PLAINTEXT: PLAIN, SCRAM-SHA-256/512
#   QDECK_TEST_KAFKA_SASL_PASSWORD=...           user qdeck's test password
#   QDECK_TEST_KAFKA_TLS=127.0.0.1:19103         SSL
#   QDECK_TEST_KAFKA_SASL_SSL=127.0.0.1:19104    SASL_SSL: the SASL mechanisms inside TLS
#   QDECK_TEST_KAFKA_CA=.../tls/ca.crt           the CA of the SSL listener's certificate
#   QDECK_TEST_KAFKA_OTHER_CA=.../tls/other-ca.crt  a CA that did not sign it
#
# (the last six only when the broker on the port has those listeners: one started by an
# older kafka_up.sh has not).
#
# Use: eval "$(scripts/kafka_up.sh | sed 's/^/export /')"; stop with scripts/kafka.sh stop 19092.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_HOME="${QDECK_KAFKA_HOME:-$HOME/.cache/qdeck-kafka}"
LIBS="$KAFKA_HOME/libs"
SCENES="$KAFKA_HOME/scenes"
PORT="${QDECK_KAFKA_PORT:-19092}"

die() { echo "kafka_up.sh: $*" >&2; exit 2; }

if [[ ! -f "$LIBS/kafka-clients-4.4.0.jar" || ! -f "$LIBS/kafka_2.13-4.4.0.jar" || ! -f "$LIBS/kafka-tools-4.4.0.jar" ]]; then
  command -v mvn >/dev/null || die "mvn is not installed (apt-get install maven)"
  echo "kafka_up.sh: fetching Kafka 4.4.0 jars into $LIBS" >&2
  mkdir -p "$LIBS"
  mvn -q -f "$ROOT/tests/fixtures/kafka/pom.xml" dependency:copy-dependencies -DoutputDirectory="$LIBS" >&2 \
    || die "mvn could not fetch the Kafka jars"
fi

src="$ROOT/tests/fixtures/kafka/src/Scenes.java"
if [[ ! -f "$SCENES/Scenes.class" || "$src" -nt "$SCENES/Scenes.class" ]]; then
  command -v javac >/dev/null || die "javac is not installed (a JDK 17 is needed)"
  echo "kafka_up.sh: compiling the test scenes into $SCENES" >&2
  mkdir -p "$SCENES"
  javac -nowarn -d "$SCENES" -cp "$LIBS/*" "$ROOT"/tests/fixtures/kafka/src/*.java >&2 \
    || die "javac failed on tests/fixtures/kafka/src"
fi

if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "kafka_up.sh: something listens on $PORT already; using it" >&2
  bootstrap="127.0.0.1:$PORT"
else
  bootstrap="$("$ROOT/scripts/kafka.sh" "$PORT" --secure | head -n1)"
  [[ -n "$bootstrap" ]] || die "scripts/kafka.sh $PORT printed no bootstrap address"
fi

echo "QDECK_TEST_KAFKA_BOOTSTRAP=$bootstrap"
echo "QDECK_TEST_KAFKA_SCENES=$SCENES:$LIBS/*"
tls="${QDECK_KAFKA_DATA:-/tmp/qdeck-kafka-$PORT}/tls"
if [[ -f "$tls/ca.crt" ]] && (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 10))") 2>/dev/null; then
  echo "QDECK_TEST_KAFKA_SASL=127.0.0.1:$((PORT + 10))"
  echo "QDECK_TEST_KAFKA_SASL_PASSWORD=${KAFKA_TEST_PASSWORD:-qdeck-kafka-test-pw-7Q2x}"
  echo "QDECK_TEST_KAFKA_TLS=127.0.0.1:$((PORT + 11))"
  # A broker started before SASL_SSL was added has the other two only; the SASL_SSL test then
  # says its variable is missing (restart with scripts/kafka.sh stop $PORT).
  if (exec 3<>"/dev/tcp/127.0.0.1/$((PORT + 12))") 2>/dev/null; then
    echo "QDECK_TEST_KAFKA_SASL_SSL=127.0.0.1:$((PORT + 12))"
  fi
  echo "QDECK_TEST_KAFKA_CA=$tls/ca.crt"
  echo "QDECK_TEST_KAFKA_OTHER_CA=$tls/other-ca.crt"
else
  echo "kafka_up.sh: the broker on $PORT has no SASL/SSL listeners (started without --secure); the SASL and TLS tests will say so" >&2
fi
