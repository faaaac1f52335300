#!/usr/bin/env bash
# `qdeck import` of N messages (~1 KB body, two headers) into each broker that is reachable,
# timed for a reference binary and this tree's release binary in the same go, so the ratio
# says what batching (`Backend::send_many`) changed. Every run is checked: the queue holds
# exactly N messages afterwards. The same sending loop serves copy and move (console and CLI).
#
# Usage: REF=/path/to/older/qdeck scripts/bench_import.sh [N]     (N defaults to 5000)
#   A reference binary: `git worktree add /tmp/ref REV && cargo build --release` there, or a
#   copy of an older target/release/qdeck. Without REF only this tree's binary is timed.
# Brokers: the embedded local one always; RabbitMQ when its management API answers
#   (QDECK_TEST_AMQP_URL, QDECK_TEST_RABBITMQ_MGMT, defaults to guest@127.0.0.1); SQS when
#   QDECK_TEST_SQS_ENDPOINT names a moto server (AWS_* test credentials in the environment);
#   moto's own work per message (47-50 ms a message over 5,000 here, whichever call carries
#   it) dominates, so SQS gets QDECK_BENCH_SQS_MESSAGES (default 500) and its wall ratio says
#   little: what batching saves on SQS is calls (ten messages a SendMessageBatch call;
#   tests/sqs.rs counts them).
# Needs: curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."

N="${1:-5000}"
SQS_N="${QDECK_BENCH_SQS_MESSAGES:-500}"
cargo build --release -q --bin qdeck
NEW="${CARGO_TARGET_DIR:-target}/release/qdeck"
REF="${REF:-}"
AMQP_URL="${QDECK_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}"
MGMT="${QDECK_TEST_RABBITMQ_MGMT:-http://127.0.0.1:15672}"
MGMT="${MGMT%/}"
SQS="${QDECK_TEST_SQS_ENDPOINT:-}"
VHOST="qdeck-bench-import-$$"

TMP="$(mktemp -d)"
read -r RMQ_USER RMQ_PASS RMQ_HOSTPORT < <(python3 - "$AMQP_URL" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
print(urllib.parse.unquote(u.username or "guest"), urllib.parse.unquote(u.password or "guest"),
      f"{u.hostname or '127.0.0.1'}:{u.port or 5672}")
PY
)
AUTH=(-u "$RMQ_USER:$RMQ_PASS")
RABBIT=0
curl -sf "${AUTH[@]}" "$MGMT/api/overview" -o /dev/null && RABBIT=1
cleanup() {
  [ "$RABBIT" = 1 ] && curl -s "${AUTH[@]}" -X DELETE "$MGMT/api/vhosts/$VHOST" -o /dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
for v in $(compgen -e | grep '^QDECK_' || true); do unset "$v"; done
mkdir -p "$XDG_CONFIG_HOME/qdeck"
VH="$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$VHOST")"
export QDECK_BENCH_IMPORT_PASSWORD="$RMQ_PASS"
{
  echo '[[profiles]]'
  echo 'name = "local"'
  echo 'kind = "local"'
  if [ "$RABBIT" = 1 ]; then
    curl -sf "${AUTH[@]}" -X PUT "$MGMT/api/vhosts/$VHOST" -o /dev/null
    curl -sf "${AUTH[@]}" -X PUT -H 'content-type: application/json' \
      -d '{"configure":".*","write":".*","read":".*"}' "$MGMT/api/permissions/$VHOST/$RMQ_USER" -o /dev/null
    cat <<TOML
[[profiles]]
name = "rabbitmq"
kind = "rabbitmq"
amqp_url = "amqp://$RMQ_USER@$RMQ_HOSTPORT/$VH"
management_url = "$MGMT"
username = "$RMQ_USER"
password_env = "QDECK_BENCH_IMPORT_PASSWORD"
vhost = "$VHOST"
TOML
  fi
  if [ -n "$SQS" ]; then
    cat <<TOML
[[profiles]]
name = "sqs"
kind = "sqs"
regions = ["${AWS_REGION:-us-east-1}"]
endpoint_url = "$SQS"
TOML
  fi
} > "$XDG_CONFIG_HOME/qdeck/config.toml"

