#!/usr/bin/env bash
# Redis backend benchmarks: refresh of 1,000 BullMQ queues (one pipelined round trip, compared
# with a Node script calling BullMQ's getJobCounts() per queue in the same run) and the first
# browse page of a 100,000-job failed set. Prints figures and the ratio.
# Needs Redis at $QDECK_TEST_REDIS_URL (default redis://127.0.0.1:6379), Node with
# tests/fixtures/redis installed (npm ci). Uses database $BENCH_DB (default 15) and flushes it.
set -euo pipefail
cd "$(dirname "$0")/.."
export QDECK_TEST_REDIS_URL="${QDECK_TEST_REDIS_URL:-redis://127.0.0.1:6379}"
export QDECK_TEST_NODE_FIXTURES="${QDECK_TEST_NODE_FIXTURES:-$PWD/tests/fixtures/redis}"
export BENCH_DB="${BENCH_DB:-15}"
QUEUES="${BENCH_QUEUES:-1000}"
FAILED="${BENCH_FAILED:-100000}"
PROFILE_FLAG="${BENCH_CARGO_PROFILE:---release}"
URL="$QDECK_TEST_REDIS_URL/$BENCH_DB"
FIX="$QDECK_TEST_NODE_FIXTURES"
redis-cli -u "$URL" flushdb >/dev/null
export BENCH_PREFIX="bench$RANDOM"

echo "== creating $QUEUES BullMQ queues"
(cd "$FIX" && node bullmq_scene.js mkqueues "$URL" "$BENCH_PREFIX" q "$QUEUES") >/dev/null
echo "== node: getJobCounts() per queue"
NODE=$(cd "$FIX" && node bullmq_scene.js bench "$URL" "$BENCH_PREFIX" q "$QUEUES")
echo "$NODE"
echo "== qdeck: one refresh of every queue"
QD=$(cargo test $PROFILE_FLAG --test redis manual_bench_redis_refresh -- --ignored --nocapture 2>/dev/null | grep '^BENCH')
echo "$QD"
node_ms=$(echo "$NODE" | sed -E 's/.*"ms":([0-9.]+).*/\1/')
qd_ms=$(echo "$QD" | sed -E 's/.*ms_per_refresh=([0-9.]+).*/\1/')
echo "ratio qdeck/node = $(awk -v a="$qd_ms" -v b="$node_ms" 'BEGIN { printf "%.3f", a / b }') (target <= 0.2)"

echo "== making a $FAILED-job failed set (BullMQ worker that throws)"
(cd "$FIX" && node bullmq_scene.js failed "$URL" "$BENCH_PREFIX" big "$FAILED") >/dev/null
BENCH_QUEUE=big cargo test $PROFILE_FLAG --test redis manual_bench_redis_browse_failed -- --ignored --nocapture 2>/dev/null | grep '^BENCH'
redis-cli -u "$URL" flushdb >/dev/null
