#!/usr/bin/env bash
# Filtered redrive on RabbitMQ (issue 12), from one run of the release binary:
#   two DLQs each get the same 50,000 messages (1 in 5, 10,000, carry header x-tenant=acme);
#   `qdeck redrive DLQ1 --where 'header.x-tenant = "acme"'` (one pass: every message read,
#   the 10,000 matching moved) is timed against `qdeck redrive DLQ2` of all 50,000
#   (client-side, no shovel, the same copy/confirm/ack loop) in the same go.
#   Rate = messages moved / wall time, process start to exit. Also printed: the pass rate
#   (messages examined / wall time) against the full rate.
#   Target: filtered rate >= 0.5x the full rate; nothing lost (every message is in its DLQ or
#   its target); exactly the matching ones moved, the non-matching left in the DLQ.
#   QDECK_BENCH_ROUNDS runs the whole (fill, both runs, check) several times and gives the
#   median ratio: the same binary varies from run to run with the broker's own work, which is
#   printed per run when the broker runs on this machine (its CPU seconds from /proc).
# Known limit: the filtered run still has to receive every message (AMQP has no server-side
# filter on a queue), so its moved-rate ratio is about the match fraction (1/5) times the pass
# rate over the full rate. On RabbitMQ 3.10 the source queue's own Erlang process (one core)
# bounds the pass. Its work (scripts/rabbitmq_queue_work.sh, Erlang reductions) was 47-50 M
# for the filtered pass against 22.5 M for the full redrive's source; a pass that matches
# nothing (50,000 delivered, all given back at close) took 30.4 M. The 10,000 acks are single
# (a matching message sits behind held ones, so `multiple` cannot cover it), and each costs
# the queue a walk of its channel's unacknowledged list and upkeep of its pending-ack tree
# (eprof of the queue process). Lanes of 100 and 50 did not lower the total (46.6 M, 59.6 M).
# Measured on a shared 2-core box, lanes of 300 consumed one after another, acks proven off
# the pass's path: RATIO 0.27-0.55 over eight single runs on one day, median 0.43 over five
# rounds (0.38-0.45) on another (filtered 3.6-4.6 s, full 8.2-9.9 s). On quorum queues
# (QDECK_BENCH_QUEUE_TYPE=quorum, same binary, same go as classic rounds of 0.48, 0.26, 0.41)
# the pass is faster (2.0-2.1 s) but the full redrive far more so (2.2-2.8 s, 18-22k msg/s):
# ratios 0.25, 0.28, 0.21, the pass examining at 1.1-1.4x the full rate. One pass examines at
# most 250,000 messages / 1 GiB (crates/qdeck-backend/src/rabbitmq/one_pass.rs); --limit examines the
# first part of a deeper DLQ.
# Everything lives in a vhost of its own (qdeck-bench-fr-PID), deleted at exit.
#
# Env: QDECK_BIN (default target/release/qdeck, built when missing),
#      QDECK_BENCH_MESSAGES (default 50000), QDECK_BENCH_EVERY (1 in N matches, default 5),
#      QDECK_BENCH_SETTLE (seconds of pause before each timed run, default 10; then, with
#      the broker on this machine, until it has been idle for a second),
#      QDECK_BENCH_ROUNDS (default 1),
#      QDECK_BENCH_QUEUE_TYPE (classic or quorum, default classic: the type of all four queues),
#      QDECK_TEST_AMQP_URL (default amqp://guest:guest@127.0.0.1:5672/%2f),
#      QDECK_TEST_RABBITMQ_MGMT (default http://127.0.0.1:15672),
#      QDECK_BENCH_WRAP (a command prefix for the filtered run, e.g.
#      "perf record -g -o /tmp/fr.perf" with an unstripped binary).
# Needs: curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."

