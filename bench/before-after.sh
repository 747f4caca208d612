#!/usr/bin/env bash
# The same commands with two kansoku binaries, interleaved run by run, on the same files in /dev/shm:
# prints each one's median wall time and the ratio new/old (below 1: faster). Fit for any change that should keep performance.
# Usage: bench/before-after.sh OLD_BIN NEW_BIN [RUNS, default 7] [MB of trace, default 300]
# With AGURI2=path/to/aguri2 (built as bench/aguri-peers.sh builds it), also `profile -r` of the plain pcap beside
# `aguri2 -r -s 60`; always `bench ipsec` encap+decap at 1400 bytes, and `bench filter` on acl1_10k where the shared
# data is.
set -euo pipefail
old=${1:?usage: bench/before-after.sh OLD_BIN NEW_BIN [RUNS] [MB]}
new=${2:?usage: bench/before-after.sh OLD_BIN NEW_BIN [RUNS] [MB]}
runs=${3:-7}
mb=${4:-300}
cd "$(dirname "$0")/.."
dir=$(mktemp -d /dev/shm/kansoku-ba.XXXXXX)
trap 'rm -rf "$dir"' EXIT

count=$(( mb * 1000000 / (600 + 16) ))
"$new" synth -c "$count" --size 64-1518 --payload random --ip mix --compress none --no-index -w "$dir/in.pcap" 2>/dev/null
"$new" read -r "$dir/in.pcap" -w "$dir/in.pcap.lz4" 2>/dev/null
printf 'ip filter 10 pass * * udp * 53\nip filter 20 pass * * tcp * 1024-65535\nip filter 30 reject * * icmp * *\n' > "$dir/fw.rules"

ms() { local t0 t1; t0=$(date +%s%N); bash -c "$1" >/dev/null 2>&1 || true; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000000 )); }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

cases=(
  "read, print lines of the lz4 trace|read -r $dir/in.pcap.lz4"
  "read, pcap -> lz4 trace|read -r $dir/in.pcap -w $dir/out.pcap.lz4"
  "read, lz4 trace -> /dev/null (-w -)|read -r $dir/in.pcap.lz4 -w - --compress none"
  "stats of the lz4 trace|stats $dir/in.pcap.lz4"
  "filter, 3 rules, passed -> lz4|filter -r $dir/in.pcap.lz4 --rules $dir/fw.rules -w $dir/pass.pcap.lz4"
  "profile, 60 s intervals|profile -r $dir/in.pcap.lz4 -i 60 -w $dir/p.agr"
)
printf '%-42s %10s %10s %7s\n' command old_ms new_ms new/old
for c in "${cases[@]}"; do
  name=${c%%|*}; args=${c#*|}
  o=(); n=()
  for _ in $(seq "$runs"); do
    o+=("$(ms "$old $args")"); n+=("$(ms "$new $args")")
  done
  om=$(printf '%s\n' "${o[@]}" | median); nm=$(printf '%s\n' "${n[@]}" | median)
  printf '%-42s %10s %10s %7.3f\n' "$name" "$om" "$nm" "$(echo "$nm / $om" | bc -l)"
done

# Instructions per run (cachegrind: exact, unlike the wall clock of a shared machine), on the first 100,000 packets.
if command -v valgrind >/dev/null 2>&1; then
  "$new" read -r "$dir/in.pcap.lz4" -c 100000 -w "$dir/s.pcap.lz4" 2>/dev/null
  "$new" read -r "$dir/s.pcap.lz4" -w "$dir/s.pcap" --compress none --no-index 2>/dev/null
  ir() { valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null "$@" 2>&1 >/dev/null | awk '/I *refs/ {gsub(",","",$NF); print $NF}'; }
  printf '\n%-42s %14s %14s %7s\n' "instructions, 100,000 packets" old new new/old
  for c in "${cases[@]}"; do
    name=${c%%|*}; args=${c#*|}; args=${args//in.pcap/s.pcap}
    o=$(ir $old $args); n=$(ir $new $args)
    printf '%-42s %14s %14s %7.3f\n' "$name" "$o" "$n" "$(echo "$n / $o" | bc -l)"
  done
fi

# The filter engines' own figure (ns/packet, fast engine) on ClassBench acl1_10k, where the shared data is.
data=../shared/data/classbench
if [ -f "$data/acl1_10k.rules" ]; then
  printf '\nkansoku bench filter on acl1_10k (fast engine, ns/packet, median of %s runs each, interleaved)\n' "$runs"
  nspp() { "$1" bench filter --rules "$data/acl1_10k.rules" --trace "$data/acl1_10k.trace.zst" --paper-sizes 0 --min-seconds 1 --json 2>/dev/null \
    | tail -1 | python3 -c 'import json,sys; r=json.load(sys.stdin)["results"]; print([x for x in r if x["engine"]=="fast" and "ns_per_packet" in x][-1]["ns_per_packet"])'; }
  o=(); n=()
  for _ in $(seq "$runs"); do o+=("$(nspp "$old")"); n+=("$(nspp "$new")"); done
  om=$(printf '%s\n' "${o[@]}" | median); nm=$(printf '%s\n' "${n[@]}" | median)
  printf 'old %.1f new %.1f new/old %.3f\n' "$om" "$nm" "$(echo "$nm / $om" | bc -l)"
fi

# The profiler beside aguri2 on the same plain pcap, interleaved: both binaries' `profile -r -i 60`, aguri2 -s 60.
if [ -n "${AGURI2:-}" ]; then
  printf '\nprofile -r (plain pcap, -i 60) beside aguri2 -s 60, median ms of %s runs\n' "$runs"
  o=(); n=(); a=()
  for _ in $(seq "$runs"); do
    o+=("$(ms "$old profile -r $dir/in.pcap -i 60 -w $dir/o.agr")")
    n+=("$(ms "$new profile -r $dir/in.pcap -i 60 -w $dir/n.agr")")
    a+=("$(ms "$AGURI2 -r $dir/in.pcap -s 60")")
  done
  om=$(printf '%s\n' "${o[@]}" | median); nm=$(printf '%s\n' "${n[@]}" | median); am=$(printf '%s\n' "${a[@]}" | median)
  printf 'old %s ms, new %s ms, aguri2 %s ms: new/old %.3f, aguri2/old %.2f, aguri2/new %.2f\n' "$om" "$nm" "$am" \
    "$(echo "$nm / $om" | bc -l)" "$(echo "$am / $om" | bc -l)" "$(echo "$am / $nm" | bc -l)"
fi

# ESP and AH per packet at 1400 bytes (encap+decap ns, IPv4, keys per SA), interleaved runs.
printf '\nbench ipsec --sizes 1400: encap+decap ns (IPv4), median of %s runs each\n' "$runs"
suites=esp-aes-gcm-16,ah-hmac-sha1,esp-null
ns() { "$1" bench ipsec --sizes 1400 --suites "$suites" --no-openssl --min-seconds 0.3 2>/dev/null \
  | awk -F'|' -v s="$2" '$2 ~ " "s" " && $4+0 == 4 {gsub(/ /, "", $9); print $9}'; }
for s in ${suites//,/ }; do
  o=(); n=()
  for _ in $(seq "$runs"); do o+=("$(ns "$old" "$s")"); n+=("$(ns "$new" "$s")"); done
  om=$(printf '%s\n' "${o[@]}" | median); nm=$(printf '%s\n' "${n[@]}" | median)
  printf '%-20s old %6s new %6s new/old %.3f\n' "$s" "$om" "$nm" "$(echo "$nm / $om" | bc -l)"
done
