#!/usr/bin/env bash
# Runs one cargo-fuzz target for a while: scripts/fuzz.sh TARGET [SECONDS]
# Targets: slice (frame slicer), pcap, pcapng, compressed (the readers), rules, filter_engines, summary, headers, setkey,
# ipsec_inbound, esp_sa, xfrm, offload (the gateway's TUN offloads), delay_profile (CDF files), nfqueue (netlink messages), http_response, observe (the web benchmark's server-side tracking). Needs the nightly toolchain;
# installs cargo-fuzz from crates.io if it is missing. Crashes land in fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
target=${1:?usage: scripts/fuzz.sh TARGET [SECONDS]}
secs=${2:-60}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
mkdir -p "corpus/$target"
cargo +nightly fuzz run "$target" "corpus/$target" -- -max_total_time="$secs" -rss_limit_mb=2048
