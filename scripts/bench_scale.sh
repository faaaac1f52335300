#!/usr/bin/env bash
# Scale figures of issue 14, from one run:
#   1. `qdeck ls -o json` over 100,000 local queues (target < 1.5 s);
#   2. `qdeck ls -o json` over 20,000 RabbitMQ queues against `curl /api/queues` of the same
#      queues in the same run (target ≤ 1.0×).
# Each figure is the median of QDECK_BENCH_RUNS runs (wall time, process start to exit).
#
# Everything it creates goes away at exit: the local broker lives in a temporary directory,
# the RabbitMQ queues in a vhost of their own (`qdeck-bench-scale`), deleted with them.
#
# Env: QDECK_BIN (default target/release/qdeck, built when missing),
#      QDECK_BENCH_LOCAL_QUEUES (default 100000), QDECK_BENCH_RMQ_QUEUES (default 20000, 0 skips
#      RabbitMQ), QDECK_BENCH_RUNS (default 3),
#      QDECK_TEST_AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/%2f),
#      QDECK_TEST_RABBITMQ_MGMT (default http://127.0.0.1:15672).
# Needs: curl, python3 (with sqlite3).
set -euo pipefail
cd "$(dirname "$0")/.."

NLOCAL="${QDECK_BENCH_LOCAL_QUEUES:-100000}"
NRMQ="${QDECK_BENCH_RMQ_QUEUES:-20000}"
RUNS="${QDECK_BENCH_RUNS:-3}"
BIN="${QDECK_BIN:-target/release/qdeck}"
VHOST="qdeck-bench-scale"
AMQP_URL="${QDECK_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}"
MGMT="${QDECK_TEST_RABBITMQ_MGMT:-http://127.0.0.1:15672}"
MGMT="${MGMT%/}"

if [ ! -x "$BIN" ]; then
  echo "== building $BIN (release; takes a few minutes)"
  cargo build --release
fi

TMP="$(mktemp -d)"
RMQ_CREATED=0
cleanup() {
  if [ "$RMQ_CREATED" = 1 ]; then
    curl -s "${CURL_AUTH[@]}" -X DELETE "$MGMT/api/vhosts/$VHOST" -o /dev/null || true
    echo "== deleted vhost $VHOST and its queues"
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT

# qdeck runs with its own XDG directories: nothing of the user's is read or written.
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"

# Median wall time of a command run $RUNS times (stdout discarded), in seconds.
median() {
  python3 - "$RUNS" "$@" <<'PY'
import subprocess, sys, time
runs, cmd = int(sys.argv[1]), sys.argv[2:]
times = []
for _ in range(runs):
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
    times.append(time.perf_counter() - t)
times.sort()
print(f"{times[len(times) // 2]:.3f}")
PY
}

echo "== local broker: creating $NLOCAL queues"
"$BIN" create bench-seed >/dev/null
python3 - "$XDG_DATA_HOME/qdeck/local.db" "$NLOCAL" <<'PY'
import sqlite3, sys, time
db, n = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
now = int(time.time() * 1000)
c.executemany(
    "INSERT OR IGNORE INTO queues(name, created_ms) VALUES(?, ?)",
    ((f"bench-q-{i:06d}", now) for i in range(n - 1)),
)
c.commit()
PY
COUNT="$("$BIN" ls -o json | python3 -c 'import json,sys;print(len(json.load(sys.stdin)))')"
LOCAL_S="$(median "$BIN" ls -o json)"
echo "local: qdeck ls -o json over $COUNT queues: ${LOCAL_S} s (target < 1.5 s)"

if [ "$NRMQ" = 0 ]; then
  exit 0
fi

read -r RMQ_USER RMQ_PASS < <(python3 - "$AMQP_URL" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
print(urllib.parse.unquote(u.username or "guest"), urllib.parse.unquote(u.password or "guest"))
PY
)
CURL_AUTH=(-u "$RMQ_USER:$RMQ_PASS")
curl -sf "${CURL_AUTH[@]}" "$MGMT/api/overview" -o /dev/null \
  || { echo "management API at $MGMT not reachable" >&2; exit 2; }

echo "== RabbitMQ: creating $NRMQ queues in vhost $VHOST (one definitions import)"
curl -sf "${CURL_AUTH[@]}" -X PUT "$MGMT/api/vhosts/$VHOST" -o /dev/null
RMQ_CREATED=1
curl -sf "${CURL_AUTH[@]}" -X PUT -H 'content-type: application/json' \
  -d '{"configure":".*","write":".*","read":".*"}' "$MGMT/api/permissions/$VHOST/$RMQ_USER" -o /dev/null
python3 - "$NRMQ" "$VHOST" > "$TMP/defs.json" <<'PY'
import json, sys
n, vhost = int(sys.argv[1]), sys.argv[2]
print(json.dumps({"queues": [
    {"name": f"scale-q-{i:05d}", "vhost": vhost, "durable": True, "auto_delete": False,
     "arguments": {}} for i in range(n)]}))
PY
curl -sf "${CURL_AUTH[@]}" -X POST -H 'content-type: application/json' \
  --data-binary "@$TMP/defs.json" "$MGMT/api/definitions/$VHOST" -o /dev/null
# The management API lists a new queue once its stats are emitted (every 5 s by default).
for _ in $(seq 1 60); do
  N="$(curl -sf "${CURL_AUTH[@]}" "$MGMT/api/queues/$VHOST?page=1&page_size=1&pagination=true&columns=name" \
    | python3 -c 'import json,sys;print(json.load(sys.stdin)["filtered_count"])')"
  [ "$N" -ge "$NRMQ" ] && break
  sleep 1
done
echo "vhost $VHOST lists $N queues"

export QDECK_BENCH_RMQ_PASSWORD="$RMQ_PASS"
mkdir -p "$XDG_CONFIG_HOME/qdeck"
cat > "$XDG_CONFIG_HOME/qdeck/config.toml" <<EOF
[[profiles]]
name = "bench"
kind = "rabbitmq"
amqp_url = "amqp://$RMQ_USER@$(python3 -c 'import sys,urllib.parse;u=urllib.parse.urlparse(sys.argv[1]);print(f"{u.hostname}:{u.port or 5672}")' "$AMQP_URL")/%2f"
management_url = "$MGMT"
username = "$RMQ_USER"
password_env = "QDECK_BENCH_RMQ_PASSWORD"
vhost = "$VHOST"
EOF

COUNT="$("$BIN" -p bench ls -o json | python3 -c 'import json,sys;print(len(json.load(sys.stdin)))')"
CURL_S="$(median curl -sf "${CURL_AUTH[@]}" "$MGMT/api/queues/$VHOST" -o /dev/null)"
QDECK_S="$(median "$BIN" -p bench ls -o json)"
echo "rabbitmq: curl /api/queues/$VHOST: ${CURL_S} s"
echo "rabbitmq: qdeck ls -o json over $COUNT queues: ${QDECK_S} s"
python3 -c 'import sys;q,c=map(float,sys.argv[1:]);print(f"rabbitmq: ratio qdeck/curl = {q/c:.2f}x (target <= 1.0x)")' "$QDECK_S" "$CURL_S"
