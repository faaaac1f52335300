#!/usr/bin/env bash
# Incremental rebuild after changing one console file, per git revision, in one run (issue 37:
# the crate split should help incremental builds; measure before and after).
#
# Usage: scripts/bench_incremental.sh REV [REV...]   e.g. scripts/bench_incremental.sh 4a03675 HEAD
#   (4a03675: the last single-crate revision, before 90f8c4d split off the core.)
#
# Each revision gets a `git worktree` and its own target dir; a first `cargo build` (dev
# profile, the developer's loop) warms it and is timed. Then, ROUNDS times each (default 3):
#   comment: a comment line is appended to FILE (rustc finds no item changed);
#   edit:    a string literal of FILE changes (its code is generated and linked again).
# Each round's `cargo build` is timed with the load average before it; the median per kind
# and revision is printed at the end. Figures on a busy machine are noise: run it with
# nothing else building. WORK=DIR reuses the worktrees and targets a KEEP=1 run left (their
# first build is then not timed again).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$#" -eq 0 ]; then
  echo "usage: $0 REV [REV...]" >&2
  exit 2
fi
FILE=${FILE:-src/tui/views/help.rs}
# A literal every measured revision has in FILE.
LITERAL=${LITERAL:-age of oldest}
ROUNDS=${ROUNDS:-3}
unset RUSTC_WRAPPER CARGO_BUILD_RUSTC_WRAPPER
# Incremental compilation is the point here (the dev profile's default).
unset CARGO_INCREMENTAL

REUSE=0
if [ -n "${WORK:-}" ]; then
  REUSE=1
  KEEP=1
else
  WORK=$(mktemp -d /tmp/qdeck-incremental.XXXXXX)
fi
TREES=()
cleanup() {
  if [ "${KEEP:-0}" != 1 ]; then
    for t in "${TREES[@]}"; do
      git worktree remove --force "$t" >/dev/null 2>&1 || true
    done
    rm -rf "$WORK"
  else
    echo "kept $WORK" >&2
  fi
}
trap cleanup EXIT

load() { cut -d' ' -f1 /proc/loadavg; }
timed() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s.%N)
  printf '%.1f' "$(echo "$t1 - $t0" | bc)"
}
median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }

SUMMARY=()
i=0
for rev in "$@"; do
  tree="$WORK/tree-$i"
  export CARGO_TARGET_DIR="$WORK/target-$i"
  label="$rev ($(git rev-parse --short=9 "$rev"))"
  if [ "$REUSE" = 1 ] && [ -d "$tree" ]; then
    git -C "$tree" checkout -q -- "$FILE"
    (cd "$tree" && cargo build --locked >/dev/null 2>&1)
    first="(reused)"
  else
    git worktree add --detach "$tree" "$rev" >/dev/null 2>&1
    (cd "$tree" && cargo fetch --locked >/dev/null 2>&1)
    echo "== $label: first build (warms the target dir), load $(load)"
    first="$(cd "$tree" && timed cargo build --locked) s"
  fi
  TREES+=("$tree")
  echo "== $label: first build $first"
  comments=()
  edits=()
  for r in $(seq 1 "$ROUNDS"); do
    echo "// bench_incremental round $r" >>"$tree/$FILE"
    l=$(load)
    s=$(cd "$tree" && timed cargo build --locked)
    echo "   comment round $r: rebuild $s s (load $l)"
    comments+=("$s")
  done
  for r in $(seq 1 "$ROUNDS"); do
    sed -i "0,/$LITERAL/s//$LITERAL r$r/" "$tree/$FILE"
    l=$(load)
    s=$(cd "$tree" && timed cargo build --locked)
    echo "   edit round $r: rebuild $s s (load $l)"
    edits+=("$s")
  done
  git -C "$tree" checkout -q -- "$FILE"
  SUMMARY+=("$(printf '%-24s first %-10s comment median %5s s   edit median %5s s' \
    "$label" "$first" "$(median "${comments[@]}")" "$(median "${edits[@]}")")")
  i=$((i + 1))
done
echo
echo "incremental rebuild after changing $FILE ($ROUNDS rounds each, dev profile, cores: $(nproc))"
printf '%s\n' "${SUMMARY[@]}"
