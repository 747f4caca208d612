#!/usr/bin/env bash
# What a tcpdump filter expression costs a read, and kansoku beside tcpdump on the same files and expressions:
#   kansoku read -r F -w OUT EXPR             beside   tcpdump -r F -w OUT EXPR                  (plain pcap)
#   kansoku read -r F.lz4 -w OUT EXPR         beside   lz4 -dc F.lz4 | tcpdump -r - -w OUT EXPR  (lz4 trace)
# and kansoku's read without an expression (its cost), interleaved run by run, medians; the whole process. The
# expressions keep most packets, some, or none. The traces and the outputs are in DIR, a directory on a disk by
# default, as a user's traces are (the traces stay in the page cache: they are read again and again); /dev/shm
# measures a tmpfs instead. Before each timed run the previous output is removed and the file system synced, so no
# run pays for another's writeback or truncation.
# Usage: bench/expression.sh [KANSOKU, default target/release/kansoku] [RUNS, default 7] [PACKETS, default 2000000]
#                            [DIR, default /var/tmp]
set -euo pipefail
cd "$(dirname "$0")/.."
k=${1:-target/release/kansoku}
runs=${2:-7}
n=${3:-2000000}
root=${4:-/var/tmp}
command -v tcpdump >/dev/null && command -v lz4 >/dev/null || { echo "needs tcpdump and lz4" >&2; exit 2; }
dir=$(mktemp -d "$root/kansoku-expr.XXXXXX")
out=$dir
trap 'rm -rf "$dir"' EXIT
"$k" synth -c "$n" --size 64-1518 --ip mix --proto mix --flows 4096 --payload random --compress none --no-index \
  -w "$dir/t.pcap" 2>/dev/null
"$k" read -r "$dir/t.pcap" -w "$dir/t.pcap.lz4" 2>/dev/null
ms() { local t0 t1; rm -f "$1"; sync; t0=$(date +%s%N); bash -c "$2" >/dev/null 2>&1; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
exprs=("not (tcp port 80 or udp port 53)" "ip6 or (udp and portrange 1024-40000)" "tcp[tcpflags] & tcp-syn != 0 and host 10.0.0.1")
kept() { "$k" stats "$dir/t.pcap" --json -- "$1" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["packets"])'; }
printf '| trace | expression | kept | kansoku, no expression ms | kansoku ms | its cost | tcpdump ms | tcpdump / kansoku |\n'
printf '|---|---|---:|---:|---:|---:|---:|---:|\n'
for f in t.pcap t.pcap.lz4; do
  for e in "${exprs[@]}"; do
    base=""; ours=""; theirs=""
    if [ "$f" = t.pcap ]; then tcpd="tcpdump -r $dir/t.pcap -w $out/o-t.pcap '$e'"; else tcpd="lz4 -dc $dir/t.pcap.lz4 | tcpdump -r - -w $out/o-t.pcap '$e'"; fi
    for _ in $(seq "$runs"); do
      base+=" $(ms "$out/o-b.pcap" "$k read -r $dir/$f -w $out/o-b.pcap")"
      ours+=" $(ms "$out/o-k.pcap" "$k read -r $dir/$f -w $out/o-k.pcap '$e'")"
      theirs+=" $(ms "$out/o-t.pcap" "$tcpd")"
    done
    b=$(echo "$base" | median); o=$(echo "$ours" | median); t=$(echo "$theirs" | median)
    printf '| %s | `%s` | %s | %s | %s | %.3f | %s | **%.2f** |\n' "$f" "$e" "$(kept "$e")" "$b" "$o" \
      "$(echo "$o / $b" | bc -l)" "$t" "$(echo "$t / $o" | bc -l)"
  done
done
echo
echo "$n packets; the same packets written by both: $(tcpdump -r "$out/o-t.pcap" 2>/dev/null | wc -l) and $("$k" stats "$out/o-k.pcap" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["packets"])') for the last."
