#!/usr/bin/env bash
# The filter bench on every ClassBench set in a folder (default ../shared/data/classbench), DPDK's ACL library
# beside kansoku's engines on the same rules and headers, then on the IPv6 images of the folder's
# 10K sets (`kansoku filter v6`: 2001:db8::/32, answers by the linear engine; kept in target/classbench-v6 and
# made again only when their source changed). Installs dpdk-dev (dpdk-test-acl) when missing.
# Usage: bench/filter.sh [DIR] [extra `kansoku bench filter` flags, e.g. --json]
# KANSOKU_BENCH_V6=0 skips the IPv6 sets; KANSOKU_BENCH_V6=only runs nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-../shared/data/classbench}
shift || true
bash scripts/install-deps.sh
cargo build --release --locked -p kansoku >/dev/null 2>&1
k=target/release/kansoku
v6=${KANSOKU_BENCH_V6:-1}
if [ "$v6" != only ]; then
  "$k" bench filter --rules "$dir" --peer dpdk --paper-sizes 0 "$@"
fi
[ "$v6" = 0 ] && exit 0
out=target/classbench-v6
mkdir -p "$out"
made=0
for rules in "$dir"/*_10k.rules; do
  [ -e "$rules" ] || continue
  name=$(basename "$rules" .rules)
  trace="$dir/$name.trace.zst"
  if [ ! -e "$out/${name}_v6.trace.zst" ] || [ "$rules" -nt "$out/${name}_v6.rules" ] || [ "$trace" -nt "$out/${name}_v6.trace.zst" ]; then
    "$k" filter v6 --rules "$rules" --trace "$trace" -o "$out"
  fi
  made=$((made + 1))
done
if [ "$made" = 0 ]; then
  echo "no *_10k.rules in $dir: no IPv6 sets to bench" >&2
  exit 1
fi
"$k" bench filter --rules "$out" --peer dpdk --paper-sizes 0 "$@"
