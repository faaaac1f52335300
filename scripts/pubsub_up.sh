#!/usr/bin/env bash
# Make the Pub/Sub test peers ready, idempotently, and print the variables tests/pubsub.rs reads:
#   - Google's Python clients (google-cloud-pubsub, google-cloud-monitoring) in the shared venv
#     ~/.cache/qdeck-ci/venv (created if missing; QDECK_TEST_PYTHON names another Python);
#   - the fake (scripts/pubsub_fake.sh) on 127.0.0.1:$QDECK_PUBSUB_PORT (default 8085) and its
#     Monitoring stand-in on the next port, started in the background unless already listening.
#
#   eval "$(scripts/pubsub_up.sh)"
#
# stdout: only `export NAME=value` lines; progress and errors go to stderr. The fake's log is
# ~/.cache/qdeck-pubsub/fake.log.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
port="${QDECK_PUBSUB_PORT:-8085}"
mon_port=$((port + 1))
cache="${QDECK_PUBSUB_CACHE:-$HOME/.cache/qdeck-pubsub}"
venv="$HOME/.cache/qdeck-ci/venv"
py="${QDECK_TEST_PYTHON:-$venv/bin/python}"

if [ ! -x "$py" ] && [ -z "${QDECK_TEST_PYTHON:-}" ]; then
  echo "pubsub_up: creating $venv" >&2
  python3 -m venv "$venv" >&2
fi
if ! "$py" -c 'import google.cloud.pubsub_v1, google.cloud.monitoring_v3' 2>/dev/null; then
  echo "pubsub_up: installing google-cloud-pubsub and google-cloud-monitoring into $py" >&2
  "$py" -m pip install -q google-cloud-pubsub google-cloud-monitoring >&2
fi

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

if listening "$port"; then
  if ! listening "$mon_port"; then
    echo "pubsub_up: 127.0.0.1:$port is taken but nothing serves Monitoring on $mon_port; stop it or set QDECK_PUBSUB_PORT" >&2
    exit 1
  fi
else
  mkdir -p "$cache"
  out="$cache/fake.out"
  : >"$out"
  nohup "$here/scripts/pubsub_fake.sh" "$port" "$mon_port" >"$out" 2>"$cache/fake.log" </dev/null &
  # The first start builds the Go program (minutes on a cold module cache).
  for _ in $(seq 1 600); do
    [ "$(wc -l <"$out")" -ge 2 ] && break
    if ! kill -0 $! 2>/dev/null; then
      echo "pubsub_up: the fake exited: $(tail -n 3 "$cache/fake.log")" >&2
      exit 1
    fi
    sleep 1
  done
  if [ "$(wc -l <"$out")" -lt 2 ]; then
    echo "pubsub_up: the fake did not start in 10 minutes; see $cache/fake.log" >&2
    exit 1
  fi
fi

echo "export QDECK_TEST_PUBSUB_EMULATOR=127.0.0.1:$port"
echo "export QDECK_TEST_PUBSUB_MONITORING=http://127.0.0.1:$mon_port"
echo "export QDECK_TEST_PYTHON=$py"
