#!/usr/bin/env bash
# RQ benchmark: refreshing 500 RQ queues (each with waiting jobs and a failed registry).
# qdeck: `qdeck ls -o json` (a whole process: start, connect, list, one pipelined round trip of
# figures, JSON out), against rq-dashboard's JSON endpoint for the same figures
# (/0/data/queues.json, served warm by a running rq-dashboard) and, as a second reference,
# RQ's own API reading them in-process. Same run, same database; prints the figures and ratios.
# Needs Redis at $QDECK_TEST_REDIS_URL (default redis://127.0.0.1:6379) and a venv with rq
# ($BENCH_VENV, default the CI venv); rq-dashboard is installed there if missing. Uses database
# $BENCH_DB (default 15) and flushes it.
set -euo pipefail
cd "$(dirname "$0")/.."
URL_BASE="${QDECK_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
BENCH_DB="${BENCH_DB:-15}"
QUEUES="${BENCH_QUEUES:-500}"
RUNS="${BENCH_RUNS:-20}"
VENV="${BENCH_VENV:-$HOME/.cache/qdeck-ci/venv}"
PROFILE_FLAG="${BENCH_CARGO_PROFILE:---release}"
URL="$URL_BASE/$BENCH_DB"
PY="$VENV/bin/python"
SCENE=tests/fixtures/rq/rq_scene.py

if ! "$PY" -c "import rq_dashboard" 2>/dev/null; then
  echo "== installing rq-dashboard into $VENV"
  # rq-dashboard 0.9 imports six without depending on it.
  "$VENV/bin/pip" install -q --disable-pip-version-check rq-dashboard six
fi
case "$PROFILE_FLAG" in
  --release) BIN=target/release/qdeck ;;
  *) BIN=target/debug/qdeck ;;
esac
cargo build -q $PROFILE_FLAG --bin qdeck

redis-cli -u "$URL" flushdb >/dev/null
echo "== creating $QUEUES RQ queues (3 waiting jobs and 1 failed job each)"
"$PY" "$SCENE" mkqueues "$URL" "$QUEUES" >/dev/null

DIR=$(mktemp -d)
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$VENV/bin/rq-dashboard" --redis-url "$URL" --bind 127.0.0.1 --port "$PORT" >"$DIR/dashboard.log" 2>&1 &
DASH=$!
trap 'kill $DASH 2>/dev/null || true; rm -rf "$DIR"' EXIT
for _ in $(seq 1 60); do
  curl -fsS -m 30 "http://127.0.0.1:$PORT/0/data/queues.json" -o /dev/null 2>/dev/null && break
  sleep 0.5
done
cat >"$DIR/config.toml" <<EOF
[[profiles]]
name = "bench"
kind = "redis"
url = "$URL_BASE"
db = $BENCH_DB
EOF

# Both answers hold every queue; checked once before timing.
dash_n=$(curl -fsS -m 30 "http://127.0.0.1:$PORT/0/data/queues.json" | "$PY" -c 'import json,sys; print(len(json.load(sys.stdin)["queues"]))')
qd_n=$("$BIN" --config "$DIR/config.toml" ls -o json | "$PY" -c 'import json,sys; d=json.load(sys.stdin); d=d if isinstance(d,list) else d.get("queues",d); print(sum(1 for q in d if not q["name"].endswith("/failed")))')
echo "queues answered: rq-dashboard $dash_n, qdeck $qd_n (plus each failed registry)"

time_runs() { # command...
  local best=999999 total=0 t0 t1 d
  for _ in $(seq 1 "$RUNS"); do
    t0=$(date +%s%N); "$@" >/dev/null; t1=$(date +%s%N)
    d=$(( (t1 - t0) / 1000 ))
    total=$((total + d))
    [ "$d" -lt "$best" ] && best=$d
  done
  awk -v t="$total" -v n="$RUNS" -v b="$best" 'BEGIN { printf "%.1f %.1f\n", t / n / 1000, b / 1000 }'
}

echo "== $RUNS refreshes each (ms: mean, best)"
read -r dash_mean dash_best < <(time_runs curl -fsS -m 30 "http://127.0.0.1:$PORT/0/data/queues.json")
echo "rq-dashboard queues.json: mean $dash_mean  best $dash_best"
read -r qd_mean qd_best < <(time_runs "$BIN" --config "$DIR/config.toml" ls -o json)
echo "qdeck ls -o json ($BIN, whole process): mean $qd_mean  best $qd_best"
rq_ms=$("$PY" "$SCENE" listing "$URL" | sed -E 's/.*"ms": ([0-9.]+).*/\1/')
echo "RQ's own API in-process (Queue.all + registry counts): $rq_ms"
echo "ratio qdeck/rq-dashboard (mean) = $(awk -v a="$qd_mean" -v b="$dash_mean" 'BEGIN { printf "%.3f", a / b }') (target <= 0.2)"
echo "ratio qdeck/RQ API in-process = $(awk -v a="$qd_mean" -v b="$rq_ms" 'BEGIN { printf "%.3f", a / b }')"
redis-cli -u "$URL" flushdb >/dev/null
