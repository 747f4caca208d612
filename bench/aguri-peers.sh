#!/usr/bin/env bash
# kansoku's profiler beside the aguri tools, built from their public repositories:
#   aguri2 (github.com/necoma/aguri2) and aguri3 + agurim (github.com/necoma/agurim).
#
#   bash bench/aguri-peers.sh [WORKDIR]
#
# AGURIM_GIT and AGURI2_GIT name the repositories' git directories (default: the copies this machine's `fetch`
# tool makes under /work/.mirror); the script builds the tools with Debian's gcc and libpcap-dev (installed if
# missing). It does not run in CI: CI has no copy of those repositories (the tests check the formats against
# the tools' published and recorded output instead, crates/aguri/src/formats.rs).
#
# 1. Interoperation: kansoku's `--format aguri3` read by agurim (re-aggregated into one summary and by the hour),
#    agurim's and aguri3's output read by kansoku, aguri2 -v read by kansoku; totals compared each way.
# 2. Speed: the whole `kansoku profile -r FILE -i 60` beside `aguri2 -r FILE -s 60` and `aguri3 -r FILE -i 60`
#    (wall time, medians of ROUNDS, default 5, alternating; aguri3 once, as it takes minutes a run; the trace
#    read into the page cache with `cat` before every timed run of every tool: this VM keeps only part of 4 GB
#    of traces cached; and every trace, once written, dropped from the cache (`dd iflag=nocache count=0`) before
#    it is first read: a file just written sits in the cache in 4 KiB pages, one read from disk in large folios,
#    and the kernel's copy out of 4 KiB pages cost kansoku 8% more (0.115 against 0.106 s), aguri2 2%; so every
#    series reads what a trace read from disk is, whichever of them the cache had kept) on a trace of 2,000,000
#    frames from 16,384 active flows (`synth --flows`, heavy-tailed flow lengths, the realistic case) and one
#    where every frame is a new flow. kansoku reads each trace as `synth` wrote it (with its index: chunks
#    checked) and as tcpdump would have (a hard link without the index: no checksums to check), and both as pcapng
#    without an index, as dumpcap and tshark write them.
# Results go to standard output as markdown.
set -euo pipefail
cd "$(dirname "$0")/.."
work=${1:-$(mktemp -d /tmp/aguri-peers.XXXXXX)}
mkdir -p "$work"
AGURIM_GIT=${AGURIM_GIT:-/work/.mirror/necoma+agurim/repo}
AGURI2_GIT=${AGURI2_GIT:-/work/.mirror/necoma+aguri2/repo}
ROUNDS=${ROUNDS:-5}
export TZ=UTC

command -v gcc >/dev/null && [ -e /usr/include/pcap/pcap.h ] || {
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends build-essential libpcap-dev >/dev/null
}
build() { # NAME GITDIR SUBDIR MAKEARGS...
    local name=$1 git=$2 sub=$3
    shift 3
    [ -d "$git/.git" ] && git=$git/.git
    if [ ! -d "$git" ]; then
        echo "no copy of $name's repository at $git: set ${name^^}_GIT" >&2
        exit 2
    fi
    rm -rf "$work/$name"
    mkdir -p "$work/$name"
    git --git-dir="$git" archive HEAD "$sub" | tar -x -C "$work/$name"
    # As shipped, both fail to link with gcc >= 10 (`} __packed;` defines a variable in every file): -fcommon.
    make -s -C "$work/$name/$sub" "$@" >/dev/null 2>&1
}
build agurim "$AGURIM_GIT" src CFLAGS='-O3 -Wall -DNDEBUG -DINET6 -fcommon' agurim aguri3
build aguri2 "$AGURI2_GIT" . SYS_DEFINES=-fcommon
AGURIM=$work/agurim/src/agurim
AGURI3=$work/agurim/src/aguri3
AGURI2=$(find "$work/aguri2" -name aguri2 -type f -perm -u+x | head -1)

cargo build --release -q
K=target/release/kansoku

echo "# kansoku profile beside aguri2, aguri3 and agurim ($(date -u +%Y-%m-%d))"
echo
rev() { local g=$1; [ -d "$g/.git" ] && g=$g/.git; git --git-dir="$g" rev-parse --short HEAD; }
echo "Built from: agurim $(rev "$AGURIM_GIT"), aguri2 $(rev "$AGURI2_GIT")."
echo

# Traces: 1 minute of traffic per 100,000 frames at 1,666 frames/s ... aguri3 reads Ethernet pcap only.
$K synth -c 2000000 --flows 16384 --size 64-1518 --ip mix --rate 20000 --seed 7 -w "$work/flows.pcap" 2>/dev/null
$K synth -c 2000000 --size 64-1518 --rate 20000 --seed 8 -w "$work/new.pcap" 2>/dev/null
# As if read from disk (see 2. above): dropped from the page cache; the first `cat` reads it back.
uncache() { sync "$1"; dd if="$1" iflag=nocache count=0 status=none; }
uncache "$work/flows.pcap"
uncache "$work/new.pcap"

