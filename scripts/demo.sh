#!/usr/bin/env bash
# The main job on a sample trace shipped in the repo: build kansoku, print the packets of a real capture,
# store it as an LZ4-compressed trace with its seek index, summarize it, and (if tshark is installed) read it back with tshark.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-deps.sh
cargo build --release --locked -p kansoku
k=target/release/kansoku
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "== kansoku read -r tests/data/lo-http-icmp.pcap -c 10"
$k read -r tests/data/lo-http-icmp.pcap -c 10
echo "== kansoku synth: 100000 fixed-payload 1518-byte frames, stored with lz4"
$k synth -c 100000 --size 1518 --payload fixed -w "$out/fixed.pcap.lz4"
echo "== kansoku read -r tests/data/veth-vlan-2if.pcapng -w $out/sample.pcapng.lz4 --format pcapng"
$k read -r tests/data/veth-vlan-2if.pcapng -w "$out/sample.pcapng.lz4" --format pcapng
echo "== kansoku stats"
$k stats "$out/fixed.pcap.lz4" "$out/sample.pcapng.lz4"
if command -v tshark >/dev/null 2>&1; then
    echo "== tshark reads kansoku's lz4 pcapng"
    tshark -r "$out/sample.pcapng.lz4" 2>/dev/null | tail -n 4
fi
