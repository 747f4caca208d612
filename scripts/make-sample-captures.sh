#!/usr/bin/env bash
# Re-creates the small real captures in tests/data/ (run as root; needs tcpdump, tshark, python3, curl, iproute2).
# Traffic goes only over loopback and a veth pair inside a network namespace this script creates and removes.
set -euo pipefail
out=${1:-"$(cd "$(dirname "$0")/.." && pwd)/tests/data"}
mkdir -p "$out"
tag="ksc$$"
ns="kansoku-sample-$tag"
work=$(mktemp -d)
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    ip link del "${tag}a" 2>/dev/null || true
    rm -rf "$work"
}
pids=()
trap cleanup EXIT

# 1. HTTP over IPv4 and IPv6 loopback plus ICMP echo, Ethernet link type, microsecond pcap.
python3 -m http.server 18080 --bind :: --directory "$work" >/dev/null 2>&1 & pids+=($!)
head -c 3000 /dev/urandom | base64 > "$work/index.html"
sleep 1
tcpdump -i lo -w "$out/lo-http-icmp.pcap" -U 'port 18080 or icmp or icmp6' 2>/dev/null & tp=$!
sleep 1
curl -s -o /dev/null http://127.0.0.1:18080/index.html
curl -s -o /dev/null 'http://[::1]:18080/index.html'
ping -c 2 -i 0.2 127.0.0.1 >/dev/null
ping -6 -c 2 -i 0.2 ::1 >/dev/null
sleep 1; kill -INT $tp; wait $tp || true

# 2. The same kind of traffic seen on the "any" device (Linux cooked capture v2), nanosecond pcap.
tcpdump -i any --time-stamp-precision=nano -w "$out/any-sll2-nano.pcap" -U 'udp port 47000 or icmp' 2>/dev/null & tp=$!
sleep 1
python3 - <<'PY'
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(5):
    s.sendto(b"kansoku sample datagram %d" % i, ("127.0.0.1", 47000))
PY
ping -c 2 -i 0.2 127.0.0.2 >/dev/null
sleep 1; kill -INT $tp; wait $tp || true

# 3. VLAN-tagged frames (802.1Q, and 802.1ad over 802.1Q) sent as raw frames over a veth pair, captured by dumpcap
#    as pcapng on both ends of the pair and on loopback, with a capture comment. (This kernel has no 8021q module, so
#    the tags are put on by the sender rather than by a VLAN device.)
ip link add "${tag}a" type veth peer name "${tag}b"
ip netns add "$ns"
ip link set "${tag}b" netns "$ns"
ip link set "${tag}a" up
ip -n "$ns" link set "${tag}b" up
tshark -q -i "${tag}a" -i lo -w "$out/veth-vlan-2if.pcapng" --capture-comment "kansoku sample: VLAN-tagged frames on a veth pair, plus loopback" -f 'vlan or udp port 47000' 2>/dev/null & tp=$!
sleep 3
python3 - "${tag}a" <<'PY'
import socket, struct, sys
def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff
def ipv4_udp(src, dst, sport, dport, payload):
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0x1234, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 17, len(udp))
    c = csum(pseudo + udp) or 0xffff
    return ip + udp[:6] + struct.pack("!H", c) + udp[8:]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
dst, src = b"\x02\x00\x00\x00\x00\x02", b"\x02\x00\x00\x00\x00\x01"
for i in range(3):
    pkt = ipv4_udp("198.18.7.1", "198.18.7.2", 40000 + i, 47000, b"vlan 7 datagram %d" % i)
    s.send(dst + src + struct.pack("!HHH", 0x8100, 7, 0x0800) + pkt)
    pkt = ipv4_udp("198.18.8.1", "198.18.8.2", 41000 + i, 47000, b"QinQ 100/8 datagram %d" % i)
    s.send(dst + src + struct.pack("!HHHHH", 0x88a8, 100, 0x8100, 8, 0x0800) + pkt)
PY
python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); [s.sendto(b"x"*i, ("127.0.0.1", 47000)) for i in (1, 100, 1000)]'
sleep 2; kill -INT $tp; wait $tp || true
# 4. ARP, IPv4 and IPv6 fragments, a DNS query and its answer, and ICMP and ICMPv6 port-unreachable errors over the
#    veth pair (tcpdump on the root end): what `kansoku anon` must rewrite everywhere.
ip addr add 198.18.9.1/24 dev "${tag}a"
ip addr add 2001:db8:9::1/64 dev "${tag}a" nodad
ip -n "$ns" addr add 198.18.9.2/24 dev "${tag}b"
ip -n "$ns" addr add 2001:db8:9::2/64 dev "${tag}b" nodad
ip -n "$ns" link set lo up
ip netns exec "$ns" python3 - <<'PY' & pids+=($!)
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("198.18.9.2", 53))
q, peer = s.recvfrom(512)
# The query with QR and RA set, one answer pointing at the question's name: 192.0.2.53.
answer = q[:2] + b"\x81\x80" + q[4:6] + b"\x00\x01\x00\x00\x00\x00" + q[12:]
answer += b"\xc0\x0c\x00\x01\x00\x01\x00\x00\x0e\x10\x00\x04" + socket.inet_aton("192.0.2.53")
s.sendto(answer, peer)
PY
sleep 1
tcpdump -i "${tag}a" -w "$out/veth-arp-frag-dns.pcap" -U 2>/dev/null & tp=$!
sleep 1
ping -c 1 -s 3000 198.18.9.2 >/dev/null
ping -6 -c 1 -s 3000 2001:db8:9::2 >/dev/null
python3 - <<'PY'
import socket, struct
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(2)
name = b"".join(bytes([len(p)]) + p for p in b"www.example.com".split(b".")) + b"\0"
s.sendto(b"\x4b\x53\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + name + b"\x00\x01\x00\x01", ("198.18.9.2", 53))
s.recvfrom(512)
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"to a closed port", ("198.18.9.2", 9))
socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b"to a closed port", ("2001:db8:9::2", 9))
PY
sleep 1; kill -INT $tp; wait $tp || true
ls -l "$out"
