#!/usr/bin/env bash
# Whole-tool comparison of kansoku's trace store with the stock tools, on the same files in the same run:
#   writing:  lz4 -1 (same block size, independent blocks) vs kansoku read -w - (lz4, same block size)
#   reading:  lz4 -d vs kansoku reading the lz4 trace; cat vs kansoku reading the plain pcap
# Files live in /dev/shm so the disk does not set the pace. Prints medians of RUNS runs and ratios.
# Usage: bench/trace-cli.sh [MB per traffic kind, default 200] [RUNS, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-200}
runs=${2:-5}
cargo build --release --locked -p kansoku >/dev/null 2>&1
k=$PWD/target/release/kansoku
dir=$(mktemp -d /dev/shm/kansoku-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# shellcheck source=bench/lib.sh
source bench/lib.sh

printf '%-12s %-34s %10s %10s %8s\n' traffic measurement baseline_ms kansoku_ms ratio
for kind in fixed-1518 random-1518 random-64; do
    payload=${kind%-*}
    size=${kind#*-}
    count=$(( mb * 1000000 / (size + 16) ))
    in=$dir/$kind.pcap
    $k synth -c "$count" --size "$size" --payload "$payload" --compress none --no-index -w "$in" 2>/dev/null
    lz=$dir/$kind.pcap.lz4
    $k read -r "$in" -w "$lz" 2>/dev/null
    row() { printf '%-12s %-34s %10s %10s %8.2f\n' "$kind" "$1" "$2" "$3" "$(echo "$3 / $2" | bc -l)"; }
    b=$(median_ms "lz4 -1 -B32768 -BI --no-frame-crc -c '$in' > /dev/null")
    c=$(median_ms "lz4 -1 -B32768 -BI -c '$in' > /dev/null")
    x=$(median_ms "'$k' read -r '$in' -w - > /dev/null")
    row "write lz4 (vs lz4 -1 --no-frame-crc)" "$b" "$x"
    row "write lz4 (vs lz4 -1)" "$c" "$x"
    x=$(median_ms "'$k' read -r '$in' -w '$dir/out.pcap.lz4'")
    row "write lz4 + index to a file" "$c" "$x"
    b=$(median_ms "lz4 -d -c '$lz' > /dev/null")
    x=$(median_ms "'$k' read -r '$lz' -w - --compress none > /dev/null")
    row "read lz4 (vs lz4 -d)" "$b" "$x"
    b=$(median_ms "cat '$in' > /dev/null")
    x=$(median_ms "'$k' read -r '$in' -w - --compress none > /dev/null")
    row "read+copy plain (vs cat)" "$b" "$x"
    x=$(median_ms "'$k' stats '$in'")
    row "stats: read+slice plain (vs cat)" "$b" "$x"
    rm -f "$in" "$lz" "$lz.kidx" "$dir/out.pcap.lz4" "$dir/out.pcap.lz4.kidx"
done
echo "(machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ))"
