#!/usr/bin/env bash
# What integrity costs, and where kansoku's trace store stands beside the stock compressors, in one run:
#   write:  `kansoku read -r F -w OUT.<codec>` with the default index (chunk checksums), without an index
#           (--no-index: what a write cost before checksums), with the codecs' stream checksums too (--checksums),
#           and the stock `lz4 -1` / `zstd -1` / `gzip -1` writing the same pcap to a file.
#   read:   `kansoku read -r OUT -w PLAIN.pcap` checking every chunk against the index (the default) and with
#           --no-verify, and `lz4 -d` / `zstd -d` / `gzip -d` writing the plain file.
# The commands of one round run back to back, rounds interleaved, so that a slow spell of the shared machine hits
# every command alike; each figure is the median of RUNS rounds. Files live in /dev/shm.
# Usage: bench/trace-integrity.sh [MB per traffic kind, default 100] [RUNS, default 5] [codecs, default "lz4 zst gz"]
set -euo pipefail
cd "$(dirname "$0")/.."
mb=${1:-100}
runs=${2:-5}
codecs=${3:-lz4 zst gz}
for tool in lz4 zstd gzip; do
    command -v "$tool" >/dev/null || { echo "bench/trace-integrity.sh: $tool is not installed (scripts/install-deps.sh)" >&2; exit 2; }
done
cargo build --release --locked -p kansoku >/dev/null 2>&1
k=$PWD/target/release/kansoku
dir=$(mktemp -d /dev/shm/kansoku-integrity.XXXXXX)
trap 'rm -rf "$dir"' EXIT

# Wall time of a shell command in milliseconds.
ms() {
    local t0 t1
    t0=$(date +%s%N)
    bash -c "$1" >/dev/null 2>&1 || { echo "failed: $1" >&2; exit 1; }
    t1=$(date +%s%N)
    echo $(( (t1 - t0) / 1000000 ))
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-12s %-4s %-46s %8s %8s %8s\n' traffic cdc measurement base_ms x_ms x/base
for kind in fixed-1518 random-1518 random-64; do
    payload=${kind%-*}
    size=${kind#*-}
    count=$(( mb * 1000000 / (size + 16) ))
    in=$dir/in.pcap
    $k synth -c "$count" --size "$size" --payload "$payload" -w "$in" --no-index 2>/dev/null
    for c in $codecs; do
        case $c in
            lz4) stock="lz4 -1 -q -c"; unstock="lz4 -d -q -c" ;;
            zst) stock="zstd -1 -q -c"; unstock="zstd -d -q -c" ;;
            gz) stock="gzip -1 -c"; unstock="gzip -d -c" ;;
        esac
        out=$dir/out.pcap.$c
        declare -A t=()
        names=(stock default noindex sums unstock verify noverify)
        for name in "${names[@]}"; do t[$name]=""; done
        for _ in $(seq "$runs"); do
            t[stock]+=" $(ms "$stock '$in' > '$dir/stock.$c'")"
            t[default]+=" $(ms "'$k' read -r '$in' -w '$out'")"
            t[noindex]+=" $(ms "rm -f '$out.kidx'; '$k' read -r '$in' -w '$out' --no-index")"
            t[sums]+=" $(ms "'$k' read -r '$in' -w '$out' --checksums")"
            # The reads: of the default file, with its index.
            "$k" read -r "$in" -w "$out" 2>/dev/null
            t[unstock]+=" $(ms "$unstock '$dir/stock.$c' > '$dir/plain.pcap'")"
            t[verify]+=" $(ms "'$k' read -r '$out' -w '$dir/plain.pcap'")"
            t[noverify]+=" $(ms "'$k' read -r '$out' -w '$dir/plain.pcap' --no-verify")"
        done
        row() { printf '%-12s %-4s %-46s %8s %8s %8.3f\n' "$kind" "$c" "$1" "$2" "$3" "$(echo "$3 / $2" | bc -l)"; }
        # shellcheck disable=SC2086
        {
            s=$(median ${t[stock]}); d=$(median ${t[default]}); n=$(median ${t[noindex]}); x=$(median ${t[sums]})
            u=$(median ${t[unstock]}); v=$(median ${t[verify]}); nv=$(median ${t[noverify]})
        }
        row "write: default (index) vs stock $c -1" "$s" "$d"
        row "write: default (index) vs --no-index" "$n" "$d"
        row "write: --checksums vs --no-index" "$n" "$x"
        row "read: default (verify) vs stock -d" "$u" "$v"
        row "read: default (verify) vs --no-verify" "$nv" "$v"
        rm -f "$out" "$out.kidx" "$dir/stock.$c" "$dir/plain.pcap" "$dir/plain.pcap.kidx"
    done
    rm -f "$in"
done
echo "(time ratios: below 1 is kansoku faster; machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%Y-%m-%dT%H:%MZ))"
