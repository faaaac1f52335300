#!/usr/bin/env bash
# Footprint of a clean release build, per git revision, against the first one given (issue 37
# bounds: build <= 6 min on 2 cores, stripped binary <= 20 MB, duplicate lines <= 34).
#
# Usage: scripts/bench_footprint.sh REV [REV...]      e.g. scripts/bench_footprint.sh a105987 foot
#
# Each revision is checked out in a fresh `git worktree` under a temporary directory with its own
# CARGO_TARGET_DIR, so nothing is warm. Dependencies are fetched first (network not timed), then a
# clean `cargo build --release --locked` is timed. Prints, per revision: wall time, stripped binary
# size, duplicate crate lines (`cargo tree -d --depth 0 -e normal | grep -c .`) and the load
# average before the build (timings on a busy machine are noise: run it in a quiet window).
# TIMINGS=1 adds `--timings` and keeps the HTML report; KEEP=1 keeps the worktrees and targets.
# Cargo's CARGO_PROFILE_RELEASE_* variables pass through to every revision, so a release profile
# candidate can be tried without a commit: CARGO_PROFILE_RELEASE_OPT_LEVEL=s $0 foot
# FEATURES=rabbitmq builds with only those backends (--no-default-features --features ...).
# Per-package settings ([profile.release.package.NAME]) have no such variable: commit the
# candidate on a branch and pass the branch; KEEP=1 keeps each stripped binary for
# QDECK_BIN=... scripts/bench_console.sh, which tells whether the console got slower.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -eq 0 ]; then
  echo "usage: $0 REV [REV...]" >&2
  exit 2
fi

# A compiler cache would make the "clean" build warm.
unset RUSTC_WRAPPER CARGO_BUILD_RUSTC_WRAPPER
export CARGO_INCREMENTAL=0

WORK=$(mktemp -d /tmp/qdeck-footprint.XXXXXX)
TREES=()
cleanup() {
  for t in "${TREES[@]}"; do
    git worktree remove --force "$t" >/dev/null 2>&1 || true
  done
  if [ "${KEEP:-0}" != 1 ]; then rm -rf "$WORK"; else echo "kept $WORK" >&2; fi
}
trap cleanup EXIT

STRIP=$(command -v strip || true)
declare -a NAMES SECS BYTES DUPS LOADS

i=0
for rev in "$@"; do
  commit=$(git rev-parse --verify --quiet "$rev^{commit}") || { echo "unknown revision: $rev" >&2; exit 2; }
  tree="$WORK/tree-$i"
  target="$WORK/target-$i"
  git worktree add --detach --quiet "$tree" "$commit"
  TREES+=("$tree")
  echo "== $rev (${commit:0:9}): fetching" >&2
  (cd "$tree" && CARGO_TARGET_DIR="$target" cargo fetch --locked -q)

  load=$(cut -d' ' -f1 /proc/loadavg)
  extra=()
  [ "${TIMINGS:-0}" = 1 ] && extra=(--timings)
  [ -n "${FEATURES+x}" ] && extra+=(--no-default-features --features "$FEATURES")
  echo "== $rev: clean release build (load $load, $(nproc) cores)" >&2
  start=$(date +%s%N)
  (cd "$tree" && CARGO_TARGET_DIR="$target" cargo build --release --locked --offline -q "${extra[@]}")
  end=$(date +%s%N)

  bin="$target/release/qdeck"
  cp "$bin" "$WORK/qdeck-$i"
  [ -n "$STRIP" ] && "$STRIP" "$WORK/qdeck-$i"
  [ "${TIMINGS:-0}" = 1 ] && cp "$target"/cargo-timings/cargo-timing.html "$WORK/timings-$i.html"

  dups=$(cd "$tree" && cargo tree -d --depth 0 -e normal --locked --offline 2>/dev/null | grep -c . || true)

  NAMES[i]="$rev (${commit:0:9})"
  SECS[i]=$(( (end - start) / 1000000 ))
  BYTES[i]=$(stat -c %s "$WORK/qdeck-$i")
  DUPS[i]=$dups
  LOADS[i]=$load
  rm -rf "$target" # a second revision should not compete for disk with the first one's target
  i=$((i + 1))
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "-"; else printf "%.2f", a / b }'; }

printf '\n%-24s %10s %8s %12s %8s %6s %8s %8s %8s\n' \
  revision build_s load binary_bytes MB dups t/ref size/ref dups/ref
for j in $(seq 0 $((i - 1))); do
  printf '%-24s %10.1f %8s %12d %8.2f %6d %8s %8s %8s\n' \
    "${NAMES[j]}" "$(awk -v ms="${SECS[j]}" 'BEGIN { print ms / 1000 }')" "${LOADS[j]}" \
    "${BYTES[j]}" "$(awk -v b="${BYTES[j]}" 'BEGIN { print b / 1000000 }')" "${DUPS[j]}" \
    "$(ratio "${SECS[j]}" "${SECS[0]}")" "$(ratio "${BYTES[j]}" "${BYTES[0]}")" \
    "$(ratio "${DUPS[j]}" "${DUPS[0]}")"
done
echo "targets (issue 37): build <= 360 s, binary <= 20 MB, dups <= 34 lines; cores: $(nproc)"
