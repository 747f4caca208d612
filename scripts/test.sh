#!/usr/bin/env bash
# Runs what CI runs: install test dependencies, format check, clippy with warnings denied, the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
