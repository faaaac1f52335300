#!/usr/bin/env bash
# A real Apache Kafka 4.4.0 (KRaft, loopback only) for qdeck's Kafka tests and for trying by hand.
#
#   scripts/kafka.sh PORT [--brokers N] [--secure]
#                                         start N brokers (default 1) on PORT, PORT+1, ...;
#                                         the first stdout line is the bootstrap address
#   scripts/kafka.sh stop PORT            stop what `kafka.sh PORT` started
#
# --secure (one broker only) adds three listeners beside PLAINTEXT, for the SASL and TLS tests:
#   SASL_PLAINTEXT on PORT+10 with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, user `qdeck`,
#     password `$KAFKA_TEST_PASSWORD` (a test password, printed by kafka_up.sh);
#   SSL on PORT+11, its certificate (IP 127.0.0.1, DNS localhost) signed by a CA made here
#     with openssl, in $data/tls/ca.crt; $data/tls/other-ca.crt is an unrelated CA, for the
#     test of a CA that does not match;
#   SASL_SSL on PORT+12: the same mechanisms and user inside the same TLS (what managed
#     Kafka services such as MSK and Confluent Cloud expose);
#   and Kafka's StandardAuthorizer, allowing everything no ACL denies (ANONYMOUS is the super
#     user), so a test can deny user `qdeck` a topic.
#
# The jars come from Maven Central through tests/fixtures/kafka/pom.xml (fetched once into
# $QDECK_KAFKA_HOME/libs, default ~/.cache/qdeck-kafka). Apache's tarball, with its .sh
# wrappers, server.properties and log4j2 config, is not used: this script writes its own
# config and runs the main classes (kafka.Kafka, kafka.tools.StorageTool).
#
# Node 1 is broker and the single KRaft controller (controller port PORT+100, formatted
# `--standalone`); nodes 2..N are brokers only. Storage is formatted afresh at every start
# with share groups and their dead-letter queues on (share.version=2, KIP-932 and KIP-1191).
# Each JVM gets a small heap (KAFKA_HEAP, default -Xmx384m). Data and logs live in
# $QDECK_KAFKA_DATA (default /tmp/qdeck-kafka-PORT); the brokers' own log is server-N.log there.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_HOME="${QDECK_KAFKA_HOME:-$HOME/.cache/qdeck-kafka}"
LIBS="$KAFKA_HOME/libs"
HEAP="${KAFKA_HEAP:--Xmx384m -Xms64m}"
JAVA="${JAVA:-java}"
# The SASL test user's password: a fixture, not a secret (the broker is on loopback and
# thrown away); tests check it never appears in qdeck's output.
KAFKA_TEST_PASSWORD="${KAFKA_TEST_PASSWORD:-qdeck-kafka-test-pw-7Q2x}"

die() { echo "kafka.sh: $*" >&2; exit 2; }

