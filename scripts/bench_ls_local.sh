#!/usr/bin/env bash
# Wall time of `qdeck ls -o json` over 10,000 local queues (target: under 200 ms), against a
# reference run in the same go: `qdeck ls -o json` over 10 queues.
# Usage: scripts/bench_ls_local.sh [QUEUES]   (builds the release binary first)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-10000}"
cargo build --release -q
BIN="${CARGO_TARGET_DIR:-target}/release/qdeck"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

setup() { # dir queues
  local d="$1" n="$2"
  XDG_DATA_HOME="$d/data" XDG_STATE_HOME="$d/state" XDG_CONFIG_HOME="$d/config" "$BIN" create seed >/dev/null
  python3 - "$d/data/qdeck/local.db" "$n" <<'PY'
import sqlite3, sys, time
db, n = sys.argv[1], int(sys.argv[2])
c = sqlite3.connect(db)
now = int(time.time() * 1000)
c.executemany("INSERT OR IGNORE INTO queues(name, created_ms, dlq, max_receives) VALUES(?, ?, ?, ?)",
              [(f"queue-{i:05d}", now, f"queue-{i:05d}.dlq" if i % 10 == 0 else None, 5 if i % 10 == 0 else None) for i in range(n - 1)])
# A few messages per queue so the grouped count has work to do.
c.executemany("INSERT INTO messages(queue, body, enqueued_ms, visible_ms) VALUES(?, ?, ?, ?)",
              [(f"queue-{i % (n - 1):05d}", b"x" * 1024, now, now) for i in range(3 * n)])
c.commit()
PY
}

time_ms() { # dir runs → median ms
  local d="$1" runs="$2" t=()
  for _ in $(seq 1 "$runs"); do
    local s e
    s=$(date +%s%N)
    XDG_DATA_HOME="$d/data" XDG_STATE_HOME="$d/state" XDG_CONFIG_HOME="$d/config" "$BIN" ls -o json >/dev/null
    e=$(date +%s%N)
    t+=($(( (e - s) / 1000000 )))
  done
  printf '%s\n' "${t[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

mkdir -p "$WORK/big" "$WORK/small"
setup "$WORK/big" "$N"
setup "$WORK/small" 10
big=$(time_ms "$WORK/big" 9)
small=$(time_ms "$WORK/small" 9)
echo "qdeck ls -o json, $N queues: median ${big} ms (target < 200 ms)"
echo "qdeck ls -o json, 10 queues: median ${small} ms (reference)"
awk -v b="$big" -v s="$small" 'BEGIN { if (s < 1) s = 1; printf "ratio %d queues / 10 queues: %.2f\n", '"$N"', b / s }'
