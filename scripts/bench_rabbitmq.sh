#!/usr/bin/env bash
# Performance ratios of issue 4, from one run on one broker:
#   1. listing 1,000+ queues: qdeck (list + stats, as `qdeck ls -o json`) against
#      `curl /api/queues` (wall time, target ≤ 1.2×) and `rabbitmqadmin -f raw_json list queues`
#      (CPU time, target ≤ 0.5×);
#   2. redrive of 20,000 × 1 KB messages: qdeck's client-side redrive against the management
#      UI's "move messages" shovel (rate, target ≥ 0.8×, 0 lost).
#
# Env: QDECK_TEST_AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/%2f),
#      QDECK_TEST_RABBITMQ_MGMT (default http://127.0.0.1:15672),
#      QDECK_BENCH_QUEUES (default 1000), QDECK_BENCH_RUNS (default 5),
#      QDECK_BENCH_MESSAGES (default 20000), QDECK_BENCH_ROUNDS (redrive rounds, median
#      reported; default 3), QDECK_BIN (a qdeck binary with `ls`; optional:
#      without it the listing is timed through the library in the test binary),
#      QDECK_BENCH_RELEASE=1 measures a release build, QDECK_BENCH_KEEP=1 keeps the bench
#      queues, CARGO_TARGET_DIR as usual.
# Needs: curl, python3, /usr/bin/time, the management and shovel plugins.
set -euo pipefail
cd "$(dirname "$0")/.."

export QDECK_TEST_AMQP_URL="${QDECK_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}"
export QDECK_TEST_RABBITMQ_MGMT="${QDECK_TEST_RABBITMQ_MGMT:-http://127.0.0.1:15672}"
MGMT="${QDECK_TEST_RABBITMQ_MGMT%/}"
NQ="${QDECK_BENCH_QUEUES:-1000}"
RUNS="${QDECK_BENCH_RUNS:-5}"
export QDECK_BENCH_MESSAGES="${QDECK_BENCH_MESSAGES:-20000}"

# user and password from the AMQP URL (never printed)
read -r RMQ_USER RMQ_PASS RMQ_HOST < <(python3 - <<'PY'
import os, urllib.parse
u = urllib.parse.urlparse(os.environ["QDECK_TEST_AMQP_URL"])
print(urllib.parse.unquote(u.username or "guest"), urllib.parse.unquote(u.password or "guest"), u.hostname or "127.0.0.1")
PY
)
MGMT_PORT="$(python3 -c 'import sys,urllib.parse;print(urllib.parse.urlparse(sys.argv[1]).port or 15672)' "$MGMT")"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
CURL_AUTH=(-u "$RMQ_USER:$RMQ_PASS")

curl -sf "${CURL_AUTH[@]}" "$MGMT/api/overview" -o /dev/null || { echo "management API at $MGMT not reachable" >&2; exit 2; }

echo "== creating $NQ bench queues (qdeck-bench-q-*)"
seq -f "qdeck-bench-q-%05g" 1 "$NQ" | xargs -P 8 -I{} curl -sf "${CURL_AUTH[@]}" -X PUT \
  -H 'content-type: application/json' -d '{"durable":true}' "$MGMT/api/queues/%2F/{}" -o /dev/null
TOTAL_Q="$(curl -sf "${CURL_AUTH[@]}" "$MGMT/api/queues?page=1&page_size=1&pagination=true&columns=name" | python3 -c 'import json,sys;print(json.load(sys.stdin)["total_count"])')"
echo "broker now has $TOTAL_Q queues"

curl -sf "${CURL_AUTH[@]}" "$MGMT/cli/rabbitmqadmin" -o "$TMP/rabbitmqadmin"

PROFILE_FLAG=(); if [ "${QDECK_BENCH_RELEASE:-0}" = "1" ]; then PROFILE_FLAG=(--release); fi
echo "== building the test binary (${PROFILE_FLAG[*]:-dev profile, as CI does})"
TEST_BIN="$(cargo test "${PROFILE_FLAG[@]}" --test rabbitmq --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "rabbitmq":
        print(m["executable"])')"
[ -x "$TEST_BIN" ] || { echo "could not build tests/rabbitmq.rs" >&2; exit 2; }

export RMQ_BENCH_PASSWORD="$RMQ_PASS"
cat > "$TMP/config.toml" <<TOML
[[profiles]]
name = "bench"
kind = "rabbitmq"
amqp_url = "amqp://$RMQ_USER@$RMQ_HOST:5672/%2f"
management_url = "$MGMT"
password_env = "RMQ_BENCH_PASSWORD"
TOML