messages() { # count file
  python3 - "$1" > "$2" <<'PY'
import json, sys
pad = "x" * 900
for i in range(int(sys.argv[1])):
    print(json.dumps({"headers": [["x-tenant", f"tenant-{i % 7}"], ["x-seq", str(i)]],
                      "body": json.dumps({"seq": i, "pad": pad})}))
PY
}
messages "$N" "$TMP/msgs.jsonl"
messages "$SQS_N" "$TMP/msgs-sqs.jsonl"

# Depth of a queue as qdeck reports it (the brokers' own counts).
depth() { # profile queue
  "$NEW" -p "$1" stats "$2" -o json | python3 -c 'import json,sys;print(json.load(sys.stdin)["queue"]["depth"])'
}
make_queue() { # profile queue
  case "$1" in
    local) "$NEW" -p local create "$2" >/dev/null ;;
    rabbitmq) curl -sf "${AUTH[@]}" -X PUT -H 'content-type: application/json' -d '{"durable":true}' \
      "$MGMT/api/queues/$VH/$2" -o /dev/null ;;
    sqs) python3 - "$SQS" "$2" <<'PY'
import sys, urllib.request, json, os
req = urllib.request.Request(sys.argv[1], method="POST",
    data=json.dumps({"QueueName": sys.argv[2]}).encode(),
    headers={"content-type": "application/x-amz-json-1.0", "x-amz-target": "AmazonSQS.CreateQueue",
             "authorization": "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=0"})
urllib.request.urlopen(req).read()
PY
    ;;
  esac
}
# Seconds for one import, checked against the queue's depth afterwards.
count_for() { if [ "$1" = sqs ]; then echo "$SQS_N"; else echo "$N"; fi; }
timed_import() { # binary profile queue
  local s e file="$TMP/msgs.jsonl"
  [ "$2" = sqs ] && file="$TMP/msgs-sqs.jsonl"
  make_queue "$2" "$3"
  s=$(date +%s%N)
  "$1" -p "$2" import "$3" -f "$file" -y -o json > "$TMP/out" 2>&1 \
    || { echo "import into $2/$3 failed: $(tail -n 2 "$TMP/out")" >&2; exit 1; }
  e=$(date +%s%N)
  local want got
  want=$(count_for "$2")
  for _ in $(seq 1 30); do
    got=$(depth "$2" "$3" 2>/dev/null || echo "?")
    [ "$got" = "$want" ] && break
    sleep 1
  done
  [ "$got" = "$want" ] || { echo "$2/$3 holds $got messages after the import, expected $want" >&2; exit 1; }
  awk -v ns=$((e - s)) 'BEGIN { printf "%.3f", ns / 1e9 }'
}

PROFILES=(local)
[ "$RABBIT" = 1 ] && PROFILES+=(rabbitmq)
[ -n "$SQS" ] && PROFILES+=(sqs)
printf '%-9s %8s %10s %10s %10s %10s %7s\n' broker messages ref_s ref_msg/s new_s new_msg/s new/ref
for p in "${PROFILES[@]}"; do
  n=$(count_for "$p")
  ref_s="-" ref_r="-" ratio="-"
  if [ -n "$REF" ]; then
    ref_s=$(timed_import "$REF" "$p" "bench-ref-$$")
    ref_r=$(awk -v n="$n" -v s="$ref_s" 'BEGIN { printf "%.0f", n / s }')
  fi
  new_s=$(timed_import "$NEW" "$p" "bench-new-$$")
  new_r=$(awk -v n="$n" -v s="$new_s" 'BEGIN { printf "%.0f", n / s }')
  [ -n "$REF" ] && ratio=$(awk -v a="$ref_s" -v b="$new_s" 'BEGIN { printf "%.1fx", a / b }')
  printf '%-9s %8d %10s %10s %10s %10s %7s\n' "$p" "$n" "$ref_s" "$ref_r" "$new_s" "$new_r" "$ratio"
done
