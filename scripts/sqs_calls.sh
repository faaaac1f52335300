#!/usr/bin/env bash
# Count qdeck's SQS/CloudWatch API calls on moto: a full refresh of N queues (default 200) and
# the calls per message of a client-side redrive. Prints figures; asserts only the budget.
#
#   scripts/sqs_calls.sh                 # starts its own moto_server on a free port
#   QDECK_TEST_SQS_ENDPOINT=http://127.0.0.1:5055 scripts/sqs_calls.sh   # use a running moto
#
# Needs moto: python3 -m venv .venv-moto && .venv-moto/bin/pip install 'moto[server]'
# (MOTO_SERVER=/path/to/moto_server if it is not on PATH or in /work/.venv-moto/bin).
set -euo pipefail
cd "$(dirname "$0")/.."
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-testing}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-testing}"
export AWS_REGION="${AWS_REGION:-us-east-1}"
export QDECK_SQS_CALLS_N="${1:-${QDECK_SQS_CALLS_N:-200}}"
export QDECK_SQS_CALLS_MESSAGES="${QDECK_SQS_CALLS_MESSAGES:-200}"

moto_pid=""
cleanup() { [ -n "$moto_pid" ] && kill "$moto_pid" 2>/dev/null || true; }
trap cleanup EXIT

if [ -z "${QDECK_TEST_SQS_ENDPOINT:-}" ]; then
  bin="${MOTO_SERVER:-}"
  [ -z "$bin" ] && bin="$(command -v moto_server || true)"
  [ -z "$bin" ] && [ -x /work/.venv-moto/bin/moto_server ] && bin=/work/.venv-moto/bin/moto_server
  [ -z "$bin" ] && { echo "moto_server not found: pip install 'moto[server]' or set MOTO_SERVER" >&2; exit 2; }
  port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  "$bin" -H 127.0.0.1 -p "$port" >/tmp/qdeck-sqs-calls-moto.log 2>&1 &
  moto_pid=$!
  for _ in $(seq 1 50); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.2
  done
  export QDECK_TEST_SQS_ENDPOINT="http://127.0.0.1:$port"
fi

echo "moto at $QDECK_TEST_SQS_ENDPOINT, N=$QDECK_SQS_CALLS_N queues, $QDECK_SQS_CALLS_MESSAGES messages"
cargo test --test sqs -- --ignored --nocapture --exact manual_call_budget_on_moto 2>&1 \
  | grep -vE '^\s*(Compiling|Finished|Running|running)' | grep -vE '^$'
