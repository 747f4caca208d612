#!/usr/bin/env bash
# Runs what CI runs: install test dependencies, format check, clippy with warnings denied, the docs without a
# warning, a check that the fuzz targets compile, the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# Every crate's documentation builds without a warning (broken links, private items).
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked
# The fuzz targets (fuzz/, a workspace of its own) compile on stable; running
# them needs nightly and cargo-fuzz (scripts/fuzz.sh). Their bodies are the
# fuzzing crate's, which the test suite replays over every seed corpus.
cargo check --manifest-path fuzz/Cargo.toml --bins --locked
cargo test --workspace --locked