totals() { # FILE -> "BYTES PACKETS" over every summary in it
    $K profile --merge "$1" --json | python3 -c '
import json, sys
b = p = 0
for line in sys.stdin:
    d = json.loads(line)
    b += d["sections"][0]["bytes"] + d["non_ip_bytes"]
    p += d["sections"][0]["packets"] + d["non_ip_packets"]
print(b, p)'
}
echo "## Interoperation"
echo
echo "| step | bytes | packets | as expected |"
echo "|---|---:|---:|---|"
want=$($K stats "$work/flows.pcap" --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["wire_bytes"], d["packets"])' 2>/dev/null || true)
$K profile -r "$work/flows.pcap" -i 60 --format aguri3 -w "$work/k.agr"
got=$(totals "$work/k.agr")
echo "| kansoku --format aguri3, read back by kansoku | ${got% *} | ${got#* } | ${want:+$([ "$got" = "$want" ] && echo yes || echo "no: trace has $want")} |"
"$AGURIM" "$work/k.agr" > "$work/k-re.agr"
re=$(grep '^%total' "$work/k-re.agr" | head -1 | awk '{print $2, $4}')
echo "| agurim re-aggregating kansoku's file (its %total) | ${re% *} | ${re#* } | $([ "$re" = "$got" ] && echo yes || echo no) |"
back=$(totals "$work/k-re.agr")
echo "| agurim's output read by kansoku | ${back% *} | ${back#* } | $([ "$back" = "$got" ] && echo yes || echo no) |"
"$AGURIM" -i 3600 "$work/k.agr" > "$work/k-hour.agr"
hour=$(totals "$work/k-hour.agr")
echo "| agurim -i 3600 of kansoku's file, read by kansoku | ${hour% *} | ${hour#* } | $([ "$hour" = "$got" ] && echo yes || echo no) |"
"$AGURI3" -r "$work/flows.pcap" -i 60 -w "$work/a3.agr" 2>/dev/null
a3=$(awk '/^%total/ {b += $2; p += $4} END {print b, p}' "$work/a3.agr")
a3k=$(totals "$work/a3.agr")
echo "| aguri3's file read by kansoku (beside the sum of its %total lines) | ${a3k% *} | ${a3k#* } | $([ "$a3k" = "$a3" ] && echo yes || echo "no: $a3") |"
"$AGURI2" -r "$work/flows.pcap" -s 60 -v > "$work/a2.txt" 2>/dev/null
a2=$(awk '/^%IPv4\/IPv6\/total/ {split($2, b, "/"); split($4, p, "/"); tb += b[3]; tp += p[3]} END {print tb, tp}' "$work/a2.txt")
a2k=$(totals "$work/a2.txt")
echo "| aguri2 -v read by kansoku (beside the sum of its totals) | ${a2k% *} | ${a2k#* } | $([ "$a2k" = "$a2" ] && echo yes || echo "no: $a2") |"
echo

echo "## Speed: the whole command, wall seconds (median of $ROUNDS)"
echo
echo "| trace | kansoku profile -i 60 | the same, no index | kansoku --2d | aguri2 -s 60 | aguri3 -i 60 (one run) | aguri2 / kansoku (no index) | aguri3 / kansoku |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
secs() { # FILE CMD...: CMD's wall seconds, FILE read into the page cache first
    local t0 t1
    cat "$1" >/dev/null
    shift
    t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N); echo "$t1 - $t0" | bc
}
median() { sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for t in flows new; do
    f=$work/$t.pcap
    plain=$work/$t-plain.pcap
    ln -f "$f" "$plain"
    : > "$work/k.t"; : > "$work/kp.t"; : > "$work/k2.t"; : > "$work/a2.t"; : > "$work/a3.t"
    for r in $(seq "$ROUNDS"); do
        secs "$f" $K profile -r "$f" -i 60 -w /dev/null >> "$work/k.t"
        secs "$plain" $K profile -r "$plain" -i 60 -w /dev/null >> "$work/kp.t"
        secs "$f" $K profile -r "$f" -i 60 --2d -w /dev/null >> "$work/k2.t"
        secs "$f" "$AGURI2" -r "$f" -s 60 -w /dev/null >> "$work/a2.t"
        # aguri3 once: it takes minutes a run on these traces (264 s on 2026-11-28).
        if [ "$r" = 1 ]; then
            secs "$f" "$AGURI3" -r "$f" -i 60 -w /dev/null >> "$work/a3.t"
        fi
    done
    k=$(median < "$work/k.t"); kp=$(median < "$work/kp.t"); k2=$(median < "$work/k2.t")
    a2=$(median < "$work/a2.t"); a3=$(median < "$work/a3.t")
    name=$([ $t = flows ] && echo "2M frames, 16,384 active flows" || echo "2M frames, every one a new flow")
    printf '| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.1fx (%.1fx) | %.1fx |\n' "$name" "$k" "$kp" "$k2" "$a2" "$a3" \
        "$(echo "$a2 / $k" | bc -l)" "$(echo "$a2 / $kp" | bc -l)" "$(echo "$a3 / $k" | bc -l)"
done
echo
echo "The same traces as pcapng without an index, as dumpcap and tshark write them (kansoku read -w, the index removed):"
echo
echo "| trace | kansoku profile -i 60 | aguri2 -s 60 | aguri2 / kansoku |"
echo "|---|---:|---:|---:|"
for t in flows new; do
    ng=$work/$t.pcapng
    $K read -r "$work/$t.pcap" -w "$ng" 2>/dev/null
    rm -f "$ng.kidx"
    uncache "$ng"
    : > "$work/kn.t"; : > "$work/an.t"
    for r in $(seq "$ROUNDS"); do
        secs "$ng" $K profile -r "$ng" -i 60 -w /dev/null >> "$work/kn.t"
        secs "$ng" "$AGURI2" -r "$ng" -s 60 -w /dev/null >> "$work/an.t"
    done
    kn=$(median < "$work/kn.t"); an=$(median < "$work/an.t")
    name=$([ $t = flows ] && echo "2M frames, 16,384 active flows" || echo "2M frames, every one a new flow")
    printf '| %s | %.2f | %.2f | %.1fx |\n' "$name" "$kn" "$an" "$(echo "$an / $kn" | bc -l)"
    rm -f "$ng"
done
