#!/usr/bin/env bash
# `qdeck reasons` over a local DLQ of 50,000 dead letters (issue 12 targets: first groups
# < 1 s, full scan < 5 s, release build), with `qdeck peek -n 1` on the same file as the
# reference (process start, config, opening the broker). Also times the scan behind a filtered
# redrive (`--where … --dry-run`) over the same DLQ.
# Usage: scripts/bench_reasons.sh [MESSAGES]   (builds the release binary first, unless
# QDECK_BIN names one; the local broker is in every build, so a `--no-default-features`
# release binary measures the same code)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-50000}"
if [ -z "${QDECK_BIN:-}" ]; then
  cargo build --release -q
fi
BIN="${QDECK_BIN:-${CARGO_TARGET_DIR:-target}/release/qdeck}"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export XDG_DATA_HOME="$WORK/data" XDG_STATE_HOME="$WORK/state" XDG_CONFIG_HOME="$WORK/config"

"$BIN" create orders --dlq orders.dlq --max-receives 5 >/dev/null
python3 - "$XDG_DATA_HOME/qdeck/local.db" "$N" <<'PY'
import json, sqlite3, sys, time, uuid
db, n = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
now = int(time.time() * 1000)
errors = [
    lambda i: f"order {i} failed: customer {uuid.uuid4()} not found",
    lambda i: f"timeout after {i % 5000} ms calling payments",
    lambda i: f"invalid sku 'SKU-{i}' in line {i % 7}",
    lambda i: f"hash mismatch 0x{i:08x}",
    lambda i: "max_receives exceeded",
]
rows = []
for i in range(n):
    h = [["x-exception-message", errors[i % len(errors)](i)], ["x-tenant", f"t{i % 3}"]]
    if i % 97 == 0:
        h.append(["x-qdeck-redriven", "1"])
    body = json.dumps({"order": {"id": i, "total": i % 500}, "pad": "x" * 400}).encode()
    rows.append(("orders.dlq", body, json.dumps(h), now - (n - i) * 10, now, 5,
                 "rejected", "orders", now - (n - i) * 10, 1))
c.executemany("""INSERT INTO messages(queue, body, headers, enqueued_ms, visible_ms, receive_count,
                 dl_reason, dl_origin, dl_ms, dl_count) VALUES(?,?,?,?,?,?,?,?,?,?)""", rows)
c.commit()
PY

time_ms() { # runs cmd... → median ms
  local runs="$1"; shift
  local t=()
  for _ in $(seq 1 "$runs"); do
    local s e
    s=$(date +%s%N)
    "$@" >/dev/null 2>&1
    e=$(date +%s%N)
    t+=($(( (e - s) / 1000000 )))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

ref=$(time_ms 5 "$BIN" peek orders.dlq -n 1 -o json)
first=$(time_ms 5 "$BIN" reasons orders.dlq --limit 5000 -o json)
full=$(time_ms 3 "$BIN" reasons orders.dlq --limit "$N" --scan-time 120s -o json)
sel=$(time_ms 3 "$BIN" redrive orders.dlq --to orders --where 'json.order.total < 100 and signature ~ "timeout"' \
  --limit "$N" --scan-time 120s --dry-run -o json)
"$BIN" reasons orders.dlq --limit "$N" --scan-time 120s -o plain 2>&1 | tail -8
echo "peek -n 1 (reference):                 median ${ref} ms"
echo "reasons, first 5,000 of $N:          median ${first} ms (target < 1000 ms)"
echo "reasons, all $N:                     median ${full} ms (target < 5000 ms)"
echo "redrive --where --dry-run, all $N:   median ${sel} ms"
awk -v f="$full" -v r="$ref" 'BEGIN { if (r < 1) r = 1; printf "ratio full scan / reference: %.1f\n", f / r }'