fetch_jars() {
  if [[ -f "$LIBS/kafka_2.13-4.4.0.jar" && -f "$LIBS/kafka-tools-4.4.0.jar" && -f "$LIBS/kafka-clients-4.4.0.jar" ]]; then
    return
  fi
  command -v mvn >/dev/null || die "mvn is not installed (apt-get install maven)"
  echo "kafka.sh: fetching Kafka 4.4.0 jars into $LIBS" >&2
  mkdir -p "$LIBS"
  mvn -q -f "$ROOT/tests/fixtures/kafka/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$LIBS" >&2 || die "mvn could not fetch the Kafka jars"
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

stop() {
  local port="$1" data="${QDECK_KAFKA_DATA:-/tmp/qdeck-kafka-$1}" pid n=0
  [[ -d "$data" ]] || { echo "kafka.sh: nothing started on $port ($data absent)" >&2; return 0; }
  for f in "$data"/node-*.pid; do
    [[ -f "$f" ]] || continue
    pid="$(cat "$f")"
    if kill -0 "$pid" 2>/dev/null; then kill "$pid"; n=$((n + 1)); fi
  done
  # Give them the controlled shutdown Kafka does on SIGTERM, then insist.
  for _ in $(seq 1 100); do
    local alive=0
    for f in "$data"/node-*.pid; do
      [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null && alive=1
    done
    [[ $alive == 0 ]] && break
    sleep 0.2
  done
  for f in "$data"/node-*.pid; do
    [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null && kill -9 "$(cat "$f")"
    rm -f "$f"
  done
  echo "kafka.sh: stopped $n broker(s) of $data" >&2
}

write_log4j() {
  cat >"$1" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <File name="file" fileName="${sys:kafka.logs.dir}/${sys:kafka.log.name}" append="true">
      <PatternLayout pattern="[%d] %p %m (%c)%n"/>
    </File>
  </Appenders>
  <Loggers>
    <Logger name="kafka" level="INFO"/>
    <Logger name="org.apache.kafka" level="INFO"/>
    <Logger name="state.change.logger" level="WARN"/>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Root level="WARN"><AppenderRef ref="file"/></Root>
  </Loggers>
</Configuration>
XML
}

# server-N.properties for node N of `brokers`, listening on PORT+N-1.
write_props() {
  local file="$1" node="$2" port="$3" ctl="$4" data="$5" secure="${6:-0}"
  local extra="" adv="PLAINTEXT://127.0.0.1:$port"
  if [[ $secure == 1 ]]; then
    extra=",SASL_PLAINTEXT://127.0.0.1:$((port + 10)),SSL://127.0.0.1:$((port + 11)),SASL_SSL://127.0.0.1:$((port + 12))"
    adv="$adv$extra"
  fi
  {
    if [[ $node == 1 ]]; then
      echo "process.roles=broker,controller"
      echo "listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctl$extra"
    else
      echo "process.roles=broker"
      echo "listeners=PLAINTEXT://127.0.0.1:$port"
    fi
    if [[ $secure == 1 ]]; then
      cat <<PROPS
sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_qdeck="$KAFKA_TEST_PASSWORD";
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_qdeck="$KAFKA_TEST_PASSWORD";
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PKCS12
ssl.keystore.location=$data/tls/server.p12
ssl.keystore.password=qdeck-keystore
ssl.key.password=qdeck-keystore
ssl.client.auth=none
# ACLs for the authorisation test: nothing is denied unless an ACL says so; PLAINTEXT, the
# controller and SSL (no client certificate) all come as ANONYMOUS, the super user.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS
allow.everyone.if.no.acl.found=true
PROPS
    fi
    cat <<PROPS
node.id=$node
controller.quorum.bootstrap.servers=127.0.0.1:$ctl
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
advertised.listeners=$adv
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL
log.dirs=$data/node-$node
num.partitions=1
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
# One copy of everything: the tests need a cluster's routing, not its durability.
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=4
default.replication.factor=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
# Share groups (KIP-932) and their dead-letter topics (KIP-1191, share.version=2).
errors.deadletterqueue.auto.create.topics.enable=true
# Short log segments so that retention scenes can delete records in seconds.
log.segment.bytes=1048576
log.retention.check.interval.ms=2000
log.segment.delete.delay.ms=500
file.delete.delay.ms=500
PROPS
  } >"$file"
}

# A CA, the broker's certificate it signs (IP 127.0.0.1, DNS localhost) in a PKCS12 keystore,
# and an unrelated CA, in $1.
make_tls() {
  local dir="$1"
  command -v openssl >/dev/null || die "--secure needs openssl"
  mkdir -p "$dir"
  (
    cd "$dir"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=qdeck test CA" \
      -keyout ca.key -out ca.crt
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=qdeck unrelated CA" \
      -keyout other-ca.key -out other-ca.crt
    openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key -out server.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
      -extfile server.ext -out server.crt
    openssl pkcs12 -export -in server.crt -inkey server.key -certfile ca.crt -name broker \
      -passout pass:qdeck-keystore -out server.p12
  ) >"$dir/openssl.log" 2>&1 || die "openssl failed: $(tail -n3 "$dir/openssl.log" | tr '\n' ' ')"
}

start() {
  local port="$1" brokers="$2" secure="${3:-0}"
  [[ $secure == 1 && $brokers != 1 ]] && die "--secure is for one broker (SASL and TLS are tested on one broker with several listeners)"
  [[ "$port" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$port'"
  [[ "$brokers" =~ ^[1-9]$ ]] || die "--brokers must be 1 to 9, got '$brokers'"
  local ctl=$((port + 100)) data="${QDECK_KAFKA_DATA:-/tmp/qdeck-kafka-$port}"
  command -v "$JAVA" >/dev/null || die "java is not installed"
  for n in $(seq 1 "$brokers"); do
    listening $((port + n - 1)) && die "port $((port + n - 1)) is already in use (scripts/kafka.sh stop $port?)"
  done
  if [[ $secure == 1 ]]; then
    for p in $((port + 10)) $((port + 11)) $((port + 12)); do
      listening "$p" && die "port $p (for --secure) is already in use"
    done
  fi
  listening "$ctl" && die "controller port $ctl is already in use"
  fetch_jars
  stop "$port" 2>/dev/null || true
  rm -rf "$data"
  mkdir -p "$data"
  write_log4j "$data/log4j2.xml"
  [[ $secure == 1 ]] && make_tls "$data/tls"
  local cp="$LIBS/*" cluster
  cluster="$("$JAVA" -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1 || true)"
  [[ -n "$cluster" ]] || die "StorageTool random-uuid failed"
  local t0=$SECONDS
  for n in $(seq 1 "$brokers"); do
    local props="$data/server-$n.properties"
    write_props "$props" "$n" $((port + n - 1)) "$ctl" "$data" "$secure"
    local how=(--no-initial-controllers)
    [[ $n == 1 ]] && how=(--standalone)
    # SCRAM credentials live in the cluster metadata; KRaft takes them at format time.
    if [[ $secure == 1 ]]; then
      how+=(--add-scram "SCRAM-SHA-256=[name=qdeck,password=$KAFKA_TEST_PASSWORD]"
        --add-scram "SCRAM-SHA-512=[name=qdeck,password=$KAFKA_TEST_PASSWORD]")
    fi
    "$JAVA" -Xmx256m -Dkafka.logs.dir="$data" -Dkafka.log.name="format-$n.log" \
      -Dlog4j2.configurationFile="$data/log4j2.xml" -cp "$cp" \
      kafka.tools.StorageTool format -t "$cluster" -c "$props" "${how[@]}" \
      --feature share.version=2 >"$data/format-$n.out" 2>&1 \
      || die "formatting node $n failed: $(tail -n3 "$data/format-$n.out" | tr '\n' ' ')"
  done
  for n in $(seq 1 "$brokers"); do
    # setsid: the brokers outlive this script and the shell that ran it.
    setsid "$JAVA" $HEAP -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k \
      -Djava.awt.headless=true -Dkafka.logs.dir="$data" -Dkafka.log.name="server-$n.log" \
      -Dlog4j2.configurationFile="$data/log4j2.xml" -cp "$cp" \
      kafka.Kafka "$data/server-$n.properties" >"$data/stdout-$n.log" 2>&1 </dev/null &
    echo $! >"$data/node-$n.pid"
  done
  local bootstrap=""
  for n in $(seq 1 "$brokers"); do
    bootstrap="${bootstrap:+$bootstrap,}127.0.0.1:$((port + n - 1))"
  done
  # Ready when every broker logged its start (it has joined the cluster and serves requests).
  for _ in $(seq 1 600); do
    local ready=0
    for n in $(seq 1 "$brokers"); do
      kill -0 "$(cat "$data/node-$n.pid")" 2>/dev/null \
        || die "broker $n exited; see $data/server-$n.log and $data/stdout-$n.log: $(tail -n3 "$data/stdout-$n.log" | tr '\n' ' ')"
      grep -q "Kafka Server started" "$data/server-$n.log" 2>/dev/null && ready=$((ready + 1))
    done
    if [[ $ready == "$brokers" ]]; then
      echo "$bootstrap"
      echo "kafka.sh: $brokers broker(s) ready in $((SECONDS - t0)) s; data and logs in $data; stop with: scripts/kafka.sh stop $port" >&2
      return 0
    fi
    sleep 0.2
  done
  die "brokers not ready after 120 s; see $data/server-*.log"
}

case "${1:-}" in
  stop) [[ -n "${2:-}" ]] || die "usage: kafka.sh stop PORT"; stop "$2" ;;
  ""|-h|--help) sed -n '2,26p' "$0"; [[ -n "${1:-}" ]] ;;
  *)
    port="$1"; shift; brokers=1; secure=0
    while [[ $# -gt 0 ]]; do
      case "$1" in
        --brokers) brokers="${2:-}"; shift 2 || die "--brokers needs a number" ;;
        --secure) secure=1; shift ;;
        *) die "unknown argument '$1'" ;;
      esac
    done
    start "$port" "$brokers" "$secure"
    ;;
esac
