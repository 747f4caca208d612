#!/usr/bin/env bash
# Installs what kansoku's tests and benchmarks use besides the Rust toolchain:
# tshark (the independent reader the tests check every written file with),
# tcpdump, the lz4 and zstd command-line tools (benchmark baselines), ping and iproute2, scapy (the IPsec
# tests' independent stack, from PyPI), and the unmodified programs the IPsec gateway's end-to-end test runs
# through it: curl, python3 (its http.server) and iperf3; iptables and openssl for kansoku delay; nginx for webbench's HTTP/2; and for `kansoku bench ipsec --part link`,
# boringtun-cli (a userspace WireGuard tunnel, built from crates.io into ~/.cargo/bin) and wg
# (wireguard-tools, which keys it), the tunnel the bench runs beside kansoku's; dpdk-dev for DPDK's ACL
# (`kansoku bench filter --peer dpdk`); chromium for the web view's browser test; clickhouse-server for the
# fleet store's tests; zsh to check the completion script kansoku writes for it.
# (Plots need no font package: DejaVu Sans is embedded from the dejavu crate.)
# Idempotent and quiet when everything is already there.
set -euo pipefail
need=()
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
# libpcap's filter compiler, which kansoku links (also installed by scripts/build-deps.sh).
[ -e /usr/include/pcap/pcap.h ] || need+=(libpcap-dev)
command -v lz4 >/dev/null 2>&1 || need+=(lz4)
command -v zstd >/dev/null 2>&1 || need+=(zstd)
command -v ping >/dev/null 2>&1 || need+=(iputils-ping)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
command -v wg >/dev/null 2>&1 || need+=(wireguard-tools)
command -v taskset >/dev/null 2>&1 || need+=(util-linux)
# kansoku delay: iptables puts the clients' packets into its NFQUEUE queue;
# its tests serve HTTPS with a certificate openssl makes.
command -v iptables-restore >/dev/null 2>&1 || need+=(iptables)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# kansoku bench web runs wrk beside kansoku webbench; bench web-paper runs
# nginx and Apache (prefork) in a namespace of their own, and httperf;
# webbench --http2's tests speak HTTP/2 to nginx (over TLS and h2c).
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v nginx >/dev/null 2>&1 || need+=(nginx-light)
command -v apache2 >/dev/null 2>&1 || need+=(apache2)
command -v httperf >/dev/null 2>&1 || need+=(httperf)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
# kansoku bench filter --peer dpdk: DPDK's ACL library through dpdk-test-acl
# (Debian's dpdk-dev), measured on the same rules and headers.
command -v dpdk-test-acl >/dev/null 2>&1 || need+=(dpdk-dev)
# kansoku bench capture runs dumpcap (Wireshark's capture engine, from
# wireshark-common, which tshark brings) and netsniff-ng beside tcpdump.
[ -x /usr/bin/dumpcap ] || command -v dumpcap >/dev/null 2>&1 || need+=(wireshark-common)
[ -x /usr/sbin/netsniff-ng ] || command -v netsniff-ng >/dev/null 2>&1 || need+=(netsniff-ng)
# traceanon (libtrace): the anonymiser benchmark's peer, and the tests' second Crypto-PAn for IPv4.
command -v traceanon >/dev/null 2>&1 || need+=(libtrace-tools)
# kansoku web's browser test loads the page in headless Chromium.
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# The completion scripts kansoku generates are checked by the shells that read them.
command -v zsh >/dev/null 2>&1 || need+=(zsh)
# The fleet store's tests start a ClickHouse server of their own (Debian's 18.16).
[ -x /usr/sbin/clickhouse-server ] || command -v clickhouse-server >/dev/null 2>&1 || need+=(clickhouse-server)
if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: need root to install: ${need[*]}" >&2
        exit 2
    fi
    export DEBIAN_FRONTEND=noninteractive
    # tshark asks whether non-root users may capture; answer for it.
    echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
    # iperf3 asks whether to run a server at boot; the tests start their own.
    echo "iperf3 iperf3/start_daemon boolean false" | debconf-set-selections
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# scapy: the independent IPsec stack the ipsec tests check kansoku against
# (with the cryptography package it uses).
if ! python3 -c 'import scapy.layers.ipsec, cryptography' >/dev/null 2>&1; then
    python3 -m pip install -q scapy cryptography 2>/dev/null \
        || python3 -m pip install -q --break-system-packages scapy cryptography
fi
# yacryptopan (with pycryptodomex, the AES it uses): the independent Crypto-PAn the anonymiser's tests check
# every address kansoku anon writes against.
if ! python3 -c 'import yacryptopan, Cryptodome' >/dev/null 2>&1; then
    python3 -m pip install -q yacryptopan pycryptodomex 2>/dev/null \
        || python3 -m pip install -q --break-system-packages yacryptopan pycryptodomex
fi
# chdb: a current ClickHouse engine (PyPI) the fleet store's schema and queries are also tested on.
if ! python3 -c 'import chdb' >/dev/null 2>&1; then
    python3 -m pip install -q chdb 2>/dev/null || python3 -m pip install -q --break-system-packages chdb
fi
# boringtun-cli: the userspace WireGuard the IPsec bench compares with.
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
if ! command -v boringtun-cli >/dev/null 2>&1 && [ ! -x "$cargo_bin/boringtun-cli" ]; then
    cargo install -q --locked boringtun-cli 2>/dev/null || cargo install -q boringtun-cli
fi
for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c" >/dev/null 2>&1 || true
done
