#!/usr/bin/env bash
# Proves the layering of design.md ("Layout"): model ← backend ← engine ← app.
#
#   1. From `cargo tree`: no crate depends, directly or through another, on a crate above it
#      (normal and build edges, every feature; dev edges too for the direct dependencies, so a
#      test cannot reach upward either), and each layer builds on the one below it.
#   2. No core crate depends on a terminal crate (ratatui, crossterm), whatever its features.
#   3. The console (src/tui) imports nothing from the CLI (src/cli). Both live in the `qdeck`
#      package, so the compiler cannot see this one; a grep does.
#   4. No non-test code decides by the text of an error or a note (scripts/check_text_decisions.py).
#
# A new workspace crate must be given its layer below, or this check fails.
# Usage: scripts/check_layers.sh   (from anywhere in the repository; exit 1 on a violation)
set -euo pipefail
cd "$(dirname "$0")/.."

# Bottom to top.
LAYERS=(qdeck-model qdeck-backend qdeck-engine qdeck)
CORE=(qdeck-model qdeck-backend qdeck-engine)

failures=0
fail() {
  echo "LAYERING VIOLATION: $*" >&2
  failures=$((failures + 1))
}

rank() { # crate -> its index in LAYERS, or nothing
  local i
  for i in "${!LAYERS[@]}"; do
    if [ "${LAYERS[$i]}" = "$1" ]; then
      echo "$i"
      return
    fi
  done
}

# Every workspace member has a layer.
members=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json,sys; print("\n".join(p["name"] for p in json.load(sys.stdin)["packages"]))')
for m in $members; do
  if [ -z "$(rank "$m")" ]; then
    fail "workspace crate $m has no layer in scripts/check_layers.sh (LAYERS)"
  fi
done

# tree CRATE EDGES [DEPTH] -> the package names in CRATE's dependency tree; stops the script
# when cargo cannot answer (a cycle between packages is such an error), so a broken tree
# never passes for a clean one.
tree() {
  local depth=() out
  if [ -n "${3:-}" ]; then depth=(--depth "$3"); fi
  if ! out=$(cargo tree -p "$1" -e "$2" --all-features --prefix none --format '{p}' "${depth[@]}"); then
    echo "LAYERING VIOLATION: cargo tree -p $1 failed (see above)" >&2
    exit 1
  fi
  echo "$out" | awk '{print $1}' | sort -u
}

# deps CRATE EDGES [DEPTH] -> the qdeck crates CRATE depends on (itself left out)
deps() {
  local all
  all=$(tree "$@") || exit 1
  echo "$all" | grep -E '^qdeck(-[a-z]+)?$' | grep -vx "$1" || true
}

for c in "${LAYERS[@]}"; do
  r=$(rank "$c")
  found=$(deps "$c" normal,build) || exit 1
  direct=$(deps "$c" normal,build,dev 1) || exit 1
  for d in $found $direct; do
    if [ "$(rank "$d")" -ge "$r" ]; then
      fail "$c depends on $d, which is not below it (model ← backend ← engine ← app)"
    fi
  done
  # Each layer above the model builds on the one directly below it.
  if [ "$r" -gt 0 ]; then
    below=${LAYERS[$((r - 1))]}
    if ! echo "$found" | grep -qx "$below"; then
      fail "$c does not depend on $below: the chain model ← backend ← engine ← app is broken"
    fi
  fi
done

for c in "${CORE[@]}"; do
  all=$(tree "$c" normal,build) || exit 1
  if term=$(echo "$all" | grep -E '^(ratatui|crossterm)$') && [ -n "$term" ]; then
    fail "$c depends on a terminal crate: $(echo "$term" | tr '\n' ' ')"
  fi
done

# The console never imports the CLI: `crate::cli`, `qdeck::cli`, `super::…::cli`, or `cli` inside
# a `use crate::{…}` group. Comment lines are left out.
if hits=$(grep -rnE '\b(crate|qdeck)::cli\b|\bsuper::(super::)*cli\b|\b(crate|qdeck)::\{[^}]*\bcli\b' src/tui |
  grep -vE '^[^:]+:[0-9]+:\s*//'); then
  fail "the console (src/tui) imports the CLI (src/cli):"
  echo "$hits" >&2
fi

# A lower crate does not even name a layer above it, comments included: a doc that says how
# the backend maps into the model is the backend's to say, and a path there is an import
# waiting to happen.
for pair in "qdeck-model:qdeck_backend|qdeck_engine|qdeck::" "qdeck-backend:qdeck_engine|qdeck::" "qdeck-engine:qdeck::"; do
  crate=${pair%%:*}
  above=${pair#*:}
  if hits=$(grep -rnE "\b($above)" "crates/$crate/src"); then
    fail "crates/$crate names a layer above it:"
    echo "$hits" >&2
  fi
done

# No code outside tests decides by the text of an error or a note (issue 37, item 6); the
# script names each finding and the few allowed places where the text is the protocol.
if ! scripts/check_text_decisions.py; then
  fail "code decides by the text of an error (see above)"
fi

if [ "$failures" -gt 0 ]; then
  echo "check_layers: $failures violation(s); see design.md, Layout" >&2
  exit 1
fi
echo "check_layers: ok (model ← backend ← engine ← app; no terminal crate in the core; src/tui does not import src/cli)"
