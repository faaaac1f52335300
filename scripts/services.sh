#!/usr/bin/env bash
# Installs and starts every service qdeck's broker tests use, each from where it comes:
#   Debian's packages: RabbitMQ (management + shovel plugins), Redis, nats-server with JetStream,
#                      Prometheus and promtool, Ruby's Sidekiq, openssl;
#   PyPI (one venv):   moto (the SQS stand-in), and the brokers' own Python clients the tests read
#                      back with: pika, boto3, rq, celery/kombu, flower, nats-py, nkeys,
#                      python-qpid-proton (Service Bus stand-in), azure-servicebus;
#   npm:               BullMQ (tests/fixtures/redis);
#   Maven Central:     Apache Kafka (scripts/kafka_up.sh, when present);
#   Go module proxy:   Google's fake Pub/Sub server (scripts/pubsub_up.sh, when present).
#
#   scripts/services.sh up       install what is missing, start what is not running, print endpoints
#   scripts/services.sh status   which services answer
#   scripts/services.sh env      the `export QDECK_TEST_...` lines for the tests (eval them)
#   scripts/services.sh down     stop what `up` started
#
# Idempotent: a service whose port already answers is left alone. Each phase prints its time.
# `up` writes the env lines to $QDECK_SERVICES_DIR/env (default ~/.cache/qdeck-services/env), so
#   eval "$(scripts/services.sh env)" && cargo test -- --include-ignored
# runs the broker tests against them.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE="${QDECK_SERVICES_DIR:-$HOME/.cache/qdeck-services}"
VENV="${QDECK_CI_VENV:-$HOME/.cache/qdeck-ci/venv}"
MOTO_PORT="${QDECK_MOTO_PORT:-5055}"
mkdir -p "$STATE"

log() { echo "== $*"; }

