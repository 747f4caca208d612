#!/usr/bin/env bash
# The archive: a host's packets out of a directory of rotated lz4 traces through the key index, beside tcpdump
# scanning plain copies of the same files, in the same run; the index's size beside the archive's; and the time
# writing the key index costs (kansoku read -w with and without --no-keys) on three kinds of traffic.
#
# 2,000,000 packets (64-1518 bytes, 20,000 flows at a time, random v4 and v6 addresses) rotated into about 30 lz4
# files. Both sides read from the page cache (each file read once before timing). Prints medians of RUNS runs.
# Usage: bench/archive.sh [RUNS, default 5] [HOSTS, default 5]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
hosts=${2:-5}
cargo build --release --locked -p kansoku >/dev/null 2>&1
k=$PWD/target/release/kansoku
command -v tcpdump >/dev/null || { echo "tcpdump is needed (scripts/install-deps.sh)" >&2; exit 1; }
dir=$(mktemp -d "${TMPDIR:-/var/tmp}/kansoku-archive.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# shellcheck source=bench/lib.sh
source bench/lib.sh

mkdir -p "$dir/a" "$dir/plain"
"$k" synth -c 2000000 --size 64-1518 --flows 20000 --ip mix --proto mix --src-net 0.0.0.0/0 \
    --dst-net 0.0.0.0/0 -C 55 -w "$dir/a/x.pcap.lz4" 2>/dev/null
for f in "$dir"/a/*.pcap.lz4; do
    "$k" read -r "$f" -w "$dir/plain/$(basename "$f" .lz4)" --no-index 2>/dev/null
done
files=$(ls "$dir"/a/*.pcap.lz4 | wc -l)
archive=$(cat "$dir"/a/*.pcap.lz4 | wc -c)
kidx=$(cat "$dir"/a/*.kidx | wc -c)
kkeys=$(cat "$dir"/a/*.kkeys | wc -c)
cat "$dir"/a/* "$dir"/plain/* >/dev/null
echo "archive: $files files, $archive bytes; .kidx $kidx bytes, .kkeys $kkeys bytes:" \
    "index $(awk -v a="$archive" -v i="$kidx" -v k="$kkeys" 'BEGIN {printf "%.2f%%", 100 * (i + k) / a}') of the archive"

# Hosts: the source of a packet in files spread over the archive, v4 and v6 alternately.
printf '%-40s %8s %8s %12s %12s %8s\n' host tcpdump kansoku tcpdump_ms kansoku_ms ratio
mapfile -t lz < <(ls "$dir"/a/*.pcap.lz4)
step=$((${#lz[@]} / hosts))
((step >= 1)) || step=1
for ((i = 0; i < hosts; i++)); do
    f=${lz[$(((i * step) % ${#lz[@]}))]}
    if ((i % 2 == 0)); then pat=' (tcp|udp) [0-9]'; else pat=' (tcp|udp) \['; fi
    line=$("$k" read -r "$f" 2>/dev/null | grep -E "$pat" | sed -n 500p)
    host=$(echo "$line" | awk '{print $3}' | sed -E 's/:[0-9]+$//; s/^\[//; s/\]$//')
    [ -n "$host" ] || continue
    td=$(for p in "$dir"/plain/*.pcap; do tcpdump -nr "$p" "host $host" 2>/dev/null; done | wc -l)
    ks=$("$k" read -r "$dir/a" "host $host" 2>/dev/null | wc -l)
    t_td=$(median_ms "for p in $dir/plain/*.pcap; do tcpdump -nr \$p -w /dev/null 'host $host'; done")
    t_k=$(median_ms "$k read -r $dir/a -w $dir/out.pcap 'host $host'")
    printf '%-40s %8s %8s %12s %12s %7sx\n' "$host" "$td" "$ks" "$t_td" "$t_k" \
        "$(awk -v a="$t_td" -v b="$t_k" 'BEGIN {printf "%.1f", a / (b > 0 ? b : 1)}')"
done

# Writing: the same packets written with and without the key index, alternating.
printf '\n%-28s %14s %14s %8s\n' traffic no_keys_ms keys_ms cost
for kind in "64-byte-new-flows:--size 64 --flows 0" "64-1518-20k-flows:--size 64-1518 --flows 20000" \
    "1518-fixed:--size 1518 --payload fixed --flows 20000"; do
    name=${kind%%:*}
    args=${kind#*:}
    count=3000000
    [ "$name" = 64-1518-20k-flows ] && count=300000
    [ "$name" = 1518-fixed ] && count=150000
    # shellcheck disable=SC2086
    "$k" synth -c "$count" $args --ip mix --src-net 0.0.0.0/0 --dst-net 0.0.0.0/0 --compress none --no-index \
        -w "$dir/w.pcap" 2>/dev/null
    cat "$dir/w.pcap" >/dev/null
    t_no=$(median_ms "$k read -r $dir/w.pcap -w $dir/w-out.pcap.lz4 --no-keys")
    t_k=$(median_ms "$k read -r $dir/w.pcap -w $dir/w-out.pcap.lz4")
    printf '%-28s %14s %14s %7s%%\n' "$name" "$t_no" "$t_k" \
        "$(awk -v a="$t_no" -v b="$t_k" 'BEGIN {printf "%+.1f", 100 * (b - a) / a}')"
done