N="${QDECK_BENCH_MESSAGES:-50000}"
EVERY="${QDECK_BENCH_EVERY:-5}"
BIN="${QDECK_BIN:-target/release/qdeck}"
WRAP="${QDECK_BENCH_WRAP:-}"
ROUNDS="${QDECK_BENCH_ROUNDS:-1}"
SETTLE="${QDECK_BENCH_SETTLE:-10}"
QTYPE="${QDECK_BENCH_QUEUE_TYPE:-classic}"
case "$QTYPE" in classic | quorum) ;; *) echo "QDECK_BENCH_QUEUE_TYPE must be classic or quorum" >&2; exit 2 ;; esac
AMQP_URL="${QDECK_TEST_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}"
MGMT="${QDECK_TEST_RABBITMQ_MGMT:-http://127.0.0.1:15672}"
MGMT="${MGMT%/}"
VHOST="qdeck-bench-fr-$$"

if [ ! -x "$BIN" ]; then
  echo "== building $BIN (release; takes a few minutes)"
  cargo build --release --bin qdeck
fi

read -r RMQ_USER RMQ_PASS RMQ_HOSTPORT < <(python3 - "$AMQP_URL" <<'PY'
import sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
print(urllib.parse.unquote(u.username or "guest"), urllib.parse.unquote(u.password or "guest"),
      f"{u.hostname or '127.0.0.1'}:{u.port or 5672}")
PY
)
CURL_AUTH=(-u "$RMQ_USER:$RMQ_PASS")
curl -sf "${CURL_AUTH[@]}" "$MGMT/api/overview" -o /dev/null \
  || { echo "management API at $MGMT not reachable" >&2; exit 2; }

TMP="$(mktemp -d)"
cleanup() {
  curl -s "${CURL_AUTH[@]}" -X DELETE "$MGMT/api/vhosts/$VHOST" -o /dev/null || true
  rm -rf "$TMP"
}
trap cleanup EXIT
export XDG_CONFIG_HOME="$TMP/config" XDG_DATA_HOME="$TMP/data" XDG_STATE_HOME="$TMP/state"
# qdeck layers QDECK_* variables over its config: keep the test ones out of its way.
for v in $(compgen -e | grep '^QDECK_' || true); do unset "$v"; done

curl -sf "${CURL_AUTH[@]}" -X PUT "$MGMT/api/vhosts/$VHOST" -o /dev/null
curl -sf "${CURL_AUTH[@]}" -X PUT -H 'content-type: application/json' \
  -d '{"configure":".*","write":".*","read":".*"}' "$MGMT/api/permissions/$VHOST/$RMQ_USER" -o /dev/null
VH="$(python3 -c 'import sys,urllib.parse;print(urllib.parse.quote(sys.argv[1],safe=""))' "$VHOST")"
for q in jobs-dlq jobs-dlq-copy jobs jobs-copy; do
  curl -sf "${CURL_AUTH[@]}" -X PUT -H 'content-type: application/json' \
    -d "{\"durable\":true,\"arguments\":{\"x-queue-type\":\"$QTYPE\"}}" \
    "$MGMT/api/queues/$VH/$q" -o /dev/null
done

export QDECK_BENCH_FR_PASSWORD="$RMQ_PASS"
mkdir -p "$XDG_CONFIG_HOME/qdeck"
cat > "$XDG_CONFIG_HOME/qdeck/config.toml" <<EOF
[[profiles]]
name = "bench"
kind = "rabbitmq"
amqp_url = "amqp://$RMQ_USER@$RMQ_HOSTPORT/$VH"
management_url = "$MGMT"
username = "$RMQ_USER"
password_env = "QDECK_BENCH_FR_PASSWORD"
vhost = "$VHOST"
# The full redrive runs client-side like the filtered one (a shovel would be another path).
use_shovel = false

[triage]
scan_limit = $((N * 2))
scan_secs = 600
EOF

