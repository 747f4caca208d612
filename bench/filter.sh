#!/usr/bin/env bash
# The filter bench on every ClassBench set in a folder (default ../shared/data/classbench), DPDK's ACL library
# beside kansoku's engines on the same rules and headers (issue 15). Installs dpdk-dev (dpdk-test-acl) when missing.
# Usage: bench/filter.sh [DIR] [extra `kansoku bench filter` flags, e.g. --json]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-../shared/data/classbench}
shift || true
bash scripts/install-deps.sh
cargo build --release --locked -p kansoku >/dev/null 2>&1
exec target/release/kansoku bench filter --rules "$dir" --peer dpdk --paper-sizes 0 "$@"
