#!/usr/bin/env bash
# Draw the README's pictures of the console again (docs/pictures/*.svg) from the real views and
# the fixed scene in tests/readme_pictures.rs. `cargo test` fails while they differ.
set -euo pipefail
cd "$(dirname "$0")/.."
QDECK_WRITE_PICTURES=1 cargo test --quiet --test readme_pictures
git status --short docs/pictures