python3 - "$N" "$EVERY" > "$TMP/dead.jsonl" <<'PY'
import json, sys
n, every = int(sys.argv[1]), int(sys.argv[2])
pad = "x" * 900
for i in range(n):
    tenant = "acme" if i % every == 0 else f"tenant-{i % 7}"
    print(json.dumps({"headers": [["x-tenant", tenant], ["x-seq", str(i)]],
                      "body": json.dumps({"seq": i, "tenant": tenant, "pad": pad})}))
PY

depth() {
  curl -sf "${CURL_AUTH[@]}" "$MGMT/api/queues/$VH/$1?columns=messages" \
    | python3 -c 'import json,sys;d=json.load(sys.stdin);print(d.get("messages", 0) if isinstance(d, dict) else -1)'
}
# Wait until the management API shows $2 messages in queue $1 (its figures lag by seconds;
# -1 above: once, right after the fill of a quorum queue, it answered with a list).
wait_depth() {
  for _ in $(seq 1 60); do
    [ "$(depth "$1")" = "$2" ] && return 0
    sleep 1
  done
  echo "queue $1 holds $(depth "$1") messages, expected $2" >&2
  return 1
}

MATCH=$(( (N + EVERY - 1) / EVERY ))
split -n l/10 -d "$TMP/dead.jsonl" "$TMP/part-"

# Wall seconds and exit code of a command (its output to $TMP/out).
timed() {
  python3 - "$TMP/out" "$@" <<'PY'
import subprocess, sys, time
t = time.perf_counter()
with open(sys.argv[1], "wb") as out:
    rc = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT).returncode
print(f"{time.perf_counter() - t:.3f} {rc}")
PY
}

# CPU seconds the broker has used so far, when it runs on this machine and we may read it
# (empty otherwise): a run that took longer because the broker worked longer shows here.
BEAM="$(pgrep -f beam.smp 2>/dev/null | head -n 1 || true)"
broker_cpu() {
  if [ -n "$BEAM" ] && [ -r "/proc/$BEAM/stat" ]; then
    awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$BEAM/stat"
  fi
}
# Pause SETTLE seconds, then (broker on this machine) until it has been idle for a second,
# at most a minute more: deleting the last round's messages keeps it busy for a while.
settle() {
  sleep "$SETTLE"
  [ -n "$(broker_cpu)" ] || return 0
  for _ in $(seq 1 60); do
    local a b
    a="$(broker_cpu)"; sleep 1; b="$(broker_cpu)"
    python3 -c "import sys; sys.exit(0 if $b - $a < 0.1 else 1)" && return 0
  done
  echo "the broker stayed busy: timing anyway"
}
broker_used() {
  if [ -n "$1" ]; then
    echo "broker CPU during the run: $(python3 -c "print(f'{$(broker_cpu) - $1:.2f}')") s"
  fi
}

# Which messages sit where: every moved one matches, every one left does not, none twice,
# none missing. Read through the management API in chunks and removed (the round is over;
# the next one fills again).
check() {
  python3 - "$MGMT" "$VH" "$RMQ_USER" "$RMQ_PASS" "$N" "$EVERY" <<'PY'
import base64, json, sys, urllib.request
mgmt, vh, user, pw, n, every = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
auth = "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()
def drain(q):
    seqs = []
    while True:
        req = urllib.request.Request(
            f"{mgmt}/api/queues/{vh}/{q}/get", method="POST",
            data=json.dumps({"count": 5000, "ackmode": "ack_requeue_false", "encoding": "auto",
                             "truncate": 100}).encode(),
            headers={"content-type": "application/json", "authorization": auth})
        msgs = json.load(urllib.request.urlopen(req, timeout=600))
        if not msgs:
            return seqs
        seqs += [int(m["properties"]["headers"]["x-seq"]) for m in msgs]
moved, left = drain("jobs"), drain("jobs-dlq")
bad_moved = [s for s in moved if s % every != 0]
bad_left = [s for s in left if s % every == 0]
dup = len(moved) + len(left) - len(set(moved) | set(left))
missing = n - len(set(moved) | set(left))
print(f"check: moved {len(moved)} (non-matching among them: {len(bad_moved)}), left in the DLQ "
      f"{len(left)} (matching among them: {len(bad_left)}), duplicated {dup}, lost {missing}")
ok = not bad_moved and not bad_left and dup == 0 and missing == 0
print("check: " + ("ok" if ok else "FAILED"))
sys.exit(0 if ok else 1)
PY
}

