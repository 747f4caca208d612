#!/usr/bin/env bash
# What building kansoku needs besides Rust: libpcap's headers and the libpcap.so link (libpcap-dev), for
# libpcap's filter compiler, which kansoku links to read tcpdump's filter expressions (crates/bpf).
# Run by scripts/demo.sh and scripts/install-deps.sh; installs with apt-get (root) only what is missing.
set -euo pipefail
if [ -e /usr/include/pcap/pcap.h ] && { [ -e /usr/lib/x86_64-linux-gnu/libpcap.so ] || ldconfig -p | grep -q 'libpcap\.so '; }; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "build-deps: libpcap-dev is missing and installing it needs root: sudo apt-get install libpcap-dev" >&2
    exit 2
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends libpcap-dev >/dev/null
