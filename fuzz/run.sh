#!/usr/bin/env bash
# Runs every fuzz target for a number of seconds each (default 30), on the stable toolchain
# (RUSTC_BOOTSTRAP=1 lets cargo-fuzz use the sanitizer flags it needs). Installs cargo-fuzz
# when it is missing.
#   fuzz/run.sh [seconds]
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-30}"
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz
fi
export RUSTC_BOOTSTRAP=1
for target in $(cargo fuzz list); do
    mkdir -p "corpus/$target"
    echo "== fuzzing $target for ${secs}s"
    cargo fuzz run "$target" "corpus/$target" -- -max_total_time="$secs"
done
