#!/usr/bin/env bash
# Runs what CI runs: install test dependencies, format check, clippy with warnings denied, a check that the
# fuzz targets compile, the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The fuzz targets (fuzz/, a workspace of its own) compile on stable; running
# them needs nightly and cargo-fuzz (scripts/fuzz.sh). Their bodies are the
# fuzzing crate's, which the test suite replays over every seed corpus.
cargo check --manifest-path fuzz/Cargo.toml --bins --locked
cargo test --workspace --locked