RATIOS=()
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round of $ROUNDS ($QTYPE queues)"
  for q in jobs-dlq jobs-dlq-copy jobs jobs-copy; do
    curl -sf "${CURL_AUTH[@]}" -X DELETE "$MGMT/api/queues/$VH/$q/contents" -o /dev/null
  done
  # `qdeck import` sends a batch at a time: ten processes per queue fill faster.
  echo "== filling jobs-dlq and jobs-dlq-copy with $N x ~1 KB messages each (qdeck import x 10)"
  for q in jobs-dlq jobs-dlq-copy; do
    for f in "$TMP"/part-*; do
      "$BIN" -p bench import "$q" -f "$f" -y > /dev/null &
    done
  done
  wait
  wait_depth jobs-dlq "$N"
  wait_depth jobs-dlq-copy "$N"

  # The broker is still writing the fill to its message store for a while: both timed runs
  # start after a pause, so neither pays for the other's (or the fill's) leftovers.
  settle
  echo "== filtered redrive: jobs-dlq -> jobs where header.x-tenant = \"acme\" ($MATCH of $N)"
  B0="$(broker_cpu)"
  # shellcheck disable=SC2086 # $WRAP is a command prefix, split on purpose
  read -r FILT_S FILT_RC < <(timed $WRAP "$BIN" -p bench redrive jobs-dlq --to jobs --where 'header.x-tenant = "acme"' -y)
  tail -n 3 "$TMP/out"
  broker_used "$B0"
  [ "$FILT_RC" = 0 ] || { echo "filtered redrive exited $FILT_RC" >&2; exit 1; }
  settle
  echo "== full redrive: jobs-dlq-copy -> jobs-copy ($N)"
  B0="$(broker_cpu)"
  read -r FULL_S FULL_RC < <(timed "$BIN" -p bench redrive jobs-dlq-copy --to jobs-copy -y)
  tail -n 3 "$TMP/out"
  broker_used "$B0"
  [ "$FULL_RC" = 0 ] || { echo "full redrive exited $FULL_RC" >&2; exit 1; }

  wait_depth jobs "$MATCH"
  wait_depth jobs-dlq "$((N - MATCH))"
  wait_depth jobs-copy "$N"
  wait_depth jobs-dlq-copy 0
  check

  RATIOS+=("$(python3 - "$FILT_S" "$FULL_S" "$MATCH" "$N" <<'PY'
import sys
fs, ts, m, n = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
fr, tr = m / fs, n / ts
print(f"filtered redrive: {m} of {n} in {fs:.2f} s = {fr:.0f} msg/s (one pass over all {n})", file=sys.stderr)
print(f"full redrive:     {n} in {ts:.2f} s = {tr:.0f} msg/s", file=sys.stderr)
print(f"pass rate: {n} examined in {fs:.2f} s = {n / fs:.0f} msg/s = {(n / fs) / tr:.2f}x the full rate", file=sys.stderr)
print(f"{fr / tr:.2f}")
PY
)")
  echo "ratio of this round: ${RATIOS[-1]}"
done

python3 - "${RATIOS[@]}" <<'PY'
import statistics, sys
r = [float(x) for x in sys.argv[1:]]
m = statistics.median(r)
print(f"ratios: {', '.join(f'{x:.2f}' for x in r)}")
print(f"RATIO filtered/full rate = {m:.2f}{' (median of %d rounds)' % len(r) if len(r) > 1 else ''} "
      f"(target >= 0.50: {'ok' if m >= 0.5 else 'MISSED'})")
PY
