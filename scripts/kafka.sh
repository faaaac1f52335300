#!/usr/bin/env bash
# A real Apache Kafka 4.4.0 (KRaft, loopback only) for qdeck's Kafka tests and for trying by hand.
#
#   scripts/kafka.sh PORT [--brokers N]   start N brokers (default 1) on PORT, PORT+1, ...;
#                                         the first stdout line is the bootstrap address
#   scripts/kafka.sh stop PORT            stop what `kafka.sh PORT` started
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
  local file="$1" node="$2" port="$3" ctl="$4" data="$5"
  {
    if [[ $node == 1 ]]; then
      echo "process.roles=broker,controller"
      echo "listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$ctl"
    else
      echo "process.roles=broker"
      echo "listeners=PLAINTEXT://127.0.0.1:$port"
    fi
    cat <<PROPS
node.id=$node
controller.quorum.bootstrap.servers=127.0.0.1:$ctl
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://127.0.0.1:$port
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
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

start() {
  local port="$1" brokers="$2"
  [[ "$port" =~ ^[0-9]+$ ]] || die "PORT must be a number, got '$port'"
  [[ "$brokers" =~ ^[1-9]$ ]] || die "--brokers must be 1 to 9, got '$brokers'"
  local ctl=$((port + 100)) data="${QDECK_KAFKA_DATA:-/tmp/qdeck-kafka-$port}"
  command -v "$JAVA" >/dev/null || die "java is not installed"
  for n in $(seq 1 "$brokers"); do
    listening $((port + n - 1)) && die "port $((port + n - 1)) is already in use (scripts/kafka.sh stop $port?)"
  done
  listening "$ctl" && die "controller port $ctl is already in use"
  fetch_jars
  stop "$port" 2>/dev/null || true
  rm -rf "$data"
  mkdir -p "$data"
  write_log4j "$data/log4j2.xml"
  local cp="$LIBS/*" cluster
  cluster="$("$JAVA" -cp "$cp" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n1 || true)"
  [[ -n "$cluster" ]] || die "StorageTool random-uuid failed"
  local t0=$SECONDS
  for n in $(seq 1 "$brokers"); do
    local props="$data/server-$n.properties"
    write_props "$props" "$n" $((port + n - 1)) "$ctl" "$data"
    local how=(--no-initial-controllers)
    [[ $n == 1 ]] && how=(--standalone)
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
  ""|-h|--help) sed -n '2,17p' "$0"; [[ -n "${1:-}" ]] ;;
  *)
    port="$1"; shift; brokers=1
    while [[ $# -gt 0 ]]; do
      case "$1" in
        --brokers) brokers="${2:-}"; shift 2 || die "--brokers needs a number" ;;
        *) die "unknown argument '$1'" ;;
      esac
    done
    start "$port" "$brokers"
    ;;
esac
