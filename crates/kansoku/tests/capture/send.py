#!/usr/bin/env python3
"""Sends COUNT Ethernet frames out of IFACE through an AF_PACKET socket and writes the same frames,
in order, to SENT (a nanosecond pcap), so a test can compare what was captured with what was sent.

usage: send.py IFACE COUNT SENT [--size MIN-MAX] [--vlan-every N] [--qinq-every N] [--ipv6-every N] [--seconds S]
               [--seed N]
Frames: IPv4/UDP to 198.18.0.2:47001 from 198.18.0.1, random payload; every Nth frame carries an
802.1Q tag (VLAN 5), every Mth (--qinq-every) an 802.1ad tag (VLAN 100) over an 802.1Q one (VLAN 200).
Every Kth (--ipv6-every, counted from 2) is IPv6/UDP from 2001:db8::1 to 2001:db8::2 instead of IPv4.
With --seconds the sends are spread evenly over that time.
"""
import argparse, random, socket, struct, time

ap = argparse.ArgumentParser()
ap.add_argument("iface"); ap.add_argument("count", type=int); ap.add_argument("sent")
ap.add_argument("--size", default="60-1514"); ap.add_argument("--vlan-every", type=int, default=0)
ap.add_argument("--qinq-every", type=int, default=0)
ap.add_argument("--ipv6-every", type=int, default=0)
ap.add_argument("--seconds", type=float, default=0.0); ap.add_argument("--seed", type=int, default=1)
a = ap.parse_args()
lo, hi = (int(x) for x in a.size.split("-"))
rng = random.Random(a.seed)

def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s >> 16: s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff

def frame(i, vlan, qinq=False, v6=False):
    total = rng.randint(lo, hi)
    head = 22 if qinq else 18 if vlan else 14
    iphead = 40 if v6 else 20
    payload = struct.pack("!I", i) + rng.randbytes(max(0, total - head - iphead - 8 - 4))
    udp = struct.pack("!HHHH", 40000 + i % 1000, 47001, 8 + len(payload), 0) + payload
    if v6:
        ip = struct.pack("!IHBB16s16s", 6 << 28, len(udp), 17, 64,
                         socket.inet_pton(socket.AF_INET6, "2001:db8::1"),
                         socket.inet_pton(socket.AF_INET6, "2001:db8::2"))
    else:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), i & 0xffff, 0, 64, 17, 0,
                         socket.inet_aton("198.18.0.1"), socket.inet_aton("198.18.0.2"))
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    eth = b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01"
    if qinq:
        eth += struct.pack("!HHHH", 0x88a8, 100, 0x8100, 200)
    elif vlan:
        eth += struct.pack("!HH", 0x8100, 5)
    return eth + (b"\x86\xdd" if v6 else b"\x08\x00") + ip + udp

s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((a.iface, 0))
out = open(a.sent, "wb")
out.write(struct.pack("<IHHiIII", 0xa1b23c4d, 2, 4, 0, 0, 262144, 1))
gap = a.seconds / a.count if a.seconds > 0 else 0.0
start = time.monotonic()
for i in range(a.count):
    f = frame(i, a.vlan_every > 0 and i % a.vlan_every == 0, a.qinq_every > 0 and i % a.qinq_every == 1,
              a.ipv6_every > 0 and i % a.ipv6_every == 2)
    if gap:
        delay = start + i * gap - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    s.send(f)
    ns = time.time_ns()
    out.write(struct.pack("<IIII", ns // 10**9, ns % 10**9, len(f), len(f)) + f)
out.close()