if [ -n "${QDECK_BIN:-}" ] && "$QDECK_BIN" ls --help >/dev/null 2>&1; then
  # qdeck layers QDECK_* variables over its config: keep this script's own out of its way.
  UNSET=(); for v in $(compgen -e | grep '^QDECK_' || true); do UNSET+=(-u "$v"); done
  QDECK_CMD=(env "${UNSET[@]}" "$QDECK_BIN" --config "$TMP/config.toml" --profile bench ls -o json)
  QDECK_LABEL="qdeck ls -o json"
else
  QDECK_CMD=("$TEST_BIN" manual_bench_list_queues_json --ignored --exact --nocapture --test-threads 1)
  QDECK_LABEL="qdeck library list+stats (test binary)"
fi

# median of wall and of cpu (user+sys) over RUNS runs; prints "wall cpu"
measure() {
  local out="$TMP/times"; : > "$out"
  for _ in $(seq 1 "$RUNS"); do
    /usr/bin/time -f "%e %U %S" -o "$TMP/t" "$@" > /dev/null 2>&1 || { echo "command failed: $1" >&2; exit 2; }
    awk '{printf "%s %.3f\n", $1, $2 + $3}' "$TMP/t" >> "$out"
  done
  python3 - "$out" <<'PY'
import sys, statistics
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
print(f"{statistics.median(r[0] for r in rows):.3f} {statistics.median(r[1] for r in rows):.3f}")
PY
}

echo "== listing $TOTAL_Q queues, median of $RUNS runs"
read -r CURL_WALL CURL_CPU < <(measure curl -sf "${CURL_AUTH[@]}" "$MGMT/api/queues" -o /dev/null)
read -r ADMIN_WALL ADMIN_CPU < <(measure python3 "$TMP/rabbitmqadmin" -H "$RMQ_HOST" -P "$MGMT_PORT" -u "$RMQ_USER" -p "$RMQ_PASS" -f raw_json list queues)
read -r QD_WALL QD_CPU < <(measure "${QDECK_CMD[@]}")
printf '%-42s wall %7.3f s  cpu %7.3f s\n' "curl /api/queues" "$CURL_WALL" "$CURL_CPU" \
  "rabbitmqadmin -f raw_json list queues" "$ADMIN_WALL" "$ADMIN_CPU" "$QDECK_LABEL" "$QD_WALL" "$QD_CPU"
python3 - "$QD_WALL" "$CURL_WALL" "$QD_CPU" "$ADMIN_CPU" <<'PY'
import sys
qw, cw, qc, ac = map(float, sys.argv[1:])
r1 = qw / cw if cw else float("inf"); r2 = qc / ac if ac else float("inf")
print(f"RATIO list wall qdeck/curl          = {r1:.2f}  (target <= 1.20) {'OK' if r1 <= 1.2 else 'MISS'}")
print(f"RATIO list cpu  qdeck/rabbitmqadmin = {r2:.2f}  (target <= 0.50) {'OK' if r2 <= 0.5 else 'MISS'}")
PY

echo "== redrive of $QDECK_BENCH_MESSAGES x 1 KB: shovel move vs qdeck client-side redrive (median of ${QDECK_BENCH_ROUNDS:-3} rounds)"
LINE="$("$TEST_BIN" manual_bench_redrive_vs_shovel --ignored --exact --nocapture --test-threads 1 2>&1 | grep -o 'QDECK_BENCH redrive.*' || true)"
[ -n "$LINE" ] || { echo "redrive bench failed" >&2; exit 2; }
echo "$LINE"
python3 - "$LINE" <<'PY'
import sys
kv = dict(p.split("=", 1) for p in sys.argv[1].split()[2:])
r = float(kv["ratio"]); lost = int(kv["lost"])
print(f"RATIO redrive rate qdeck/shovel     = {r:.2f}  (target >= 0.80) {'OK' if r >= 0.8 else 'MISS'}; lost {lost} {'OK' if lost == 0 else 'MISS'}")
PY

if [ "${QDECK_BENCH_KEEP:-0}" != "1" ]; then
  echo "== deleting bench queues"
  seq -f "qdeck-bench-q-%05g" 1 "$NQ" | xargs -P 8 -I{} curl -sf "${CURL_AUTH[@]}" -X DELETE "$MGMT/api/queues/%2F/{}" -o /dev/null || true
fi