# Per-phase timing: `phase NAME` closes the previous phase and opens the next.
PHASE="" PHASE_T0=0 TOTAL_T0=$(date +%s)
phase() {
  local now
  now=$(date +%s)
  if [ -n "$PHASE" ]; then log "phase $PHASE: $((now - PHASE_T0)) s"; fi
  PHASE="$1" PHASE_T0=$now
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_port() { # host port seconds
  local t=0
  until port_open "$1" "$2"; do
    t=$((t + 1))
    if [ "$t" -ge "$3" ]; then echo "port $1:$2 did not open within $3 s" >&2; return 1; fi
    sleep 1
  done
}

# Debian's packages, in one apt-get run for everything missing (one `apt-get update` at most).
apt_install_missing() {
  local want=() pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      want+=("$pkg")
    fi
  done
  if [ "${#want[@]}" -gt 0 ]; then
    log "installing from Debian's packages: ${want[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
  fi
}

# The Python packages, with the version ranges the tests were written against.
PY_REQS=(
  'moto[server]' pika boto3
  'rq>=2,<3'
  'celery[redis]>=5,<6' 'flower>=2,<3'
  nats-py nkeys
  'python-qpid-proton>=0.40,<1' 'azure-servicebus>=7.15,<8'
)
PY_CHECK='
import sys
import moto, pika, boto3, rq, celery, kombu, redis, flower, nats, nkeys, proton
import azure.servicebus as sb
ok = (rq.__version__.startswith("2.") and celery.__version__.startswith("5.")
      and flower.__version__.startswith("2.")
      and (7, 15) <= tuple(map(int, sb.__version__.split(".")[:2])) < (8, 0))
sys.exit(0 if ok else 1)
'

# The QDECK_TEST_ lines a starter prints, as `export` lines (with or without the word).
# Values are quoted here: a classpath holds `*`.
exports() { sed -nE 's/^(export )?(QDECK_TEST_[A-Z_]+)="?([^"]*)"?$/export \2="\3"/p'; }

write_env() {
  cat >"$STATE/env" <<EOF
export QDECK_TEST_PYTHON="$VENV/bin/python"
export QDECK_TEST_AMQP_URL="amqp://guest:guest@127.0.0.1:5672/%2f"
export QDECK_TEST_RABBITMQ_MGMT="http://127.0.0.1:15672"
export QDECK_TEST_SQS_ENDPOINT="http://127.0.0.1:$MOTO_PORT"
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export QDECK_TEST_REDIS_URL="redis://127.0.0.1:6379"
export QDECK_TEST_NODE_FIXTURES="$PWD/tests/fixtures/redis"
export QDECK_TEST_PROMETHEUS="$(command -v prometheus || true)"
export QDECK_TEST_PROMTOOL="$(command -v promtool || true)"
export QDECK_TEST_NATS_URL="nats://127.0.0.1:4222"
export QDECK_TEST_SB_AMQP=1
EOF
  # Kafka and Pub/Sub print their own export lines (they know their ports and paths).
  if [ -s "$STATE/env.kafka" ]; then cat "$STATE/env.kafka" >>"$STATE/env"; fi
  if [ -s "$STATE/env.pubsub" ]; then cat "$STATE/env.pubsub" >>"$STATE/env"; fi
}

up() {
  phase "Debian packages"
  apt_install_missing rabbitmq-server redis-server nats-server prometheus ruby-sidekiq ruby-redis \
    openssl curl
  if ! command -v npm >/dev/null 2>&1; then
    echo "Node.js with npm is needed for the BullMQ tests (the polyglot machine has it)" >&2
    exit 1
  fi

  phase "RabbitMQ"
  if ! port_open 127.0.0.1 5672; then
    log "starting RabbitMQ"
    rabbitmq-server -detached || true
  fi
  wait_port 127.0.0.1 5672 120
  # Enabling plugins starts an Erlang VM (seconds); skip it when the management API and the
  # shovel are already there.
  if ! curl -fsS -u guest:guest http://127.0.0.1:15672/api/shovels >/dev/null 2>&1; then
    rabbitmq-plugins enable rabbitmq_management rabbitmq_shovel rabbitmq_shovel_management >/dev/null
  fi
  wait_port 127.0.0.1 15672 120
  # The management API answers a little after its port opens.
  for _ in $(seq 1 60); do
    if curl -fsS -u guest:guest http://127.0.0.1:15672/api/overview >/dev/null 2>&1; then break; fi
    sleep 1
  done
  curl -fsS -u guest:guest http://127.0.0.1:15672/api/overview >/dev/null

  phase "Redis"
  if ! port_open 127.0.0.1 6379; then
    log "starting redis-server on 127.0.0.1:6379"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no \
      --pidfile "$STATE/redis.pid"
  fi
  wait_port 127.0.0.1 6379 30
  if [ "$(redis-cli -h 127.0.0.1 -p 6379 ping)" != "PONG" ]; then
    echo "Redis at 127.0.0.1:6379 does not answer PING" >&2
    exit 1
  fi

  phase "NATS JetStream"
  if ! port_open 127.0.0.1 4222; then
    log "starting nats-server with JetStream on 127.0.0.1:4222"
    mkdir -p "$STATE/nats"
    nohup nats-server -a 127.0.0.1 -p 4222 -js -sd "$STATE/nats" >"$STATE/nats.log" 2>&1 &
    echo $! >"$STATE/nats.pid"
  fi
  wait_port 127.0.0.1 4222 30

  phase "Python venv (PyPI)"
  if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
  if ! "$VENV/bin/python" -c "$PY_CHECK" 2>/dev/null; then
    log "installing into $VENV: ${PY_REQS[*]}"
    "$VENV/bin/pip" install -q --disable-pip-version-check "${PY_REQS[@]}"
  fi

  phase "moto (SQS)"
  if ! port_open 127.0.0.1 "$MOTO_PORT"; then
    log "starting moto_server on 127.0.0.1:$MOTO_PORT"
    nohup "$VENV/bin/moto_server" -H 127.0.0.1 -p "$MOTO_PORT" >"$STATE/moto.log" 2>&1 &
    echo $! >"$STATE/moto.pid"
  fi
  wait_port 127.0.0.1 "$MOTO_PORT" 60

  phase "BullMQ (npm)"
  if [ ! -d tests/fixtures/redis/node_modules/bullmq ]; then
    log "npm ci in tests/fixtures/redis"
    (cd tests/fixtures/redis && npm ci --no-audit --no-fund --silent)
  fi

  : >"$STATE/env.kafka"
  if [ -x scripts/kafka_up.sh ]; then
    phase "Kafka (Maven Central)"
    scripts/kafka_up.sh | exports >"$STATE/env.kafka"
  fi
  : >"$STATE/env.pubsub"
  if [ -x scripts/pubsub_up.sh ]; then
    phase "Pub/Sub fake (Go module proxy, PyPI)"
    scripts/pubsub_up.sh | exports >"$STATE/env.pubsub"
  fi

  phase ""
  write_env
  log "services up in $(($(date +%s) - TOTAL_T0)) s"
  status
}

status() {
  local name host port bad=0
  while read -r name host port; do
    if port_open "$host" "$port"; then
      echo "up    $name $host:$port"
    else
      echo "down  $name $host:$port"
      bad=1
    fi
  done <<EOF
rabbitmq-amqp 127.0.0.1 5672
rabbitmq-management 127.0.0.1 15672
redis 127.0.0.1 6379
nats-jetstream 127.0.0.1 4222
moto-sqs 127.0.0.1 $MOTO_PORT
EOF
  if [ -s "$STATE/env.kafka" ]; then grep -h '^export' "$STATE/env.kafka" | sed 's/^export /      /'; fi
  if [ -s "$STATE/env.pubsub" ]; then grep -h '^export' "$STATE/env.pubsub" | sed 's/^export /      /'; fi
  return "$bad"
}

kill_pidfile() {
  if [ -s "$1" ]; then kill "$(cat "$1")" 2>/dev/null || true; rm -f "$1"; fi
}

down() {
  kill_pidfile "$STATE/moto.pid"
  kill_pidfile "$STATE/nats.pid"
  redis-cli -h 127.0.0.1 -p 6379 shutdown nosave >/dev/null 2>&1 || true
  rabbitmqctl stop >/dev/null 2>&1 || true
  if [ -x scripts/kafka.sh ]; then scripts/kafka.sh stop "${QDECK_KAFKA_PORT:-19092}" || true; fi
  pkill -f 'pubsub_fake.sh|qdeck-pubsub/pubsubfake' 2>/dev/null || true
  rm -f "$STATE/env" "$STATE/env.kafka" "$STATE/env.pubsub"
  log "stopped"
}

case "${1:-}" in
  up) up ;;
  status) status ;;
  env)
    if [ ! -s "$STATE/env" ]; then echo "no env yet: run scripts/services.sh up" >&2; exit 1; fi
    cat "$STATE/env"
    ;;
  down) down ;;
  *)
    echo "usage: scripts/services.sh up|status|env|down" >&2
    exit 2
    ;;
esac
