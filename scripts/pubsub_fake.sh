#!/usr/bin/env bash
# Google Cloud Pub/Sub fake for qdeck's tests and for trying qdeck's Pub/Sub paths by hand. Runs in
# the foreground until killed (SIGINT/SIGTERM).
#
#   scripts/pubsub_fake.sh PORT [MONITORING_PORT]
#
# stdout line 1: the emulator host, e.g. 127.0.0.1:8085 (export PUBSUB_EMULATOR_HOST=...; plain
#                gRPC, no TLS, no credentials): Google's own fake server, pstest
#                (cloud.google.com/go/pubsub/v2/pstest v2.9.0), imported by the Go program in
#                tests/fixtures/pubsub/fake.
# stdout line 2: the Monitoring stand-in's endpoint, e.g. http://127.0.0.1:8086 (MONITORING_PORT,
#                default PORT+1): the project's own, serving projects.timeSeries.list with the
#                series a test posts to /qdeck/series (see main.go).
#
# The Go program is built once into $QDECK_PUBSUB_CACHE (default ~/.cache/qdeck-pubsub), keyed by
# the hash of its sources, with Go from PATH or /usr/local/go/bin; modules come from the Go module
# proxy the first time.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: scripts/pubsub_fake.sh PORT [MONITORING_PORT]" >&2
  exit 2
fi
port="$1"
mon_port="${2:-$((port + 1))}"
here="$(cd "$(dirname "$0")/.." && pwd)"
src="$here/tests/fixtures/pubsub/fake"
cache="${QDECK_PUBSUB_CACHE:-$HOME/.cache/qdeck-pubsub}"
go_bin="$(command -v go || true)"
[ -n "$go_bin" ] || go_bin=/usr/local/go/bin/go
key="$(cat "$src/main.go" "$src/go.mod" "$src/go.sum" | sha256sum | cut -c1-16)"
bin="$cache/pubsubfake-$key"
if [ ! -x "$bin" ]; then
  if [ ! -x "$go_bin" ]; then
    echo "pubsub_fake: no Go toolchain (looked in PATH and /usr/local/go/bin)" >&2
    exit 2
  fi
  mkdir -p "$cache"
  echo "pubsub_fake: building the fake into $bin (once)..." >&2
  (cd "$src" && GOFLAGS=-mod=mod "$go_bin" build -o "$bin.tmp" .) >&2
  mv "$bin.tmp" "$bin"
fi
exec "$bin" -port "$port" -monitoring-port "$mon_port"
